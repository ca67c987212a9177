"""One ClusterQueue's pending queue: order, parking of what does not fit, wake-ups.

Order inside a ClusterQueue is Kueue's: higher priority first, then the older
queue-order timestamp, then UID. With admission fair sharing (`score_of` set) the score of the
workload's LocalQueue comes first (lowest first): entries are kept in one heap per LocalQueue and
the scores are read when the next candidate is taken, so a score that moves costs nothing here.
With BestEffortFIFO a workload that does not fit is parked so the ones behind
it can be tried, and parked workloads get another chance when quota is released;
with StrictFIFO the head blocks the queue until it fits.

Parked workloads are grouped by *shape* (everything admission looks at: pod
sets, requests, node constraints) and priority. Workloads of one group get the
same verdict, so after a release only the first of each group, in queue order,
needs to be evaluated: the cost of a release is the number of distinct
groups, not the number of waiting workloads. A new workload whose group was
just found not to fit joins it unevaluated (Kueue's equivalence hashing).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterable, Iterator, Set
from dataclasses import dataclass, field

__all__ = ["Candidate", "PendingQueue", "QueueEntry"]

WorkloadKey = tuple[str, str]
# The LocalQueue an entry is kept under (None: one heap for all, without admission fair sharing).
Bucket = tuple[str, str] | None


@dataclass(frozen=True, slots=True, order=True)
class QueueEntry:
    neg_priority: int
    timestamp: str
    uid: str
    key: WorkloadKey


@dataclass(frozen=True, slots=True)
class Candidate:
    """The next workload to evaluate; `group` is set when it comes from a parked group."""

    key: WorkloadKey
    group: Hashable | None


Rank = tuple[float, QueueEntry]


@dataclass(slots=True)
class _Heaps:
    """Entries in one heap per bucket; stale entries are dropped when they surface."""

    by_bucket: dict[Bucket, list[QueueEntry]] = field(default_factory=dict)

    def push(self, bucket: Bucket, entry: QueueEntry) -> None:
        heapq.heappush(self.by_bucket.setdefault(bucket, []), entry)

    def head(
        self, valid: Callable[[QueueEntry], bool], score: Callable[[tuple[str, str]], float] | None
    ) -> Rank | None:
        """The first valid entry with its bucket's score (0 without scores)."""
        best: Rank | None = None
        empty: list[Bucket] = []
        for bucket, heap in self.by_bucket.items():
            while heap and not valid(heap[0]):
                heapq.heappop(heap)
            if not heap:
                empty.append(bucket)
                continue
            rank = (0.0 if score is None or bucket is None else score(bucket), heap[0])
            if best is None or rank < best:
                best = rank
        for bucket in empty:
            del self.by_bucket[bucket]
        return best

    def entries(self) -> Iterator[QueueEntry]:
        for heap in self.by_bucket.values():
            yield from heap

    def size(self) -> int:
        return sum(len(heap) for heap in self.by_bucket.values())


@dataclass(slots=True)
class _Group:
    heaps: _Heaps = field(default_factory=_Heaps)
    # Evaluated in the current pass and still not fitting: skip until quota moves.
    settled: bool = True


