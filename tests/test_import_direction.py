"""The import direction of DESIGN.md: cli → runtime → core, runtime → kube; core is pure."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "reconciler"

# Modules the pure core must never import: I/O, concurrency, the client layers.
CORE_FORBIDDEN = {
    "asyncio",
    "aiohttp",
    "kubernetes_asyncio",
    "socket",
    "ssl",
    "subprocess",
    "threading",
    "os",
    "pathlib",
    "io",
    "shutil",
    "tempfile",
    "urllib",
    "http",
    "requests",
    "yaml",
    "structlog",
    "logging",
    "prometheus_client",
    "time",
}
# Package layers each layer may not import.
LAYER_FORBIDDEN = {
    "core": {"kube", "runtime", "observability", "cli", "config", "simulate"},
    "kube": {"runtime", "cli", "simulate"},
    "runtime": {"cli"},
    # metrics, logging and probes read plain data the runtime hands them
    "observability": {"core", "kube", "runtime", "cli", "config", "simulate"},
}


def _modules(layer: str) -> list[Path]:
    return sorted((PACKAGE / layer).rglob("*.py"))


def _imports(path: Path) -> list[tuple[str, int]]:
    """(absolute module name, line) for every import in a module of the package."""
    tree = ast.parse(path.read_text(), filename=str(path))
    rel_parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    package_parts = rel_parts[:-1]
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package_parts[: len(package_parts) - node.level + 1]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            found.append((name, node.lineno))
    return found


def _layer_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "reconciler" or len(parts) < 2:
        return None
    return parts[1]


@pytest.mark.parametrize("path", _modules("core"), ids=lambda p: p.name)
def test_core_imports_no_io(path: Path) -> None:
    for module, line in _imports(path):
        top = module.split(".")[0]
        assert top not in CORE_FORBIDDEN, f"{path.name}:{line} imports {module}: core must stay pure"


@pytest.mark.parametrize("layer", sorted(LAYER_FORBIDDEN))
def test_layers_import_one_way(layer: str) -> None:
    for path in _modules(layer) if (PACKAGE / layer).is_dir() else []:
        for module, line in _imports(path):
            target = _layer_of(module)
            assert target not in LAYER_FORBIDDEN[layer], (
                f"{path.relative_to(PACKAGE)}:{line} imports {module}: {layer} must not depend on {target}"
            )


def test_checker_sees_relative_imports() -> None:
    """Guard the guard: the relative imports of a core module resolve into the package."""
    names = {m for m, _ in _imports(PACKAGE / "core" / "flavors.py")}
    assert "reconciler.core.ledger" in names
