"""What bench/kueue_perf.py reads and writes around Kueue's scheduler-performance runner and checker.

Reads the runner's ``summary.yaml`` (per Workload class: count, mean time to admission and to
finish, evictions; per ClusterQueue class: cpu used in mCPU x ms, nominal quota in mCPU, first and
last event) and its ``wlStates.csv`` (one row per Workload: ms to admitted, ms to finish), the
generator config (how many Workloads it creates) and the range spec (the checker's limits); writes
the command-stats file the checker reads (the manager's wall, user and system time and peak RSS);
reads the checker's ``go test -v`` output into a verdict; and lays out runs side by side.
"""

from __future__ import annotations

import csv
import io
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import yaml

__all__ = [
    "ClassFigures",
    "QueueFigures",
    "Run",
    "Summary",
    "Verdict",
    "WorkloadCounts",
    "checker_verdict",
    "cmd_stats_yaml",
    "expected_workloads",
    "generation_lines",
    "generation_spans",
    "go_duration_ms",
    "go_time",
    "parse_range",
    "parse_summary",
    "side_by_side",
    "with_cohorts",
    "workload_counts",
]


def go_time(text: str) -> datetime:
    """A Go time.Time as sigs.k8s.io/yaml writes it (RFC 3339, up to nanoseconds, zone Z or +hh:mm)."""
    match = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", text.strip())
    if match is None:
        raise ValueError(f"not an RFC 3339 time: {text!r}")
    base, fraction, zone = match.groups()
    micros = (fraction or "0")[:6].ljust(6, "0")
    stamp = datetime.fromisoformat(f"{base}.{micros}{'+00:00' if zone == 'Z' else zone}")
    return stamp.astimezone(UTC)


@dataclass(frozen=True)
class ClassFigures:
    count: int
    admission_ms: int  # mean time to admission (creation seen to Admitted seen)
    finish_ms: int
    evictions: int


@dataclass(frozen=True)
class QueueFigures:
    cpu_used: int  # mCPU x ms
    nominal_quota: int  # mCPU, summed over the class's ClusterQueues
    first: datetime
    last: datetime

    def usage_percent(self) -> float:
        """The checker's figure: cpu used / (nominal quota x the class's observed time, whole ms)."""
        elapsed_ms = int((self.last - self.first).total_seconds() * 1000)
        if self.nominal_quota == 0 or elapsed_ms == 0:
            return 0.0
        return self.cpu_used * 100 / (self.nominal_quota * elapsed_ms)


@dataclass(frozen=True)
class Summary:
    classes: dict[str, ClassFigures]
    queues: dict[str, QueueFigures]
    dropped_events: int


def _as_time(value: Any) -> datetime:
    return value.astimezone(UTC) if isinstance(value, datetime) else go_time(str(value))


def parse_summary(text: str) -> Summary:
    """The runner's summary.yaml."""
    doc = yaml.safe_load(text) or {}
    classes = {
        name: ClassFigures(
            count=int(c.get("count", 0)),
            admission_ms=int(c.get("averageTimeToAdmissionMs", 0)),
            finish_ms=int(c.get("averageTimeToFinishMs", 0)),
            evictions=int(c.get("totalEvictions", 0)),
        )
        for name, c in (doc.get("workloadClasses") or {}).items()
    }
    queues = {
        name: QueueFigures(
            cpu_used=int(q.get("cpuUsed", 0)),
            nominal_quota=int(q.get("nominalQuota", 0)),
            first=_as_time(q["firstEventTime"]),
            last=_as_time(q["lastEventTime"]),
        )
        for name, q in (doc.get("clusterQueueClasses") or {}).items()
    }
    return Summary(classes, queues, int(doc.get("droppedWorkloadEvents", 0)))


@dataclass(frozen=True)
class WorkloadCounts:
    seen: int
    admitted: int
    finished: int
    # per class: (admitted, mean ms to admission over those admitted); the summary's mean counts
    # a Workload not (yet) admitted as 0 ms, which only a run that ended early has
    admitted_means: dict[str, tuple[int, float]] = field(default_factory=dict)


def workload_counts(text: str) -> WorkloadCounts:
    """From the runner's wlStates.csv: Workloads it saw, saw admitted, saw finished (a time of 0 ms
    is the recorder's "never")."""
    rows = list(csv.DictReader(io.StringIO(text)))
    admitted = [r for r in rows if int(r["ms to admitted"]) > 0]
    finished = sum(1 for r in rows if int(r["ms to finish"]) > 0)
    by_class: dict[str, list[int]] = {}
    for r in admitted:
        by_class.setdefault(r["class name"], []).append(int(r["ms to admitted"]))
    means = {c: (len(v), statistics.fmean(v)) for c, v in sorted(by_class.items())}
    return WorkloadCounts(len(rows), len(admitted), finished, means)


