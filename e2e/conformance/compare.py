"""Field-by-field comparison of two runs' snapshots, and the intentional differences."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

INTENTIONAL_FILE = Path(__file__).resolve().parent / "intentional-differences.yaml"


@dataclass(frozen=True)
class Difference:
    scenario: str
    checkpoint: str
    field: str
    kueue: Any
    ours: Any

    def __str__(self) -> str:
        return f"{self.checkpoint}: {self.field}\n    kueue: {self.kueue!r}\n    ours:  {self.ours!r}"


@dataclass(frozen=True)
class Intentional:
    scenario: str  # a glob
    field: str  # a glob over "checkpoint: field"
    reason: str

    def covers(self, diff: Difference) -> bool:
        return _glob(self.scenario, diff.scenario) and _glob(self.field, f"{diff.checkpoint}: {diff.field}")


def _glob(pattern: str, text: str) -> bool:
    """`*` and `?` as in a shell; everything else literal (fields are full of brackets)."""
    regex = ".*".join(".".join(re.escape(part) for part in chunk.split("?")) for chunk in pattern.split("*"))
    return re.fullmatch(regex, text, re.DOTALL) is not None


def compare(scenario: str, checkpoint: str, kueue: dict[str, Any], ours: dict[str, Any]) -> list[Difference]:
    diffs: list[Difference] = []
    for field in sorted(set(kueue) | set(ours)):
        if field == "Events":
            a, b = set(kueue.get(field, [])), set(ours.get(field, []))
            for line in sorted(a - b):
                diffs.append(Difference(scenario, checkpoint, f"Events: {line}", "present", "absent"))
            for line in sorted(b - a):
                diffs.append(Difference(scenario, checkpoint, f"Events: {line}", "absent", "present"))
        elif kueue.get(field) != ours.get(field):
            diffs.append(Difference(scenario, checkpoint, field, kueue.get(field), ours.get(field)))
    return diffs


def load_intentional(path: Path = INTENTIONAL_FILE) -> list[Intentional]:
    raw = yaml.safe_load(path.read_text()) or []
    out = []
    for i, entry in enumerate(raw):
        if not str(entry.get("reason", "")).strip():
            raise ValueError(f"{path} entry {i + 1} has no reason")
        out.append(Intentional(str(entry["scenario"]), str(entry["field"]), str(entry["reason"])))
    return out


def unexplained(diffs: list[Difference], intentional: list[Intentional]) -> list[Difference]:
    return [d for d in diffs if not any(i.covers(d) for i in intentional)]


def compare_runs(
    scenario: str, kueue: dict[str, dict[str, Any]], ours: dict[str, dict[str, Any]]
) -> list[Difference]:
    """Every checkpoint of either run, compared (a checkpoint one run lacks compares with {})."""
    diffs: list[Difference] = []
    for checkpoint in dict.fromkeys([*kueue, *ours]):
        diffs += compare(scenario, checkpoint, kueue.get(checkpoint, {}), ours.get(checkpoint, {}))
    return diffs


def closest_result(
    scenario: str,
    results: list[dict[str, dict[str, Any]]],
    ours: dict[str, dict[str, Any]],
    intentional: list[Intentional],
) -> tuple[int, list[Difference]]:
    """Of Kueue's recorded results, the one `ours` matches best: (its index, the differences).

    A match has no unexplained difference; otherwise the result with the fewest unexplained."""
    if not results:
        raise ValueError(f"{scenario}: the recording holds no result")
    scored = []
    for index, kueue in enumerate(results):
        diffs = compare_runs(scenario, kueue, ours)
        scored.append((len(unexplained(diffs, intentional)), index, diffs))
    _, index, diffs = min(scored, key=lambda s: (s[0], s[1]))
    return index, diffs
