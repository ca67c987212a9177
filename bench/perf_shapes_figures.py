"""The figures of one bench/perf_shapes.py run: per Workload class the time to admission (mean, p50,
p90) and evictions, and per run the wall time, the ClusterQueues' usage, the manager's CPU seconds,
peak RSS and API requests per Workload; printed as a compact table, or as JSON."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.e2e_admission_figures import percentile
from bench.perf_shapes_runner import Tracked

__all__ = ["ClassFigures", "Result", "class_figures", "result_lines"]


@dataclass
class ClassFigures:
    name: str
    workloads: int
    admitted: int
    mean_s: float  # time to admission: POST sent -> Admitted first seen
    p50_s: float
    p90_s: float
    evictions: int


@dataclass
class Result:
    shape: str
    scale: float
    manager: str
    workloads: int
    finished: int  # all of them, unless --within ran out
    wall: float  # s, first POST -> last Finished seen (or --within ran out)
    created_in: float  # s, first POST -> last POST returned
    classes: list[ClassFigures]
    usage_percent: float  # Kueue's checker's ClusterQueue usage
    cpu: float  # the manager's CPU seconds, first POST -> last Finished
    rss_mib: float  # its VmHWM then
    runner_patches: int  # the runner's status patches (finishes, ended reservations)
    began: float  # time.time() of the first POST
    requests: Counter[str] = field(default_factory=Counter)  # the manager's, by verb and resource

    def requests_per_workload(self) -> float:
        return sum(self.requests.values()) / max(1, self.workloads)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["requests"] = dict(self.requests)
        out["requests_per_workload"] = self.requests_per_workload()
        return out


def class_figures(tracked: Iterable[Tracked]) -> list[ClassFigures]:
    """Per class, in order of first appearance."""
    by_class: dict[str, list[Tracked]] = {}
    for t in tracked:
        by_class.setdefault(t.cls, []).append(t)
    out = []
    for name, members in by_class.items():
        waits = sorted(t.admitted_at - t.sent for t in members if t.admitted_at is not None)
        out.append(
            ClassFigures(
                name,
                len(members),
                len(waits),
                statistics.fmean(waits) if waits else float("nan"),
                percentile(waits, 50),
                percentile(waits, 90),
                sum(t.evictions for t in members),
            )
        )
    return out


def result_lines(r: Result) -> list[str]:
    done = f"{r.workloads}" if r.finished == r.workloads else f"only {r.finished} of {r.workloads}"
    lines = [
        f"== {r.manager}, shape {r.shape} at 1/{r.scale:g}: {done} Workloads finished in "
        f"{r.wall:.1f}s wall (created over {r.created_in:.1f}s); ClusterQueue usage {r.usage_percent:.1f}% "
        f"(Kueue's checker); runner patches {r.runner_patches}",
        f"  manager: CPU {r.cpu:.1f}s, peak RSS {r.rss_mib:.0f} MiB, "
        f"{r.requests_per_workload():.2f} API requests per Workload",
        "  | class | Workloads | admitted | time to admission mean / p50 / p90 (s) | evictions |",
    ]
    for c in r.classes:
        lines.append(
            f"  | {c.name} | {c.workloads} | {c.admitted} | "
            f"{c.mean_s:.1f} / {c.p50_s:.1f} / {c.p90_s:.1f} | {c.evictions} |"
        )
    return lines
