"""The figures of one run of bench/e2e_admission.py (one manager, then its ceiling, on one
test-bed) and, for ``--repeat N``, their summary per manager: median and range of each figure,
the ratio of this controller to tuned Kueue per pair of adjacent runs, and the API requests per
admitted Job by verb and resource of every manager side by side."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from bench.e2e_admission_requests import add_up, request_table

__all__ = ["RunResult", "summary"]


@dataclass
class RunResult:
    manager: str  # a key of MANAGERS
    jobs: int
    rate: float  # admissions/s
    ceiling_rate: float
    p50: float  # seconds, creation -> unsuspend (client clocks)
    p99: float
    cpu: float  # the manager's CPU seconds, first POST to last unsuspend
    rss_mib: float  # the manager's peak RSS (VmHWM) at the end of its phase
    requests: Counter[str] = field(default_factory=Counter)  # the manager's, first POST to its stop
    ceiling_requests: Counter[str] = field(default_factory=Counter)  # the bare client's

    @property
    def ratio(self) -> float:
        return self.rate / self.ceiling_rate


FIGURES: list[tuple[str, Callable[[RunResult], float], str]] = [
    ("admissions/s", lambda r: r.rate, "{:.1f}"),
    ("ratio to its ceiling", lambda r: r.ratio, "{:.2f}"),
    ("p50 s", lambda r: r.p50, "{:.1f}"),
    ("p99 s", lambda r: r.p99, "{:.1f}"),
    ("CPU s", lambda r: r.cpu, "{:.1f}"),
    ("peak RSS MiB", lambda r: r.rss_mib, "{:.0f}"),
]


def _median_range(values: list[float], fmt: str) -> str:
    med = statistics.median(values)
    return f"{fmt.format(med)} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def figure_lines(results: list[RunResult], order: list[str]) -> list[str]:
    lines = ["== per manager, median (range) over its runs:"]
    head = " | ".join(name for name, _, _ in FIGURES)
    lines.append(f"  | manager | runs | {head} |")
    for manager in order:
        runs = [r for r in results if r.manager == manager]
        if not runs:
            continue
        cells = " | ".join(_median_range([get(r) for r in runs], fmt) for _, get, fmt in FIGURES)
        lines.append(f"  | {manager} | {len(runs)} | {cells} |")
    return lines


def pair_lines(results: list[RunResult], mine: str = "ours", theirs: str = "kueue-tuned") -> list[str]:
    """Ratio mine/theirs per pair of adjacent runs (the i-th run of each, run one after the other)."""
    a = [r for r in results if r.manager == mine]
    b = [r for r in results if r.manager == theirs]
    pairs = list(zip(a, b, strict=False))
    if not pairs:
        return []
    lines = [f"== ratio {mine} / {theirs} per pair of adjacent runs:"]
    columns: dict[str, list[float]] = {
        "admissions/s": [],
        "ratio to ceiling": [],
        "p50": [],
        "p99": [],
        "CPU": [],
    }
    for i, (x, y) in enumerate(pairs, 1):
        values = {
            "admissions/s": x.rate / y.rate,
            "ratio to ceiling": x.ratio / y.ratio,
            "p50": x.p50 / y.p50,
            "p99": x.p99 / y.p99,
            "CPU": x.cpu / y.cpu if y.cpu else float("nan"),
        }
        for key, value in values.items():
            columns[key].append(value)
        lines.append(f"  pair {i}: " + "  ".join(f"{k} {v:.2f}" for k, v in values.items()))
    lines.append("  median: " + "  ".join(f"{k} {statistics.median(v):.2f}" for k, v in columns.items()))
    return lines


def summary(results: list[RunResult], order: list[str]) -> list[str]:
    lines = figure_lines(results, order)
    lines += pair_lines(results)
    columns: dict[str, tuple[Counter[str], int]] = {}
    for manager in order:
        runs = [r for r in results if r.manager == manager]
        if runs:
            columns[manager] = (add_up(r.requests for r in runs), sum(r.jobs for r in runs))
    if results:
        columns["bare client"] = (add_up(r.ceiling_requests for r in results), sum(r.jobs for r in results))
    if any(counts for counts, _ in columns.values()):
        lines.append("== API requests per admitted Job (audit log), by verb and resource, all runs:")
        lines += request_table(columns)
    return lines
