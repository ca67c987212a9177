"""Whether a pytest node id names a test that exists, read without importing the test file (it is
parsed with `ast`): shared by the checks of docs/claims.yaml and docs/kueue-surface.yaml."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

__all__ = ["ROOT", "check_test", "test_ids"]

ROOT = Path(__file__).resolve().parents[2]


@cache
def test_ids(path: Path) -> frozenset[str]:
    """`name` and `Class::name` of every test function of a test file, without importing it."""
    tree = ast.parse(path.read_text(), filename=str(path))
    ids: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
            ids.add(node.name)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name.startswith("test"):
                    ids.add(f"{node.name}::{item.name}")
    return frozenset(ids)


test_ids.__test__ = False  # type: ignore[attr-defined]  # not a test, whatever its name


def check_test(node_id: str) -> str | None:
    """None when `node_id` (``FILE::name`` or ``FILE::Class::name``) names an existing test, else
    what is wrong."""
    file, sep, name = node_id.partition("::")
    path = ROOT / file
    if not sep or not re.fullmatch(r"(tests|e2e|bench)/.*test_[\w]+\.py", file):
        return f"{node_id}: not a pytest node id of a test file"
    if not path.is_file():
        return f"{node_id}: no file {file}"
    if name not in test_ids(path):
        return f"{node_id}: no test {name} in {file}"
    return None
