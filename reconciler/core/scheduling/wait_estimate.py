"""When each pending workload of a ClusterQueue may start: an estimate beyond Kueue, pure arithmetic.

The ClusterQueue's scheduler is replayed forward in time on what is known now: the admitted
workloads' usage per (flavor, resource) and when each is expected to end, and the pending
workloads in queue order with their requests and expected run times. At now and at every expected
end, the queue is walked in order and each workload that fits the ClusterQueue's nominal quota
is started there (the first flavor of its resource group with room for all it asks of that group,
as the scheduler tries them in order); with StrictFIFO the walk stops at the first that does not
fit, with BestEffortFIFO it goes on. A workload's estimated start is the time it is started in
this replay.

What is assumed (docs/visibility.md says how wrong it can be):

- an admitted workload ends at its maximum execution time when it has one (it is stopped then),
  else after the ClusterQueue's observed median run time; one older than that is taken to end now;
  without either its end is unknown and its quota held for ever in the replay;
- a pending workload runs for its maximum execution time, else the median, else for ever;
- only the ClusterQueue's own nominal quota: no borrowing from or lending to a cohort, no
  preemption, no new arrivals ahead of it, each workload's pod sets on one flavor per group.

A workload that can never fit the nominal quota, or that waits on quota held for ever, gets no
start but the reason why.
"""

from __future__ import annotations

import heapq
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from reconciler.api import Condition
from reconciler.api.times import epoch
from reconciler.core.model.clusterqueues import ResourceGroupModel

__all__ = [
    "BEYOND_LIMIT",
    "HELD_FOR_EVER",
    "NO_QUOTA",
    "OVER_NOMINAL",
    "Estimate",
    "Running",
    "Waiting",
    "admitted_since",
    "estimate_starts",
    "expected_end",
    "finished_run_seconds",
    "median_run_seconds",
]

FlavorResource = tuple[str, str]

NO_QUOTA = "it requests {resource}, for which the ClusterQueue has no quota"
OVER_NOMINAL = (
    "it requests more {resource} than any flavor's nominal quota in the ClusterQueue; "
    "it can only start by borrowing from its cohort"
)
HELD_FOR_EVER = (
    "it waits for quota held by workloads with no maximum execution time and no observed run time "
    "in this ClusterQueue"
)
BEYOND_LIMIT = "not estimated: more than {limit} workloads ahead of it"
BEHIND_BLOCKED = "it waits behind a workload that gets no estimate (StrictFIFO): {why}"
DEFAULT_LIMIT = 500


@dataclass(frozen=True, slots=True)
class Running:
    """An admitted workload of the ClusterQueue: its usage and when it is expected to end
    (seconds since the epoch; None when unknown)."""

    usage: Mapping[FlavorResource, int]
    ends_at: float | None


@dataclass(frozen=True, slots=True)
class Waiting:
    """A pending workload: what it requests in all (resource -> amount) and how long it is expected
    to run once started (None when unknown)."""

    requests: Mapping[str, int]
    run_seconds: float | None


@dataclass(frozen=True, slots=True)
class Estimate:
    """When it is expected to start (seconds since the epoch), or None and why not."""

    start: float | None
    why_unknown: str = ""


def _true_since(conditions: Sequence[Condition], kind: str) -> float | None:
    found = next((c for c in conditions if c.type == kind), None)
    if found is None or found.status != "True":
        return None
    return epoch(found.last_transition_time)


def admitted_since(conditions: Sequence[Condition]) -> float | None:
    """When the Workload was admitted (its Admitted condition's transition time, seconds since the
    epoch); None when it is not admitted."""
    return _true_since(conditions, "Admitted")


def finished_run_seconds(conditions: Sequence[Condition]) -> float | None:
    """How long a finished Workload ran: from Admitted to Finished (their transition times); None
    when it has not finished or was never admitted."""
    admitted, finished = admitted_since(conditions), _true_since(conditions, "Finished")
    if admitted is None or finished is None or finished < admitted:
        return None
    return finished - admitted


def median_run_seconds(run_seconds: Sequence[float]) -> float | None:
    """The median of observed run times; None without any."""
    return statistics.median(run_seconds) if run_seconds else None


def expected_end(
    admitted_at: float | None, deadline: float | None, median: float | None, now: float
) -> float | None:
    """An admitted workload's expected end: its maximum execution time's deadline when it has one,
    else its admission plus the median run time, never before now; None when neither is known."""
    if deadline is not None:
        return max(deadline, now)
    if median is None or admitted_at is None:
        return None
    return max(admitted_at + median, now)


class _NeverFitsError(Exception):
    """The workload can never fit the ClusterQueue's nominal quota (the message says why)."""


