"""Every deadline the reconciler keeps, in one heap (not a task per workload).

A deadline is set, moved or cancelled by key and purpose; moving one leaves
its old heap entry behind, skipped when it comes up. Times are seconds since
the epoch, because they come from condition timestamps in the API, which is
what lets a restarted controller keep a deadline rather than start it again.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["Timers", "job_recheck", "rechecked_kind"]

K = TypeVar("K", bound=Hashable)

_JOB_RECHECK = "job-recheck:"


def job_recheck(kind: str) -> str:
    """The purpose of a deadline that brings a job of `kind` (keyed by namespace and name)
    back to its concern: it is reconciled again when the deadline comes."""
    return _JOB_RECHECK + kind


def rechecked_kind(purpose: str) -> str | None:
    """The job kind a `job_recheck` purpose names (None for any other purpose)."""
    return purpose[len(_JOB_RECHECK) :] if purpose.startswith(_JOB_RECHECK) else None


class Timers(Generic[K]):
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, tuple[K, str]]] = []
        self._at: dict[tuple[K, str], float] = {}
        self._seq = 0

    def set(self, key: K, purpose: str, at: float) -> None:
        timer = (key, purpose)
        if self._at.get(timer) == at:
            return
        self._at[timer] = at
        self._seq += 1
        heapq.heappush(self._heap, (at, self._seq, timer))
        if len(self._heap) > 2 * len(self._at) + 64:
            self._compact()

    def cancel(self, key: K, purpose: str) -> None:
        self._at.pop((key, purpose), None)

    def get(self, key: K, purpose: str) -> float | None:
        return self._at.get((key, purpose))

    def due(self, now: float) -> list[tuple[K, str]]:
        """Pop every deadline at or before `now`, soonest first."""
        fired: list[tuple[K, str]] = []
        while self._heap and self._heap[0][0] <= now:
            at, _, timer = heapq.heappop(self._heap)
            if self._at.get(timer) == at:
                del self._at[timer]
                fired.append(timer)
        return fired

    def __len__(self) -> int:
        return len(self._at)

    def _compact(self) -> None:
        self._heap = [entry for entry in self._heap if self._at.get(entry[2]) == entry[0]]
        heapq.heapify(self._heap)
