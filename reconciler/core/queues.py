"""What waits: one pending queue per ClusterQueue, and requeue backoff.

Order inside a ClusterQueue is Kueue's: higher priority first, then the older
queue-order timestamp, then UID. With BestEffortFIFO a head that does not fit
is set aside (inadmissible) so the next one can be tried, and comes back when
quota is released; with StrictFIFO the head blocks the queue until it fits.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field

__all__ = ["PendingQueue", "QueueEntry", "backoff_seconds"]

WorkloadKey = tuple[str, str]


@dataclass(frozen=True, slots=True, order=True)
class QueueEntry:
    neg_priority: int
    timestamp: str
    uid: str
    key: WorkloadKey = field(compare=True)


@dataclass(slots=True)
class PendingQueue:
    """A heap with lazy deletion plus the set of workloads set aside as inadmissible."""

    strict_fifo: bool = False
    _heap: list[QueueEntry] = field(default_factory=list)
    _live: dict[WorkloadKey, QueueEntry] = field(default_factory=dict)
    _inadmissible: dict[WorkloadKey, QueueEntry] = field(default_factory=dict)

    def push(self, key: WorkloadKey, priority: int, timestamp: str, uid: str) -> None:
        self.remove(key)
        entry = QueueEntry(-priority, timestamp, uid, key)
        self._live[key] = entry
        heapq.heappush(self._heap, entry)

    def remove(self, key: WorkloadKey) -> bool:
        """Forget a workload; heap entries are dropped lazily when they surface."""
        found = self._live.pop(key, None) is not None
        return self._inadmissible.pop(key, None) is not None or found

    def __contains__(self, key: object) -> bool:
        return key in self._live or key in self._inadmissible

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap and self._live.get(heap[0].key) is not heap[0]:
            heapq.heappop(heap)

    def head(self) -> WorkloadKey | None:
        self._drop_stale()
        return self._heap[0].key if self._heap else None

    def pop_head(self) -> WorkloadKey | None:
        self._drop_stale()
        if not self._heap:
            return None
        entry = heapq.heappop(self._heap)
        del self._live[entry.key]
        return entry.key

    def set_aside(self, key: WorkloadKey, priority: int, timestamp: str, uid: str) -> None:
        """Park a workload that cannot be admitted until quota frees up."""
        self.remove(key)
        self._inadmissible[key] = QueueEntry(-priority, timestamp, uid, key)

    def requeue_inadmissible(self) -> int:
        moved = list(self._inadmissible.values())
        self._inadmissible.clear()
        for entry in moved:
            self._live[entry.key] = entry
            heapq.heappush(self._heap, entry)
        return len(moved)

    def active_count(self) -> int:
        return len(self._live)

    def inadmissible_count(self) -> int:
        return len(self._inadmissible)

    def __len__(self) -> int:
        return len(self._live) + len(self._inadmissible)

    def ordered_keys(self) -> list[WorkloadKey]:
        """Every waiting workload in queue order (for status and tests)."""
        entries = sorted([*self._live.values(), *self._inadmissible.values()])
        return [e.key for e in entries]


def backoff_seconds(
    requeue_count: int,
    base_seconds: int = 60,
    max_seconds: int = 3600,
    *,
    jitter: float = 0.0001,
    rng: random.Random | None = None,
) -> float:
    """Kueue's requeue backoff: min(base * 2^(n-1), max) * (1 + U * jitter).

    `max_seconds` 0 means no cap, as in Kueue. `requeue_count` < 1 waits 0.
    """
    if requeue_count < 1 or base_seconds <= 0:
        return 0.0
    wait = base_seconds * 2 ** (requeue_count - 1)
    if max_seconds > 0:
        wait = min(wait, max_seconds)
    factor = 1.0 + (rng or random).random() * jitter if jitter > 0 else 1.0
    return float(wait) * factor