@dataclass(slots=True)
class PendingQueue:
    strict_fifo: bool = False
    # Admission fair sharing: a LocalQueue's score as a sort key; None when off for this queue.
    score_of: Callable[[tuple[str, str]], float] | None = None
    _heaps: _Heaps = field(default_factory=_Heaps)
    _live: dict[WorkloadKey, QueueEntry] = field(default_factory=dict)
    _groups: dict[Hashable, _Group] = field(default_factory=dict)
    _parked: dict[WorkloadKey, tuple[Hashable, QueueEntry]] = field(default_factory=dict)
    # The LocalQueue of each member, its bucket (only while scores are on).
    _local_queue: dict[WorkloadKey, tuple[str, str] | None] = field(default_factory=dict)

    # --- membership ---------------------------------------------------------------------

    def push(
        self,
        key: WorkloadKey,
        priority: int,
        timestamp: str,
        uid: str,
        local_queue: tuple[str, str] | None = None,
    ) -> None:
        """Queue a workload to be evaluated (new, changed or back from eviction)."""
        self.remove(key)
        entry = QueueEntry(-priority, timestamp, uid, key)
        self._live[key] = entry
        if self.score_of is not None:
            self._local_queue[key] = local_queue
        self._heaps.push(self._bucket(key), entry)

    def remove(self, key: WorkloadKey) -> bool:
        """Forget a workload; heap entries are dropped lazily when they surface."""
        found = self._live.pop(key, None) is not None
        parked = self._parked.pop(key, None)
        if parked is not None:
            group = self._groups.get(parked[0])
            if group is not None and group.heaps.size() > 2 * len(self._parked) + 16:
                self._compact()
        if not found and parked is None:
            return False
        self._local_queue.pop(key, None)
        return True

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
        group.heaps.push(self._bucket(key), entry)

    def join_settled(self, key: WorkloadKey, group_key: Hashable) -> bool:
        """Park a queued workload with its group, unevaluated, when that group was just found not
        to fit (BestEffortFIFO only); False otherwise."""
        group = self._groups.get(group_key)
        if self.strict_fifo or group is None or not group.settled or key not in self._live:
            return False
        self.park(key, group_key)
        return True

    def __len__(self) -> int:
        return len(self._live) + len(self._parked)

    def active_count(self) -> int:
        return len(self._live)

    def is_active(self, key: WorkloadKey) -> bool:
        """Queued for evaluation (not set aside as inadmissible)."""
        return key in self._live

    def inadmissible_count(self) -> int:
        return len(self._parked)

    def set_scores(
        self,
        score_of: Callable[[tuple[str, str]], float] | None,
        local_queue_of: Callable[[WorkloadKey], tuple[str, str] | None],
    ) -> None:
        """Turn admission fair sharing's order on or off: every entry is kept anew under its bucket
        (the LocalQueues of the members are only kept while it is on)."""
        self.score_of = score_of
        self._local_queue = {}
        if score_of is not None:
            for key in [*self._live, *self._parked]:
                self._local_queue[key] = local_queue_of(key)
        self._heaps = _Heaps()
        for key, entry in self._live.items():
            self._heaps.push(self._bucket(key), entry)
        for group in self._groups.values():
            group.heaps = _Heaps()
        for key, (group_key, entry) in self._parked.items():
            self._groups.setdefault(group_key, _Group()).heaps.push(self._bucket(key), entry)

    def _bucket(self, key: WorkloadKey) -> Bucket:
        return self._local_queue.get(key) if self.score_of is not None else None

    def _score(self, bucket: Bucket) -> float:
        return 0.0 if bucket is None or self.score_of is None else self.score_of(bucket)

    def _rank(self, entry: QueueEntry) -> Rank:
        return (self._score(self._bucket(entry.key)), entry)

    # --- scheduling passes --------------------------------------------------------------

    def wake_parked(self) -> None:
        """Quota or the queue's configuration changed: every parked group may fit now."""
        for group in self._groups.values():
            group.settled = False

    def unsettle(self, group_key: Hashable) -> bool:
        """Look at a settled group again in the next pass; False when there is no such group."""
        group = self._groups.get(group_key)
        if group is None:
            return False
        group.settled = False
        return True

    def settle(self, group_key: Hashable) -> None:
        """The group's first workload did not fit: the rest of it would not either."""
        group = self._groups.get(group_key)
        if group is not None:
            group.settled = True

    def _group_head(self, group_key: Hashable, group: _Group) -> Rank | None:
        def valid(entry: QueueEntry) -> bool:
            parked = self._parked.get(entry.key)
            return parked is not None and parked[1] is entry and parked[0] == group_key

        return group.heaps.head(valid, self.score_of)

    def _active_head(self) -> Rank | None:
        live = self._live
        return self._heaps.head(lambda e: live.get(e.key) is e, self.score_of)

    def next_candidate(self, first: Set[Hashable] = frozenset()) -> Candidate | None:
        """The first workload in queue order among new ones and unsettled parked groups; an
        unsettled group of `first` comes before all else (Kueue's sticky preempting head)."""
        for group_key in first:
            group = self._groups.get(group_key)
            head = None if group is None or group.settled else self._group_head(group_key, group)
            if head is not None:
                return Candidate(head[1].key, group_key)
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
        return Candidate(best[1].key, best_group)

    def take(self, candidate: Candidate) -> None:
        """Remove an admitted candidate from the queue."""
        self.remove(candidate.key)

    def group_members(self, group_key: Hashable) -> Iterator[WorkloadKey]:
        group = self._groups.get(group_key)
        if group is None:
            return iter(())
        return (e.key for e in group.heaps.entries() if self._parked.get(e.key, (None, None))[1] is e)

    def ordered_keys(self, extra: Iterable[QueueEntry] = ()) -> list[WorkloadKey]:
        """Every waiting workload in queue order (for status, the visibility API and tests), with
        ``extra`` entries (workloads out of the queue for a while) placed where their rank puts them."""
        entries = sorted(
            [*self._live.values(), *(e for _, e in self._parked.values()), *extra], key=self._rank
        )
        return [e.key for e in entries]

    def _compact(self) -> None:
        for group_key, group in list(self._groups.items()):
            kept = _Heaps()
            for entry in group.heaps.entries():
                if self._parked.get(entry.key, (None, None))[1] is entry:
                    kept.push(self._bucket(entry.key), entry)
            group.heaps = kept
            if not kept.by_bucket:
                del self._groups[group_key]