def expected_workloads(generator: dict[str, Any]) -> int:
    """How many Workloads Kueue's generator creates from its config."""
    total = 0
    for cohort in generator.get("cohorts") or []:
        for queues in cohort.get("queuesSets") or []:
            per_queue = sum(
                int(s["count"]) * len(s.get("workloads") or []) for s in queues.get("workloadsSets") or []
            )
            total += int(cohort["count"]) * int(queues["count"]) * per_queue
    return total


_GENERATION = re.compile(
    r"^(\S+)\s+INFO\s+generate workload group\s+\S+\s+(Start|End) generation\s+(\{.*\})\s*$"
)


def generation_spans(log: str) -> dict[str, list[float]]:
    """From the runner's log: per creation interval (its "delay", e.g. "100ms"), how long each
    Workload set took to create (s), its "Start generation" to its "End generation"."""
    started: dict[tuple[str, str], datetime] = {}
    spans: dict[str, list[float]] = {}
    for line in log.splitlines():
        match = _GENERATION.match(line)
        if match is None:
            continue
        stamp, which, fields = go_time(match.group(1)), match.group(2), yaml.safe_load(match.group(3))
        key = (str(fields.get("namespace")), str(fields.get("delay")))
        if which == "Start":
            started[key] = stamp
        elif key in started:
            spans.setdefault(key[1], []).append((stamp - started.pop(key)).total_seconds())
    return spans


def nominal_generation(generator: dict[str, Any]) -> dict[int, int]:
    """Per creation interval (ms) of the generator config, the Workloads one set of it creates."""
    out: dict[int, int] = {}
    for cohort in generator.get("cohorts") or []:
        for queues in cohort.get("queuesSets") or []:
            for wl_set in queues.get("workloadsSets") or []:
                per = int(wl_set["count"]) * len(wl_set.get("workloads") or [])
                out[int(wl_set.get("creationIntervalMs", 0))] = per
    return out


def go_duration_ms(text: str) -> int:
    """A Go duration as time.Duration.String writes the generator's delays ("100ms", "1.2s", "1m0s")."""
    total = 0.0
    for number, unit in re.findall(r"([\d.]+)(ms|s|m|h)", text):
        total += float(number) * {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}[unit]
    return round(total)


def generation_lines(log: str, generator: dict[str, Any]) -> list[str]:
    """The Workload sets' creation time against the config's (count x interval): the excess is the
    time the runner's serial creates waited on the API server."""
    nominal = nominal_generation(generator)
    lines = []
    for delay, spans in sorted(generation_spans(log).items(), key=lambda kv: go_duration_ms(kv[0])):
        interval = go_duration_ms(delay)
        count = nominal.get(interval, 0)
        asked = count * interval / 1000
        took = statistics.median(spans)
        per_create = (took - asked) / count * 1000 if count else 0.0
        lines.append(
            f"{len(spans)} sets of {count} every {delay}: asked {asked:.0f} s, took {took:.0f} s median "
            f"(max {max(spans):.0f}): {per_create:.0f} ms per create beyond the interval"
        )
    return lines


def with_cohorts(generator: dict[str, Any], cohorts: int) -> dict[str, Any]:
    """The generator config with each cohort set's count replaced (everything else kept)."""
    if cohorts < 1:
        raise ValueError(f"--cohorts must be at least 1, not {cohorts}")
    return {**generator, "cohorts": [{**c, "count": cohorts} for c in generator.get("cohorts") or []]}


@dataclass(frozen=True)
class Limits:
    max_wall_ms: int
    min_usage: dict[str, float]
    max_admission_ms: dict[str, int]


def parse_range(text: str) -> Limits:
    """Kueue's rangespec.yaml (YAML 1.1 reads 425_000 as 425000)."""
    doc = yaml.safe_load(text) or {}
    return Limits(
        max_wall_ms=int((doc.get("cmd") or {}).get("maxWallMs", 0)),
        min_usage={k: float(v) for k, v in (doc.get("clusterQueueClassesMinUsage") or {}).items()},
        max_admission_ms={k: int(v) for k, v in (doc.get("wlClassesMaxAvgTimeToAdmissionMs") or {}).items()},
    )


def cmd_stats_yaml(wall_ms: int, user_ms: int, sys_ms: int, maxrss_kib: int) -> str:
    """The command-stats file the checker reads (Kueue's stats.CmdStats; maxrss in KiB as getrusage)."""
    return f"wallMs: {wall_ms}\nuserMs: {user_ms}\nsysMs: {sys_ms}\nmaxrss: {maxrss_kib}\n"


@dataclass(frozen=True)
class Verdict:
    passed: bool
    failures: tuple[str, ...]  # the failing subtests and their messages, as the checker printed them


_RUN = re.compile(r"^=== (?:RUN|CONT|PAUSE|NAME)\s+(\S+)")
_FAIL = re.compile(r"--- FAIL: (\S+)")
_MESSAGE = re.compile(r"\w+_test\.go:\d+: (.*)")


