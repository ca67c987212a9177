"""The import rules of DESIGN.md, kept as import-linter contracts in pyproject.toml.

Layers: cli over runtime over (kube | core | observability | config) over the
api floor; the core and the floor do no I/O; the core's parts and the
runtime's concerns keep their own order and independence. Every module of
reconciler/ is named in at least one contract, so a new module is placed in the
rules when it is written.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint(*config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", *map(str, config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_every_import_contract_is_kept() -> None:
    result = _lint()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_a_broken_rule_is_reported(tmp_path: Path) -> None:
    """Guard the guard: a contract the code breaks (the core imports the api floor) fails the check."""
    config = tmp_path / "contracts.toml"
    config.write_text(
        '[tool.importlinter]\nroot_package = "reconciler"\n\n'
        "[[tool.importlinter.contracts]]\n"
        'name = "core without the floor"\ntype = "forbidden"\n'
        'source_modules = ["reconciler.core"]\nforbidden_modules = ["reconciler.api"]\n'
    )
    result = _lint(config)
    assert result.returncode != 0
    assert "BROKEN" in result.stdout
    assert "reconciler.core" in result.stdout


def _layer_names(layer: str) -> Iterator[str]:
    """The modules of one layer: siblings split by | (independent) or : (not), "(x)" optional."""
    for part in layer.replace(":", "|").split("|"):
        name = part.strip().strip("()").strip()
        if name:
            yield name


def named_modules(contracts: Iterable[Mapping[str, Any]]) -> set[str]:
    """Every module a contract names: layers (under each container), independent modules, and
    the sources and targets of forbidden contracts."""
    named: set[str] = set()
    for contract in contracts:
        containers = contract.get("containers") or [""]
        for layer in contract.get("layers", ()):
            for name in _layer_names(layer):
                named.update(f"{c}.{name}" if c else name for c in containers)
        for key in ("modules", "source_modules", "forbidden_modules"):
            named.update(contract.get(key, ()))
    return named


def package_modules(root: Path, package: str) -> set[str]:
    """The dotted names of the modules and packages under `root/package` (the root package itself
    is the contracts' root_package, so not listed)."""
    found: set[str] = set()
    for file in (root / package).rglob("*.py"):
        parts = file.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if len(parts) > 1:
            found.add(".".join(parts))
    return found


def unnamed(contracts: Iterable[Mapping[str, Any]], modules: Iterable[str]) -> list[str]:
    named = named_modules(contracts)
    return sorted(m for m in modules if m not in named)


def test_every_module_is_named_in_a_contract() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    missing = unnamed(config["contracts"], package_modules(ROOT, config["root_package"]))
    assert not missing, (
        "modules in no import-linter contract; place each in the layers of its package "
        f"(pyproject.toml, [tool.importlinter]): {missing}"
    )


def test_a_module_in_no_contract_is_reported(tmp_path: Path) -> None:
    """Guard the guard: a module only its package's contract names (not itself) is missing."""
    (tmp_path / "pkg" / "core").mkdir(parents=True)
    for name in ("pkg/__init__.py", "pkg/core/__init__.py", "pkg/core/a.py", "pkg/core/b.py", "pkg/cli.py"):
        (tmp_path / name).write_text("")
    contracts = [
        {"type": "layers", "layers": ["pkg.cli", "pkg.core"]},
        {"type": "layers", "containers": ["pkg.core"], "layers": ["(a) | x"]},
    ]
    assert unnamed(contracts, package_modules(tmp_path, "pkg")) == ["pkg.core.b"]
    contracts.append({"type": "forbidden", "source_modules": ["pkg.core.b"], "forbidden_modules": []})
    assert unnamed(contracts, package_modules(tmp_path, "pkg")) == []
