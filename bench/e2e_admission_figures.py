"""How the admission benchmark measures: a Job watch noting when each Job is first seen unsuspended,
the figures of a run (wall time, rate, latency percentiles, the API server's own stamps), and the
controller process's CPU time and peak RSS."""

from __future__ import annotations

import asyncio
import calendar
import contextlib
import os
import statistics
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e.testbed import KubeClient, api_path
from e2e.testbed.kubeclient import ApiError, Obj

# --- observing unsuspends ---------------------------------------------------------------------------


@dataclass
class Observer:
    """A Job watch over all namespaces: when each Job was first seen unsuspended (time.time())."""

    started: dict[tuple[str, str], float] = field(default_factory=dict)
    events: int = 0
    breaks: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self, kube: KubeClient) -> None:
        path = api_path("batch/v1", "jobs")
        version = str((await kube.get(path, {"limit": "1"}))["metadata"]["resourceVersion"])
        while True:
            try:
                async for event in kube.watch(path, {"resourceVersion": version}, timeout_seconds=120):
                    obj: Obj = event["object"]
                    if event["type"] == "ERROR":
                        raise RuntimeError(f"job watch failed: {obj.get('message')}")
                    version = str(obj["metadata"]["resourceVersion"])
                    if event["type"] in ("BOOKMARK", "DELETED"):
                        continue
                    self.events += 1
                    key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
                    if not obj["spec"].get("suspend") and key not in self.started:
                        self.started[key] = time.time()
                        self.changed.set()
            except (OSError, TimeoutError, ApiError) as err:
                if isinstance(err, ApiError) and err.status == 410:
                    raise
                self.breaks += 1
                await asyncio.sleep(0.2)

    async def wait_for(self, keys: set[tuple[str, str]], within: float) -> None:
        deadline = time.monotonic() + within
        while not keys <= self.started.keys():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                missing = len(keys - self.started.keys())
                raise TimeoutError(f"{missing} of {len(keys)} Jobs still suspended after {within:.0f}s")
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), timeout=min(remaining, 1.0))


@contextlib.asynccontextmanager
async def observing(kube: KubeClient) -> AsyncIterator[Observer]:
    observer = Observer()
    task = asyncio.get_running_loop().create_task(observer.run(kube), name="observer")
    try:
        await asyncio.sleep(0.5)  # the watch is open
        if task.done():
            task.result()
        yield observer
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


# --- Events and completion -----------------------------------------------------------------------


async def count_events(kube: KubeClient, namespaces: list[str], component: str) -> tuple[Counter[str], int]:
    """The manager's Events by reason, and how many Jobs got more than one ``Started``."""
    reasons: Counter[str] = Counter()
    started: Counter[str] = Counter()
    for ns in namespaces:
        events, _ = await kube.list_all(api_path("v1", "events", ns))
        for event in events:
            source = (event.get("source") or {}).get("component") or event.get("reportingComponent")
            if source == component:
                reasons[event.get("reason", "")] += 1
                if event.get("reason") == "Started":
                    started[f"{ns}/{event['involvedObject']['name']}"] += 1
    return reasons, sum(1 for n in started.values() if n > 1)


async def wait_complete(
    kube: KubeClient, namespaces: list[str], total: int, within: float
) -> tuple[int, float]:
    """How many Jobs succeeded, and after how long: all of them, or as many as within ``within`` s
    (the pods' runs are the test-bed's, not the manager's: the admission figures stand either way)."""
    began = time.monotonic()
    while True:
        done = 0
        for ns in namespaces:
            jobs, _ = await kube.list_all(api_path("batch/v1", "jobs", ns))
            done += sum(1 for j in jobs if (j.get("status") or {}).get("succeeded"))
        if done >= total or time.monotonic() - began > within:
            return done, time.monotonic() - began
        await asyncio.sleep(2.0)


# --- figures --------------------------------------------------------------------------------------


@dataclass
class Figures:
    name: str
    jobs: int
    wall: float
    created_in: float
    latencies: list[float]
    server_latencies: list[int]

    @property
    def rate(self) -> float:
        return self.jobs / self.wall

    def lines(self) -> list[str]:
        lat = [x * 1000 for x in sorted(self.latencies)]
        srv = sorted(self.server_latencies)
        return [
            f"{self.name}: {self.jobs} Jobs unsuspended in {self.wall:.1f}s wall -> "
            f"{self.rate:.1f} admissions/s (the loader created them in {self.created_in:.1f}s, "
            f"{self.jobs / self.created_in:.0f}/s)",
            f"  latency creation -> unsuspend (client clocks, ms): p50 {percentile(lat, 50):.0f}  "
            f"p99 {percentile(lat, 99):.0f}  max {lat[-1]:.0f}  mean {statistics.fmean(lat):.0f}",
            f"  same from the API server's whole-second stamps (s): p50 {percentile(srv, 50)}  "
            f"p99 {percentile(srv, 99)}  max {srv[-1] if srv else '-'}  ({len(srv)} Jobs)",
        ]


def percentile(values: list[Any], q: float) -> Any:
    if not values:
        return float("nan")
    index = min(len(values) - 1, max(0, round(q / 100 * len(values) + 0.5) - 1))
    return values[index]


def _epoch(stamp: str) -> int:
    return calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))


async def server_latencies(kube: KubeClient, namespaces: list[str], writer: str) -> list[int]:
    """Per Job: managedFields time of ``writer``'s spec.suspend minus creationTimestamp (whole seconds)."""
    out: list[int] = []
    for ns in namespaces:
        jobs, _ = await kube.list_all(api_path("batch/v1", "jobs", ns))
        for job in jobs:
            for entry in job["metadata"].get("managedFields") or []:
                fields = entry.get("fieldsV1", {}).get("f:spec", {})
                if entry.get("manager") == writer and "f:suspend" in fields and not entry.get("subresource"):
                    out.append(_epoch(entry["time"]) - _epoch(job["metadata"]["creationTimestamp"]))
    return out


def measure(
    name: str, sent: dict[tuple[str, str], float], created_in: float, observer: Observer, server: list[int]
) -> Figures:
    latencies = [observer.started[k] - t for k, t in sent.items()]
    wall = max(observer.started[k] for k in sent) - min(sent.values())
    return Figures(name, len(sent), wall, created_in, latencies, server)


def vm_hwm_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
