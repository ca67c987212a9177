"""docs/claims.yaml, the index of what the README and the docs claim, cannot go stale: every quote
is still in its page (whitespace collapsed), every claim names what backs it, and every test node
id, conformance scenario and command it names exists. Nothing is run or imported: test files are
parsed with `ast`, commands are checked against their script's argparse flags (or, for a shell
script, its text)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.node_ids import check_test

ROOT = Path(__file__).resolve().parents[2]
INDEX = ROOT / "docs" / "claims.yaml"
PAGES = ["README.md", "e2e/README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))]
SCENARIOS = ROOT / "e2e" / "conformance" / "scenarios"
BACKING = ("tests", "scenarios", "commands")
KEYS = {"quote", *BACKING, "marked", "limitation"}


def _words(text: str) -> str:
    return " ".join(text.split())


@cache
def _flags(path: Path) -> frozenset[str]:
    """The options a script takes: the string arguments of its `add_argument` calls (Python), or
    every `--word` in its text (a shell script)."""
    text = path.read_text()
    if path.suffix != ".py":
        return frozenset(re.findall(r"--[a-z][a-z0-9-]*", text))
    found: set[str] = set()
    for node in ast.walk(ast.parse(text, filename=str(path))):
        call = node.func if isinstance(node, ast.Call) else None
        if isinstance(call, ast.Attribute) and call.attr == "add_argument":
            assert isinstance(node, ast.Call)
            found |= {a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
    return frozenset(found)


def check_scenario(name: str) -> str | None:
    return None if (SCENARIOS / f"{name}.yaml").is_file() else f"no conformance scenario {name}"


def check_command(command: str) -> str | None:
    """`SCRIPT [--flag [value]]...`: the script exists and takes every flag given."""
    script, *args = command.split()
    path = ROOT / script
    if not path.is_file():
        return f"{command!r}: no script {script}"
    unknown = [a for a in args if a.startswith("-") and a.split("=")[0] not in _flags(path)]
    return f"{command!r}: {script} takes no {', '.join(unknown)}" if unknown else None


def problems(page: str, entry: Mapping[str, Any], text: str) -> Iterator[str]:
    quote = entry.get("quote")
    if not isinstance(quote, str) or not quote.strip():
        yield f"{page}: an entry without a quote: {entry}"
        return
    where = f"{page}: {quote[:60]!r}"
    if extra := set(entry) - KEYS:
        yield f"{where}: unknown keys {sorted(extra)}"
    if _words(quote) not in text:
        yield f"{where}: not in the page any more"
    backed = any(entry.get(k) for k in BACKING)
    marked, limitation = entry.get("marked"), entry.get("limitation")
    if not backed and not marked and not limitation:
        yield f"{where}: backed by nothing, and neither marked in the text nor a limitation"
    if marked and _words(str(marked)) not in _words(quote):
        yield f"{where}: marked {marked!r}, but the quote does not carry the mark"
    for check, key in ((check_test, "tests"), (check_scenario, "scenarios"), (check_command, "commands")):
        for item in entry.get(key) or []:
            if (problem := check(item)) is not None:
                yield f"{where}: {problem}"


def _index() -> dict[str, list[dict[str, Any]]]:
    index = yaml.safe_load(INDEX.read_text())
    assert isinstance(index, dict)
    return index


@pytest.mark.parametrize("page", PAGES)
def test_every_claim_of_the_page_is_indexed_quoted_and_backed(page: str) -> None:
    entries = _index().get(page)
    assert entries, f"{page}: no claims indexed in docs/claims.yaml"
    text = _words((ROOT / page).read_text())
    found = [p for entry in entries for p in problems(page, entry, text)]
    assert not found, "\n".join(found)


def test_the_index_names_only_pages_that_exist() -> None:
    assert sorted(_index()) == sorted(PAGES)


def test_the_checks_can_fail() -> None:
    text = _words((ROOT / "README.md").read_text())
    good = {
        "quote": "A Kueue-compatible quota reconciler",
        "tests": ["tests/project/test_claims.py::test_the_checks_can_fail"],
    }
    assert list(problems("README.md", good, text)) == []
    broken = [
        {**good, "quote": "A Kueue-incompatible quota reconciler"},
        {**good, "tests": ["tests/project/test_claims.py::test_no_such_test"]},
        {**good, "tests": ["tests/no_such_file.py::test_x"]},
        {**good, "tests": [], "scenarios": ["no-such-scenario"]},
        {**good, "tests": [], "commands": ["bench/admission.py --no-such-flag 3"]},
        {**good, "tests": [], "commands": ["bench/no_such_bench.py"]},
        {"quote": good["quote"]},
        {"quote": good["quote"], "marked": "(not tested)"},
        {**good, "colour": "blue"},
    ]
    for entry in broken:
        assert list(problems("README.md", entry, text)), entry
