"""The part of Kueue's performance runner that plays the jobs, and its recorder, for bench/perf_shapes.py.

There are no Jobs: the Workloads are created directly, so the runner stands in for them. Watching
every Workload, it notes when each is first seen admitted and, ``runtime-ms`` (a label) after its
current admission, writes ``Finished=True`` (reason ByTest) in its status. A Workload seen evicted
while still admitted has its reservation ended by the runner (``QuotaReserved=False``, reason
Pending, admission cleared, ``Admitted=False``), as a job integration would once its job stopped.
Both are merge patches of the status with the resourceVersion as precondition, fetched again on a
conflict. What it records is what Kueue's recorder does: per Workload the time to its first
admission and its evictions; per ClusterQueue the cpu usage of its status (``flavorsUsage``) over
time, from which ``usage_percent`` is Kueue's check: cpu used / (nominal quota x time observed).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Any

from bench.perf_shapes_shape import CLASS_LABEL, KUEUE, RUNTIME_LABEL
from e2e.support.workloads import parse_quantity
from e2e.testbed import KubeClient, api_path
from e2e.testbed.kubeclient import ApiError

__all__ = ["Action", "Runner", "Tracked", "UsageRecorder", "finish_patch", "observe", "unset_patch"]

Obj = dict[str, Any]
Key = tuple[str, str]


class Action(Enum):
    NONE = "none"
    FINISH = "finish"  # at Tracked.finish_due()
    UNSET = "unset"  # end the evicted Workload's reservation


@dataclass
class Tracked:
    """What the runner knows of one Workload (times are time.time())."""

    cls: str
    runtime_ms: int
    sent: float  # its POST was sent
    admitted_at: float | None = None  # first seen admitted
    admitted_since: float | None = None  # its current admission, first seen
    finished_at: float | None = None
    evictions: int = 0
    evicted: bool = False

    def finish_due(self) -> float:
        assert self.admitted_since is not None
        return self.admitted_since + self.runtime_ms / 1000


def _true(obj: Obj, kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def observe(tracked: Tracked, obj: Obj, now: float) -> Action:
    """Note a version of the Workload and say what the runner does with it."""
    evicted = _true(obj, "Evicted")
    if evicted and not tracked.evicted:
        tracked.evictions += 1
    tracked.evicted = evicted
    if _true(obj, "Finished"):
        tracked.finished_at = tracked.finished_at or now
        tracked.admitted_since = None
        return Action.NONE
    if not _true(obj, "Admitted"):
        tracked.admitted_since = None
        return Action.NONE
    if tracked.admitted_at is None:
        tracked.admitted_at = now
    if tracked.admitted_since is None:
        tracked.admitted_since = now
    return Action.UNSET if evicted else Action.FINISH


def _stamp(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _with(conditions: list[Obj], new: Obj) -> list[Obj]:
    """The conditions with ``new`` set: its transition time kept if its status did not change."""
    out = []
    for c in conditions:
        if c.get("type") != new["type"]:
            out.append(c)
        elif c.get("status") == new["status"]:
            new = {**new, "lastTransitionTime": c.get("lastTransitionTime", new["lastTransitionTime"])}
    return [*out, new]


def _condition(obj: Obj, kind: str, status: str, reason: str, message: str, now: float) -> Obj:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": _stamp(now),
        "observedGeneration": obj["metadata"].get("generation", 1),
    }


def finish_patch(obj: Obj, now: float) -> Obj:
    conditions = list((obj.get("status") or {}).get("conditions") or [])
    finished = _condition(obj, "Finished", "True", "ByTest", "By test runner", now)
    return {
        "metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
        "status": {"conditions": _with(conditions, finished)},
    }


def unset_patch(obj: Obj, now: float) -> Obj:
    conditions = list((obj.get("status") or {}).get("conditions") or [])
    reserved = _condition(obj, "QuotaReserved", "False", "Pending", "Evicted by the test runner", now)
    admitted = _condition(obj, "Admitted", "False", "NoReservation", "The workload has no reservation", now)
    return {
        "metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
        "status": {"conditions": _with(_with(conditions, reserved), admitted), "admission": None},
    }


# --- the ClusterQueues' usage, as Kueue's recorder takes it ----------------------------------------


@dataclass
class _QueueUsage:
    first: float
    last: float
    usage_milli: int  # the last status's cpu usage
    quota_milli: int
    used: float = 0.0  # milli-cpu x ms


def _first_cpu(entries: list[Obj], key: str) -> int:
    """The first flavor's first resource's ``key`` in milli-cpu (as Kueue's recorder reads it)."""
    resources = (entries[0].get("resources") or []) if entries else []
    return int(parse_quantity(resources[0].get(key, 0)) * 1000) if resources else 0


@dataclass
class UsageRecorder:
    queues: dict[str, _QueueUsage] = field(default_factory=dict)

    def observe(self, cq: Obj, now: float) -> None:
        status, spec = cq.get("status") or {}, cq.get("spec") or {}
        usage = _first_cpu(status.get("flavorsUsage") or [], "total")
        groups = spec.get("resourceGroups") or [{}]
        quota = _first_cpu(groups[0].get("flavors") or [], "nominalQuota")
        name = cq["metadata"]["name"]
        state = self.queues.get(name)
        if state is None:
            self.queues[name] = _QueueUsage(now, now, usage, quota)
            return
        state.used += state.usage_milli * (now - state.last) * 1000
        state.last, state.usage_milli, state.quota_milli = now, usage, quota

    def usage_percent(self) -> float:
        """Kueue's checker: cpu used / (nominal quota x the span from the first event to the last)."""
        if not self.queues:
            return float("nan")
        span_ms = (
            max(q.last for q in self.queues.values()) - min(q.first for q in self.queues.values())
        ) * 1000
        quota = sum(q.quota_milli for q in self.queues.values())
        used = sum(q.used for q in self.queues.values())
        return used * 100 / (quota * span_ms) if quota and span_ms else float("nan")


# --- watching and writing -------------------------------------------------------------------------


async def watch_forever(kube: KubeClient, path: str, handle: Callable[[Obj, float], None]) -> None:
    """Every ADDED/MODIFIED object of ``path`` (all namespaces), with the time it arrived."""
    version = str((await kube.get(path, {"limit": "1"}))["metadata"]["resourceVersion"])
    while True:
        try:
            async for event in kube.watch(path, {"resourceVersion": version}, timeout_seconds=120):
                obj: Obj = event["object"]
                if event["type"] == "ERROR":
                    raise RuntimeError(f"watch {path} failed: {obj.get('message')}")
                version = str(obj["metadata"]["resourceVersion"])
                if event["type"] in ("ADDED", "MODIFIED"):
                    handle(obj, time.time())
        except (OSError, TimeoutError) as err:
            if isinstance(err, ApiError):
                raise
            await asyncio.sleep(0.2)


@dataclass
class Runner:
    """Finishes admitted Workloads after their runtime and ends evicted ones' reservations."""

    kube: KubeClient
    tracked: dict[Key, Tracked] = field(default_factory=dict)
    latest: dict[Key, Obj] = field(default_factory=dict)
    timers: dict[Key, tuple[Action, asyncio.Task[None]]] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    patches: int = 0
    conflicts: int = 0

    def expect(self, obj: Obj, sent: float) -> Key:
        """Track a Workload about to be created (before its POST: the watch may see it first)."""
        meta = obj["metadata"]
        key = (meta["namespace"], meta["name"])
        self.tracked[key] = Tracked(meta["labels"][CLASS_LABEL], int(meta["labels"][RUNTIME_LABEL]), sent)
        return key

    def handle(self, obj: Obj, now: float) -> None:
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        tracked = self.tracked.get(key)
        if tracked is None:
            return  # not one of ours
        self.latest[key] = obj
        action = observe(tracked, obj, now)
        pending = self.timers.get(key)
        if pending is not None and pending[0] is not action:
            self.timers.pop(key)[1].cancel()  # (a finish waiting for a Workload since evicted)
            pending = None
        if action is Action.NONE:
            self.changed.set()
        elif pending is None:
            due = tracked.finish_due() if action is Action.FINISH else now
            task = asyncio.get_running_loop().create_task(self._write_at(key, due))
            self.timers[key] = (action, task)

    async def _write_at(self, key: Key, due: float) -> None:
        try:
            await asyncio.sleep(max(0.0, due - time.time()))
            await self._write(key)
        finally:
            mine = self.timers.get(key)
            if mine is not None and mine[1] is asyncio.current_task():
                del self.timers[key]

    async def _write(self, key: Key) -> None:
        path = api_path(KUEUE, "workloads", key[0], key[1], "status")
        for _ in range(10):
            obj = self.latest[key]
            if not _true(obj, "Admitted") or _true(obj, "Finished"):
                return
            evicted = _true(obj, "Evicted")
            body = unset_patch(obj, time.time()) if evicted else finish_patch(obj, time.time())
            try:
                self.patches += 1
                fresh = await self.kube.patch(path, body)
            except ApiError as err:
                if err.status != 409:
                    raise
                self.conflicts += 1
                self.latest[key] = await self.kube.get(path)
                continue
            if not evicted:
                return
            self.latest[key] = fresh
            return

    def finished(self) -> int:
        return sum(1 for t in self.tracked.values() if t.finished_at is not None)

    async def wait_finished(self, total: int, within: float) -> None:
        deadline = time.monotonic() + within
        while self.finished() < total:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(
                    f"{total - self.finished()} of {total} Workloads unfinished after {within:.0f}s"
                )
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), timeout=min(remaining, 1.0))
