"""How tests/ is laid out: no test file at its top (the tests of reconciler/X/ are in tests/X/, those
of the repository as a whole in tests/project/), and no test module imports another test module or
a conftest (shared helpers live in tests/support/, shared fixtures in tests/conftest.py)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
ALLOWED_AT_THE_TOP = {"conftest.py", "__init__.py"}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(source: str, path: Path) -> set[str]:
    """Every module the source at path imports, relative imports resolved (``from a import b``: a and a.b)."""
    package = module_name(path).split(".")[:-1]
    names: set[str] = set()
    for node in ast.walk(ast.parse(source, filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def is_test_module(name: str) -> bool:
    """A test module or a conftest of tests/ (or anything inside one)."""
    parts = name.split(".")
    return parts[0] == "tests" and any(p.startswith("test_") or p == "conftest" for p in parts[1:])


def offenders(root: Path) -> list[str]:
    """`file imports module` for each Python file under root that imports a test module."""
    return [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted(root.rglob("*.py"))
        for name in sorted(imported(path.read_text(), path))
        if is_test_module(name)
    ]


def test_no_test_module_imports_another() -> None:
    assert offenders(TESTS) == []


def test_no_test_file_sits_at_the_top_of_tests() -> None:
    flat = sorted(p.name for p in TESTS.glob("*.py") if p.name not in ALLOWED_AT_THE_TOP)
    assert flat == [], f"move these into the folder of what they test (tests/X/ for reconciler/X/): {flat}"


def test_the_import_check_can_fail() -> None:
    """It sees absolute, relative and conftest imports, and lets support modules pass."""
    here = TESTS / "project" / "test_tree.py"
    assert "tests.project.test_limits" in imported("from .test_limits import ROOT\n", here)
    assert "tests.kube.test_watch" in imported("import tests.kube.test_watch\n", here)
    assert is_test_module("tests.core.scheduling.test_preemption.engine")
    assert is_test_module("tests.conftest")
    assert not is_test_module("tests.support.memory_cluster")
    assert not is_test_module("aiohttp.test_utils")