def checker_verdict(output: str, returncode: int) -> Verdict:
    """The checker's `-test.v` output: PASS when it exited 0; else each failed leaf subtest with the
    messages logged under it (go test -v prints them after the subtest's `=== RUN` line and the
    `--- FAIL` lines at the end; parents that fail because a child did are left out)."""
    messages: dict[str, list[str]] = {}
    failed: list[str] = []
    current = ""
    for line in output.splitlines():
        if run := _RUN.match(line):
            current = run.group(1)
        elif fail := _FAIL.search(line):
            failed.append(fail.group(1))
        elif message := _MESSAGE.search(line):
            messages.setdefault(current, []).append(message.group(1).strip())
    leaves = [n for n in failed if not any(other.startswith(n + "/") for other in failed)]
    failures = [f"{n}: {'; '.join(messages[n])}" if messages.get(n) else n for n in leaves]
    if returncode != 0 and not failures:
        tail = " ".join(output.strip().splitlines()[-3:])
        failures.append(f"checker exited {returncode}: {tail}" if tail else f"checker exited {returncode}")
    return Verdict(returncode == 0, tuple(failures))


@dataclass
class Run:
    """One run of the runner against one manager."""

    manager: str
    config: str
    wall_ms: int  # the runner's wall time (the command-stats wallMs)
    cpu_s: float  # the manager's user + system time over the run
    rss_mib: float  # the manager's peak RSS
    summary: Summary | None
    counts: WorkloadCounts | None
    verdict: Verdict
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _figure(values: Sequence[float], fmt: str) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return format(values[0], fmt)
    low, high = min(values), max(values)
    return f"{format(statistics.median(values), fmt)} ({format(low, fmt)}-{format(high, fmt)})"


def _rows(runs: Sequence[Run], limits: Limits) -> list[tuple[str, str, Any]]:
    """(label, format, getter or limit) rows for the table."""
    class_names = sorted({c for r in runs if r.summary for c in r.summary.classes}, key=str)
    queue_names = sorted({q for r in runs if r.summary for q in r.summary.queues}, key=str)
    rows: list[tuple[str, str, Any]] = [("wall (s)", ".1f", lambda r: r.wall_ms / 1000)]
    for c in class_names:
        rows.append((f"{c}: mean time to admission (s)", ".1f", _class_getter(c, "admission_ms", 1000)))
    for c in class_names:
        rows.append((f"{c}: evictions", ".0f", _class_getter(c, "evictions", 1)))
    for q in queue_names:
        rows.append((f"ClusterQueue class {q}: cpu usage (%)", ".1f", _queue_getter(q)))
    rows.append(("manager CPU (s)", ".1f", lambda r: r.cpu_s))
    rows.append(("manager peak RSS (MiB)", ".0f", lambda r: r.rss_mib))
    return rows


def _class_getter(name: str, attr: str, div: int) -> Any:
    def get(run: Run) -> float | None:
        figures = run.summary.classes.get(name) if run.summary else None
        return None if figures is None else float(getattr(figures, attr)) / div

    return get


def _queue_getter(name: str) -> Any:
    def get(run: Run) -> float | None:
        figures = run.summary.queues.get(name) if run.summary else None
        return None if figures is None else figures.usage_percent()

    return get


def _limit(label: str, limits: Limits) -> str:
    if label == "wall (s)":
        return f"<= {limits.max_wall_ms / 1000:.0f}"
    name = label.split(":", 1)[0]
    if "time to admission" in label and name in limits.max_admission_ms:
        return f"<= {limits.max_admission_ms[name] / 1000:.0f}"
    queue = name.removeprefix("ClusterQueue class ")
    if "cpu usage" in label and queue in limits.min_usage:
        return f">= {limits.min_usage[queue]:g}"
    return ""


def side_by_side(runs: Sequence[Run], limits: Limits, managers: Iterable[str]) -> list[str]:
    """A table: one column per manager (median and range over its runs), one for the range spec."""
    order = list(managers)
    by_manager = {m: [r for r in runs if r.manager == m] for m in order}
    header = ["figure", *[f"{m} (n={len(by_manager[m])})" for m in order], "Kueue's rangespec"]
    table = [header]
    for label, fmt, get in _rows(runs, limits):
        cells = [label]
        for m in order:
            values = [v for v in (get(r) for r in by_manager[m]) if v is not None]
            cells.append(_figure(values, fmt))
        table.append([*cells, _limit(label, limits)])
    verdicts = [label_verdicts(by_manager[m]) for m in order]
    table.append(["checker verdict", *verdicts, ""])
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return [" | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table]


def label_verdicts(runs: Sequence[Run]) -> str:
    return " ".join("PASS" if r.verdict.passed else "FAIL" for r in runs) or "-"
