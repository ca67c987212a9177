"""Size limits of the code under reconciler/ (DESIGN.md): a module at most 450 lines, a class
300, a function (or method) 80, measured from the AST: a class or function counts from its first
decorator to its last line.

The allow-list is short and every entry says why; it names table-like code (one definition per
line of a long list) and code that other engineers own and are splitting in parallel. A new
entry needs the same kind of reason, never "too much work to split".
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "reconciler"

MODULE_LINES, CLASS_LINES, FUNCTION_LINES = 450, 300, 80

# (path relative to the repository, qualified symbol) -> why it may pass its limit
ALLOWED: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Oversize:
    path: str
    symbol: str
    kind: str
    lines: int
    limit: int

    def __str__(self) -> str:
        what = "the module" if self.kind == "module" else f"{self.kind} {self.symbol}"
        return f"{self.path}: {what} has {self.lines} lines, the limit is {self.limit}"


def _span(node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    assert node.end_lineno is not None
    return node.end_lineno - first + 1


def oversizes(source: str, path: str) -> list[Oversize]:
    """Every module, class and function of `source` that passes its limit."""
    found: list[Oversize] = []
    lines = len(source.splitlines())
    if lines > MODULE_LINES:
        found.append(Oversize(path, "(module)", "module", lines, MODULE_LINES))

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                symbol = f"{prefix}{child.name}"
                is_class = isinstance(child, ast.ClassDef)
                limit = CLASS_LINES if is_class else FUNCTION_LINES
                size = _span(child)
                if size > limit:
                    found.append(Oversize(path, symbol, "class" if is_class else "function", size, limit))
                visit(child, f"{symbol}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def _all_oversizes() -> list[Oversize]:
    found: list[Oversize] = []
    for file in sorted(PACKAGE.rglob("*.py")):
        path = file.relative_to(ROOT).as_posix()
        found.extend(oversizes(file.read_text(encoding="utf-8"), path))
    return found


def test_no_module_class_or_function_passes_its_limit() -> None:
    over = [o for o in _all_oversizes() if (o.path, o.symbol) not in ALLOWED]
    assert not over, "over the size limits (split them; see tests/project/test_limits.py):\n" + "\n".join(
        map(str, over)
    )


def test_every_allowance_is_still_needed() -> None:
    """An entry whose symbol shrank below its limit (or went) is dropped from the allow-list."""
    still = {(o.path, o.symbol) for o in _all_oversizes()}
    stale = sorted(set(ALLOWED) - still)
    assert not stale, f"allow-list entries no longer over a limit, remove them: {stale}"


def test_every_allowance_gives_a_reason() -> None:
    assert all(len(reason.split()) >= 5 for reason in ALLOWED.values())


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("x = 1\n" * 451, "m.py: the module has 451 lines, the limit is 450"),
        (
            "class Big:\n" + "    a = 1\n" * 300,
            "m.py: class Big has 301 lines, the limit is 300",
        ),
        (
            "class C:\n    @staticmethod\n    def long(self) -> None:\n" + "        pass\n" * 79,
            "m.py: function C.long has 81 lines, the limit is 80",
        ),
        (
            "def outer() -> None:\n    async def inner() -> None:\n" + "        pass\n" * 80,
            "m.py: function outer.inner has 81 lines, the limit is 80",
        ),
    ],
)
def test_the_check_names_file_symbol_size_and_limit(source: str, expected: str) -> None:
    """Guard the guard: what passes a limit is found, and the message says what and by how much."""
    assert expected in [str(o) for o in oversizes(source, "m.py")]


def test_code_at_the_limits_passes() -> None:
    source = "class C:\n" + "    def f(self) -> None:\n" + "        pass\n" * 79 + "    b = 1\n" * 219
    assert len(source.splitlines()) == 300
    assert oversizes(source, "m.py") == []


def workload_status_merge_patches(source: str) -> list[int]:
    """Lines where a MergePatch of the Workloads' status subresource is built by hand."""
    found: list[int] = []
    for node in ast.walk(ast.parse(source)):
        if not (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "MergePatch"
        ):
            continue
        names_workloads = any(isinstance(a, ast.Name) and a.id == "WORKLOADS" for a in node.args)
        status = any(
            k.arg == "subresource" and isinstance(k.value, ast.Constant) and k.value.value == "status"
            for k in node.keywords
        )
        if names_workloads and status:
            found.append(node.lineno)
    return found


def test_workload_status_writes_go_through_one_helper() -> None:
    """Every write of a Workload's status is made by patches.workload_status_write (one slot,
    one shape); a MergePatch of WORKLOADS' status anywhere else is a copy of it."""
    helper = PACKAGE / "runtime/shared/patches.py"
    copies = [
        f"{file.relative_to(ROOT).as_posix()}:{line}"
        for file in sorted(PACKAGE.rglob("*.py"))
        if file != helper
        for line in workload_status_merge_patches(file.read_text(encoding="utf-8"))
    ]
    assert not copies, f"use patches.workload_status_write for these Workload status writes: {copies}"
    assert workload_status_merge_patches(helper.read_text(encoding="utf-8")), "the helper itself is gone"
