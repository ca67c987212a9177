"""Where Kueue's time went in one kept run of bench/e2e_admission.py (``--run-dir``): from Kueue's
own log (``logs/kueue/kueue.log``, zap JSON at ``--zap-log-level=2``) and the API server's audit log
beside the run folder (``<run folder>-audit/audit.log``), for the Jobs of the manager's phase
(namespaces ``bench-*``).

Prints Kueue's writes over the whole run (flood and completion) by verb, resource and response
code (409: a write refused for a stale resourceVersion), its Job reconciles per Job, the
scheduler's time waiting for heads against its time nominating and admitting, and per Job the
stages from the Workload's create to the Job's unsuspend, median and p90:

- Workload written -> its create event seen by Kueue (the watch's delivery to Kueue);
- create event -> admission written (the scheduler, from "Workload successfully admitted ...");
- admission written -> its update event seen by Kueue;
- admission's update event -> the Job unsuspended ("Job admitted, unsuspending").

Run: ``python -m bench.e2e_admission_trace RUN_FOLDER [RUN_FOLDER ...]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

Entry = dict[str, Any]


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _lines(path: Path) -> Iterator[Entry]:
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if not line.startswith("{"):
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict):
                yield entry


def _job_of(workload: str) -> str:
    """``ns/job-<job name>-<suffix>`` (Kueue's Workload name for a Job) -> ``ns/<job name>``."""
    namespace, name = workload.split("/", 1)
    return f"{namespace}/{'-'.join(name.split('-')[1:-1])}"


def _key(entry: Entry) -> str | None:
    ref = entry.get("workload")
    return f"{ref.get('namespace')}/{ref.get('name')}" if isinstance(ref, dict) else None


def _spread(values: list[float]) -> str:
    if not values:
        return "-"
    values = sorted(values)
    p90 = values[min(len(values) - 1, (9 * len(values)) // 10)]
    return f"p50 {statistics.median(values):.2f} s, p90 {p90:.2f} s (n={len(values)})"


def audit_facts(path: Path) -> tuple[Counter[str], dict[str, float]]:
    """Kueue's writes by ``verb resource code`` and when each Workload's create completed."""
    writes: Counter[str] = Counter()
    created: dict[str, float] = {}
    for entry in _lines(path):
        ref = entry.get("objectRef") or {}
        if not str(ref.get("namespace", "")).startswith("bench-"):
            continue
        if not str(entry.get("userAgent", "")).startswith("kueue"):
            continue
        verb, code = entry.get("verb"), (entry.get("responseStatus") or {}).get("code")
        if verb not in ("create", "update", "patch", "delete"):
            continue
        resource = str(ref.get("resource")) + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        writes[f"{verb} {resource} {code}"] += 1
        if resource == "workloads" and verb == "create" and code == 201:
            created[f"{ref['namespace']}/{ref.get('name')}"] = _epoch(str(entry["stageTimestamp"]))
    return writes, created


def trace(folder: Path) -> list[str]:
    log = folder / "logs" / "kueue" / "kueue.log"
    audit = folder.with_name(f"{folder.name}-audit") / "audit.log"
    writes, created = audit_facts(audit)
    create_seen: dict[str, float] = {}
    admitted: dict[str, float] = {}
    admission_seen: dict[str, float] = {}
    unsuspended: dict[str, float] = {}
    waiting = working = 0.0
    job_reconciles = 0
    for entry in _lines(log):
        msg, at, key = entry.get("msg"), _epoch(str(entry.get("ts"))), _key(entry)
        if msg == "Obtained heads":
            waiting += float(entry.get("waitDuration", 0.0))
        elif msg in ("Nomination done", "Workload processing done"):
            working += float(entry.get("duration", 0.0))
        elif msg == "Reconciling Job" and str(entry.get("namespace", "")).startswith("bench-"):
            job_reconciles += 1
        elif msg == "Job admitted, unsuspending":
            unsuspended.setdefault(str(entry.get("job")), at)
        elif key is None:
            continue
        elif msg == "Workload create event":
            create_seen.setdefault(key, at)
        elif msg == "Workload successfully admitted and assigned flavors":
            admitted.setdefault(key, at)
        elif msg == "Workload update event" and entry.get("prevStatus") == "pending":
            admission_seen.setdefault(key, at)
    jobs = max(1, len(created))
    lines = [f"== {folder}: {len(created)} Workloads created by Kueue"]
    lines.append(
        "  Kueue's writes by verb, resource and response code: "
        + ", ".join(sorted(f"{k}: {v}" for k, v in writes.items()))
    )
    lines.append(f"  Job reconciles per Job: {job_reconciles / jobs:.2f}")
    lines.append(f"  scheduler: {waiting:.1f} s waiting for heads, {working:.2f} s nominating and admitting")
    stages = [
        ("Workload written -> its create event seen", created, create_seen),
        ("create event seen -> admission written", create_seen, admitted),
        ("admission written -> its update event seen", admitted, admission_seen),
    ]
    for name, first, then in stages:
        lines.append(f"  {name}: {_spread([then[k] - first[k] for k in first if k in then])}")
    to_unsuspend = [
        unsuspended[_job_of(k)] - t for k, t in admission_seen.items() if _job_of(k) in unsuspended
    ]
    lines.append(f"  admission's update event seen -> Job unsuspended: {_spread(to_unsuspend)}")
    whole = [unsuspended[_job_of(k)] - t for k, t in admitted.items() if _job_of(k) in unsuspended]
    lines.append(f"  admission written -> Job unsuspended: {_spread(whole)}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.e2e_admission_trace", description=__doc__.split("\n")[0]
    )
    parser.add_argument("folders", nargs="+", type=Path, help="kept run folders of Kueue runs")
    for folder in parser.parse_args(argv).folders:
        for line in trace(folder):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