def _assign(
    groups: Sequence[ResourceGroupModel], requests: Mapping[str, int], free: Mapping[FlavorResource, int]
) -> dict[FlavorResource, int] | None:
    """The usage the workload takes now (the first flavor of each group with room for all it asks
    of that group), or None when it does not fit now; raises _NeverFitsError when it never can."""
    asked: dict[int, dict[str, int]] = {}
    for resource, amount in requests.items():
        if amount <= 0:
            continue
        index = next((i for i, g in enumerate(groups) if resource in g.covered), None)
        if index is None:
            raise _NeverFitsError(NO_QUOTA.format(resource=resource))
        asked.setdefault(index, {})[resource] = amount
    usage: dict[FlavorResource, int] = {}
    for index, wanted in asked.items():
        flavors = groups[index].flavors
        possible = [f for f in flavors if all(f.nominal.get(r, 0) >= a for r, a in wanted.items())]
        if not possible:
            short = next(r for r, a in wanted.items() if all(f.nominal.get(r, 0) < a for f in flavors))
            raise _NeverFitsError(OVER_NOMINAL.format(resource=short))
        chosen = next(
            (f for f in possible if all(free.get((f.name, r), 0) >= a for r, a in wanted.items())), None
        )
        if chosen is None:
            return None
        usage.update({(chosen.name, r): a for r, a in wanted.items()})
    return usage


class _Replay:
    """The ClusterQueue's free quota over the replay and the expected ends still to come."""

    def __init__(self, groups: Sequence[ResourceGroupModel], running: Sequence[Running], now: float) -> None:
        self.groups = groups
        self.free: dict[FlavorResource, int] = {
            (f.name, r): amount for g in groups for f in g.flavors for r, amount in f.nominal.items()
        }
        self.ends: list[tuple[float, int, Mapping[FlavorResource, int]]] = []
        self.now = now
        self._pushed = 0
        for item in running:
            self.take(item.usage, item.ends_at)

    def take(self, usage: Mapping[FlavorResource, int], ends_at: float | None) -> None:
        for fr, amount in usage.items():
            self.free[fr] = self.free.get(fr, 0) - amount
        if ends_at is not None:
            self._pushed += 1
            heapq.heappush(self.ends, (max(ends_at, self.now), self._pushed, usage))

    def advance(self) -> bool:
        """On to the next expected end, its quota returned; False when none is left."""
        if not self.ends:
            return False
        self.now = max(self.now, self.ends[0][0])
        while self.ends and self.ends[0][0] <= self.now:
            _, _, usage = heapq.heappop(self.ends)
            for fr, amount in usage.items():
                self.free[fr] += amount
        return True


Shape = tuple[tuple[str, int], ...]


def _shape(requests: Mapping[str, int]) -> Shape:
    return tuple(sorted((r, a) for r, a in requests.items() if a > 0))


def _walk(
    replay: _Replay,
    waiting: Sequence[Waiting],
    shapes: Sequence[Shape],
    queue: list[int],
    found: dict[int, Estimate],
    strict_fifo: bool,
) -> list[int]:
    """One walk of the queue at ``replay.now``, starting each that fits; those left waiting. Free
    quota only shrinks during a walk, so a request that did not fit is not tried again in it."""
    left: list[int] = []
    failed: set[Shape] = set()
    kinds = len({shapes[i] for i in queue})
    for n, index in enumerate(queue):
        shape = shapes[index]
        if shape in failed:
            left.append(index)
            continue
        try:
            usage = _assign(replay.groups, waiting[index].requests, replay.free)
        except _NeverFitsError as never:
            found[index] = Estimate(None, str(never))
            if strict_fifo:
                found.update({i: Estimate(None, BEHIND_BLOCKED.format(why=never)) for i in queue[n + 1 :]})
                return []
            continue
        if usage is None:
            if strict_fifo:
                return queue[n:]
            failed.add(shape)
            left.append(index)
            if len(failed) == kinds:  # nothing behind can fit now
                return left + queue[n + 1 :]
            continue
        found[index] = Estimate(replay.now)
        run = waiting[index].run_seconds
        replay.take(usage, None if run is None else replay.now + run)
    return left


def estimate_starts(
    groups: Sequence[ResourceGroupModel],
    running: Sequence[Running],
    waiting: Sequence[Waiting],
    now: float,
    *,
    strict_fifo: bool = False,
    limit: int = DEFAULT_LIMIT,
) -> list[Estimate]:
    """One estimate per ``waiting`` workload (given in queue order), as the module says."""
    replay = _Replay(groups, running, now)
    shapes = [_shape(w.requests) for w in waiting[:limit]]
    found: dict[int, Estimate] = {}
    queue = list(range(len(shapes)))
    while queue:
        queue = _walk(replay, waiting, shapes, queue, found, strict_fifo)
        if queue and not replay.advance():
            break
    unknown = Estimate(None, HELD_FOR_EVER)
    beyond = Estimate(None, BEYOND_LIMIT.format(limit=limit))
    return [found.get(i, unknown if i < limit else beyond) for i in range(len(waiting))]
