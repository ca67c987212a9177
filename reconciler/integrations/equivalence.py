"""Whether a job still matches its Workload (Kueue's EquivalentToWorkload).

As Kueue v0.18.1 compares them: the same number of pod sets, and pod set by pod set the same
count, minCount, containers and init containers, and (unless the Workload is admitted, when
the flavors' tolerations were injected) the same tolerations. Anything else (labels, node
selectors, which starting changes) does not make a job a different one.

Kueue compares decoded Go structs, which drop fields its API version does not know on both
sides. Here the raw objects are compared, so a container field the Workload's copy lacks (the
Workload CRD pruned it) is not a difference; every field the Workload recorded must match.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from reconciler.api import PodSet

__all__ = ["equivalent"]


def _spec_parts(template: msgspec.Raw) -> tuple[Any, Any, Any]:
    decoded = msgspec.json.decode(template)
    spec = decoded.get("spec") if isinstance(decoded, dict) else None
    if not isinstance(spec, dict):
        spec = {}
    # A missing list and an empty one are the same (Kueue compares semantically).
    return (spec.get("containers") or [], spec.get("initContainers") or [], spec.get("tolerations") or [])


def _same_containers(job: Any, recorded: Any) -> bool:
    if not isinstance(job, list) or not isinstance(recorded, list) or len(job) != len(recorded):
        return bool(job == recorded)
    for ours, theirs in zip(job, recorded, strict=True):
        if not isinstance(ours, dict) or not isinstance(theirs, dict):
            if ours != theirs:
                return False
        elif any(key not in ours or ours[key] != value for key, value in theirs.items()):
            return False
    return True


def _count(pod_set: PodSet) -> int:
    return 1 if pod_set.count is None else pod_set.count


def equivalent(job_pod_sets: Sequence[PodSet], recorded: Sequence[PodSet], *, admitted: bool) -> bool:
    """True when the job's pod sets are the ones its Workload recorded."""
    if len(job_pod_sets) != len(recorded):
        return False
    for ours, theirs in zip(job_pod_sets, recorded, strict=True):
        if _count(ours) != _count(theirs) or ours.min_count != theirs.min_count:
            return False
        containers, init, tolerations = _spec_parts(ours.template)
        w_containers, w_init, w_tolerations = _spec_parts(theirs.template)
        if not _same_containers(containers, w_containers) or not _same_containers(init, w_init):
            return False
        if not admitted and tolerations != w_tolerations:
            return False
    return True
