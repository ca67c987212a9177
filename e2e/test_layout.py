"""How e2e/ is laid out: the test-bed package stands alone, has no import cycle and one Kubernetes
client, and no test module imports another (shared helpers live in support modules)."""

from __future__ import annotations

import ast
from pathlib import Path

E2E = Path(__file__).resolve().parent
ROOT = E2E.parent
TESTBED = E2E / "testbed"
GENERATED = TESTBED / "protos" / "gen"
OWN_PACKAGES = ("e2e", "reconciler", "tests", "bench")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> set[str]:
    """Modules of this repository that a file imports (``from a import b``: a, and a.b if a module)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {n for n in names if n.split(".")[0] in OWN_PACKAGES}


def library_files() -> list[Path]:
    return [
        p
        for p in sorted(TESTBED.rglob("*.py"))
        if not p.is_relative_to(GENERATED) and not p.is_relative_to(TESTBED / "tests")
    ]


def test_the_testbed_package_imports_nothing_else_of_the_repository() -> None:
    outside = {
        f"{module_name(p)} imports {name}"
        for p in library_files()
        for name in imported(p)
        if not name.startswith("e2e.testbed")
    }
    assert outside == set()


def test_the_testbed_package_has_no_import_cycle() -> None:
    modules = {module_name(p): p for p in library_files()}
    graph = {
        name: {m for m in imported(path) if m in modules and m != name} for name, path in modules.items()
    }
    cycles: list[list[str]] = []

    def visit(name: str, trail: list[str]) -> None:
        for nxt in sorted(graph[name]):
            if nxt in trail:
                cycles.append([*trail[trail.index(nxt) :], nxt])
            elif nxt not in done:
                visit(nxt, [*trail, nxt])
        done.add(name)

    done: set[str] = set()
    for name in sorted(graph):
        if name not in done:
            visit(name, [name])
    assert cycles == []


def test_one_kubernetes_client() -> None:
    """Only kubeclient.py opens HTTP client sessions in the test-bed package."""
    opening = [module_name(p) for p in library_files() if "ClientSession(" in p.read_text()]
    assert opening == ["e2e.testbed.kubeclient"]


def test_no_test_module_imports_another() -> None:
    tests = {module_name(p) for p in E2E.rglob("test_*.py")} | {
        module_name(p) for p in E2E.rglob("conftest.py")
    }
    offenders = {
        f"{module_name(p)} imports {name}"
        for p in sorted(E2E.rglob("*.py"))
        for name in imported(p)
        if name in tests or name.rsplit(".", 1)[-1].startswith("test_")
    }
    assert offenders == set()
