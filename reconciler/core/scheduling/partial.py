"""Partial admission, as Kueue v0.18.1 searches for it (its PartialAdmission gate is on by default).

A Workload whose pod sets carry a `minCount` below their count, and that fits neither as it is nor
by preempting, is tried at smaller sizes: every such pod set gives up the same share of the pods
it may give up (its count less its minCount), and a binary search over that share finds the
largest sizes that fit. It is admitted with those counts; the job runs that many pods.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from ..model.workloads import WorkloadInfo

__all__ = ["can_be_partial", "largest_fit", "resized"]

R = TypeVar("R")


def can_be_partial(info: WorkloadInfo) -> bool:
    """True when some pod set may be admitted with fewer pods than it asks for."""
    return any(ps.min_count is not None and ps.count > ps.min_count for ps in info.pod_sets)


def resized(info: WorkloadInfo, counts: list[int]) -> WorkloadInfo:
    """The Workload with these pod counts (in pod set order); its shape is the original's."""
    pod_sets = [replace(ps, count=n) for ps, n in zip(info.pod_sets, counts, strict=True)]
    return replace(info, pod_sets=pod_sets)


def largest_fit(info: WorkloadInfo, fits: Callable[[WorkloadInfo], R | None]) -> R | None:
    """The result of `fits` at the largest sizes, down to each pod set's minCount, for which it
    gives one (None: not even at the minimum). The sizes are searched as Kueue does: step `i` of
    `total` (the pods all pod sets may give up) takes `delta * i // total` pods off each pod set,
    and the smallest step that fits is kept, assuming fewer pods fit whenever more do."""
    full = [ps.count for ps in info.pod_sets]
    deltas = [ps.count - (ps.count if ps.min_count is None else ps.min_count) for ps in info.pod_sets]
    total = sum(deltas)
    if total <= 0:
        return None
    found: dict[int, R] = {}

    def fits_at(step: int) -> bool:
        counts = [n - d * step // total for n, d in zip(full, deltas, strict=True)]
        result = fits(resized(info, counts))
        if result is not None:
            found[step] = result
        return result is not None

    low, high = 0, total + 1  # Go's sort.Search over [0, total]
    while low < high:
        middle = (low + high) // 2
        if fits_at(middle):
            high = middle
        else:
            low = middle + 1
    return found.get(low)
