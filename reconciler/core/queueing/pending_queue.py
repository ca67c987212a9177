"""One ClusterQueue's pending queue: order, parking of what does not fit, wake-ups.

Order inside a ClusterQueue is Kueue's: higher priority first, then the older
queue-order timestamp, then UID. With admission fair sharing the score of the workload's
LocalQueue comes first (lowest first); `rescore` re-sorts when scores move.
With BestEffortFIFO a workload that does not fit is parked so the ones behind
it can be tried, and parked workloads get another chance when quota is released;
with StrictFIFO the head blocks the queue until it fits.

Parked workloads are grouped by *shape* (everything admission looks at: pod
sets, requests, node constraints). Workloads of one shape get the same
verdict, so after a release only the first of each group, in queue order,
needs to be evaluated: the cost of a release is the number of distinct
shapes, not the number of waiting workloads.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterator, Set
from dataclasses import dataclass, field, replace

__all__ = ["Candidate", "PendingQueue", "QueueEntry"]

WorkloadKey = tuple[str, str]


@dataclass(frozen=True, slots=True, order=True)
class QueueEntry:
    # The LocalQueue's admission fair sharing score as a sort key (0 without it).
    score: float
    neg_priority: int
    timestamp: str
    uid: str
    key: WorkloadKey


@dataclass(frozen=True, slots=True)
class Candidate:
    """The next workload to evaluate; `group` is set when it comes from a parked group."""

    key: WorkloadKey
    group: Hashable | None


@dataclass(slots=True)
class _Group:
    heap: list[QueueEntry] = field(default_factory=list)
    # Evaluated in the current pass and still not fitting: skip until quota moves.
    settled: bool = True


@dataclass(slots=True)
class PendingQueue:
    strict_fifo: bool = False
    _heap: list[QueueEntry] = field(default_factory=list)
    _live: dict[WorkloadKey, QueueEntry] = field(default_factory=dict)
    _groups: dict[Hashable, _Group] = field(default_factory=dict)
    _parked: dict[WorkloadKey, tuple[Hashable, QueueEntry]] = field(default_factory=dict)

    # --- membership ---------------------------------------------------------------------

    def push(self, key: WorkloadKey, priority: int, timestamp: str, uid: str, score: float = 0.0) -> None:
        """Queue a workload to be evaluated (new, changed or back from eviction)."""
        self.remove(key)
        entry = QueueEntry(score, -priority, timestamp, uid, key)
        self._live[key] = entry
        heapq.heappush(self._heap, entry)

    def remove(self, key: WorkloadKey) -> bool:
        """Forget a workload; heap entries are dropped lazily when they surface."""
        found = self._live.pop(key, None) is not None
        parked = self._parked.pop(key, None)
        if parked is not None:
            group = self._groups.get(parked[0])
            if group is not None and len(group.heap) > 2 * len(self._parked) + 16:
                self._compact()
        return found or parked is not None

    def park(self, key: WorkloadKey, group_key: Hashable) -> None:
        """Set aside a workload that was evaluated and did not fit."""
        entry = self._live.pop(key, None)
        if entry is None:
            parked = self._parked.get(key)
            if parked is None or parked[0] == group_key:
                return
            entry = parked[1]
        self._parked[key] = (group_key, entry)
        group = self._groups.setdefault(group_key, _Group())
        heapq.heappush(group.heap, entry)

    def __len__(self) -> int:
        return len(self._live) + len(self._parked)

    def active_count(self) -> int:
        return len(self._live)

    def is_active(self, key: WorkloadKey) -> bool:
        """Queued for evaluation (not set aside as inadmissible)."""
        return key in self._live

    def inadmissible_count(self) -> int:
        return len(self._parked)

    # --- scheduling passes --------------------------------------------------------------

    def wake_parked(self) -> None:
        """Quota or the queue's configuration changed: every parked group may fit now."""
        for group in self._groups.values():
            group.settled = False

    def settle(self, group_key: Hashable) -> None:
        """The group's first workload did not fit: the rest of it would not either."""
        group = self._groups.get(group_key)
        if group is not None:
            group.settled = True

    def _group_head(self, group_key: Hashable, group: _Group) -> QueueEntry | None:
        heap = group.heap
        while heap:
            parked = self._parked.get(heap[0].key)
            if parked is not None and parked[1] is heap[0] and parked[0] == group_key:
                return heap[0]
            heapq.heappop(heap)
        return None

    def _active_head(self) -> QueueEntry | None:
        heap = self._heap
        while heap and self._live.get(heap[0].key) is not heap[0]:
            heapq.heappop(heap)
        return heap[0] if heap else None

    def next_candidate(self) -> Candidate | None:
        """The first workload in queue order among new ones and unsettled parked groups."""
        best = self._active_head()
        best_group: Hashable | None = None
        for group_key, group in list(self._groups.items()):
            head = self._group_head(group_key, group)
            if head is None:
                del self._groups[group_key]
                continue
            if group.settled:
                continue
            if best is None or head < best:
                best, best_group = head, group_key
        if best is None:
            return None
        return Candidate(best.key, best_group)

    def take(self, candidate: Candidate) -> None:
        """Remove an admitted candidate from the queue."""
        self.remove(candidate.key)

    def group_members(self, group_key: Hashable) -> Iterator[WorkloadKey]:
        group = self._groups.get(group_key)
        if group is None:
            return iter(())
        return (e.key for e in group.heap if self._parked.get(e.key, (None, None))[1] is e)

    def group_members_among(self, group_key: Hashable, keys: Set[WorkloadKey]) -> list[WorkloadKey]:
        """The members of a parked group found in `keys`, in the order of `group_members`."""
        group = self._groups.get(group_key)
        if group is None:
            return []
        parked = self._parked
        found = [k for k in keys if (p := parked.get(k)) is not None and p[0] == group_key]
        if len(found) < 2:
            return found
        entries = {id(parked[k][1]): k for k in found}
        return [entries[id(e)] for e in group.heap if id(e) in entries]

    def ordered_keys(self) -> list[WorkloadKey]:
        """Every waiting workload in queue order (for status and tests)."""
        entries = sorted([*self._live.values(), *(e for _, e in self._parked.values())])
        return [e.key for e in entries]

    def rescore(self, score_of: Callable[[WorkloadKey], float]) -> None:
        """Scores moved (admission fair sharing): every entry, queued or parked, takes its new one."""
        live: dict[WorkloadKey, QueueEntry] = {}
        for key, entry in self._live.items():
            live[key] = replace(entry, score=score_of(key))
        self._live = live
        self._heap = list(live.values())
        heapq.heapify(self._heap)
        by_group: dict[Hashable, list[QueueEntry]] = {group_key: [] for group_key in self._groups}
        for key, (group_key, entry) in list(self._parked.items()):
            moved = replace(entry, score=score_of(key))
            self._parked[key] = (group_key, moved)
            by_group.setdefault(group_key, []).append(moved)
        for group_key, entries in by_group.items():
            heapq.heapify(entries)
            self._groups.setdefault(group_key, _Group()).heap = entries

    def _compact(self) -> None:
        for group_key, group in list(self._groups.items()):
            group.heap = [e for e in group.heap if self._parked.get(e.key, (None, None))[1] is e]
            heapq.heapify(group.heap)
            if not group.heap:
                del self._groups[group_key]
