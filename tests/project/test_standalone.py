"""The tests stand alone in the repository: none reads a file outside it (such as the
seed walkthrough beside the project); examples/ is the walkthrough they use."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# A path climbing out of the repository root: `ROOT.parent`, `parents[3]` from tests/x/y.py,
# or a literal "../shared" / "../seed".
_OUTSIDE = re.compile(r"ROOT\.parent\b|\.\./(shared|seed)|\"shared\"\s*/|/\s*\"seed-walkthrough\"")


def outside_references(text: str) -> list[str]:
    """Lines naming a path outside the repository, except checks that one is absent."""
    lines = [line.strip() for line in text.splitlines()]
    return [line for line in lines if _OUTSIDE.search(line) and not line.startswith("assert ")]


def test_no_test_reads_outside_the_repository() -> None:
    this = Path(__file__).resolve()
    for folder in ("tests", "e2e", "bench"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.resolve() == this:
                continue
            assert outside_references(path.read_text()) == [], f"{path.relative_to(ROOT)} reads outside"


@pytest.mark.parametrize(
    ("line", "outside"),
    [
        ('SEED = ROOT.parent / "shared" / "seed-walkthrough"', True),
        ('path = Path("../shared/seed-walkthrough")', True),
        ('EXAMPLES = ROOT / "examples" / "walkthrough"', False),
        ('assert "../shared" not in path.read_text()', False),
        ('problem = _problem([{"name": "g", "resourceClaimName": "shared"}], [])', False),
    ],
)
def test_the_check_can_fail(line: str, outside: bool) -> None:
    assert bool(outside_references(line)) is outside


def test_the_walkthrough_is_in_the_repository() -> None:
    names = sorted(p.name for p in (ROOT / "examples" / "walkthrough").glob("*.yaml"))
    assert names == [
        "00-configuration.yaml",
        "10-queues.yaml",
        "20-resourceclaimtemplate.yaml",
        "30-job-running-a.yaml",
        "31-job-pending-b.yaml",
    ]
