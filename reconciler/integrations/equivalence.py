"""Whether a job still matches its Workload (Kueue's EquivalentToWorkload).

As Kueue v0.18.1 compares them: the same number of pod sets, and pod set by pod set the same
count, minCount, containers and init containers, and (unless the Workload is admitted, when
the flavors' tolerations were injected) the same tolerations. Anything else (labels, node
selectors, which starting changes) does not make a job a different one.

Kueue compares decoded Go structs, which drop fields its API version does not know on both
sides. Here the raw objects are compared, so a container field the Workload's copy lacks (the
Workload CRD pruned it) is not a difference; every field the Workload recorded must match.

The jobs a kind makes from a set and its pods (a LeaderWorkerSet's groups, a StatefulSet's pods)
are Kueue pod groups with a prebuilt Workload, which Kueue compares by its pod group rule instead
(`group_equivalent`): each of the job's pod sets is one of the Workload's by name, in order, with
no more pods than it recorded. Templates are not compared, so a rolling update to a new image
keeps the group's Workload and its quota.

`MatchMemo` remembers, per job, the generations at which it last matched its Workload: the API
server moves metadata.generation on every spec change (and only the specs are compared), so while
neither generation moved the answer is the same and the comparison is skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from reconciler.api import PodSet
from reconciler.api.meta import ObjectMeta

__all__ = ["MatchMemo", "equivalent", "group_equivalent"]


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
        elif not theirs.items() <= ours.items():  # each recorded field, with the same value
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
        if ours.template == theirs.template:
            continue  # the same JSON text: the same containers and tolerations
        containers, init, tolerations = _spec_parts(ours.template)
        w_containers, w_init, w_tolerations = _spec_parts(theirs.template)
        if not _same_containers(containers, w_containers) or not _same_containers(init, w_init):
            return False
        if not admitted and tolerations != w_tolerations:
            return False
    return True


def group_equivalent(job_pod_sets: Sequence[PodSet], recorded: Sequence[PodSet]) -> bool:
    """Kueue's rule for a pod group and its prebuilt Workload: every pod set of the job found
    among the Workload's, in their order, each recorded with at least the job's count."""
    names = [ps.name for ps in recorded]
    at = 0
    for ours in job_pod_sets:
        if ours.name not in names[at:]:
            return False
        at = names.index(ours.name, at)
        if _count(recorded[at]) < _count(ours):
            return False
        at += 1
    return True


class MatchMemo:
    """Jobs (by namespace and name) found to match their Workload, with the UIDs and generations
    of both then, and whether tolerations were compared too (`admitted` False).

    A match without tolerations says nothing of one with them, so it is reused only for a
    comparison that also leaves them out. An object without a UID or generation (0: not set by
    an API server) is always compared. Entries are replaced when either object is replaced (a new
    UID) and dropped with `forget` when the job goes: at most one per job.
    """

    __slots__ = ("_matched",)

    def __init__(self) -> None:
        self._matched: dict[tuple[str, str], tuple[str, int, str, int, bool]] = {}

    def __len__(self) -> int:
        return len(self._matched)

    def matched(self, job: ObjectMeta, workload: ObjectMeta, *, admitted: bool) -> bool:
        """True when the job matched this Workload at both objects' current generations."""
        seen = self._matched.get((job.namespace, job.name))
        if seen is None or not (job.generation and workload.generation):
            return False
        return seen[:4] == (job.uid, job.generation, workload.uid, workload.generation) and (
            admitted or not seen[4]
        )

    def record(self, job: ObjectMeta, workload: ObjectMeta, *, admitted: bool) -> None:
        """The job was just compared with its Workload and matched."""
        if job.uid and workload.uid and job.generation and workload.generation:
            self._matched[(job.namespace, job.name)] = (
                job.uid,
                job.generation,
                workload.uid,
                workload.generation,
                admitted,
            )

    def started(self, job: ObjectMeta) -> None:
        """Our start of the job landed, at `job.generation`. Starting changes only what a
        comparison of an admitted job leaves out (its pod templates' node selector, labels,
        annotations and tolerations), so a match at the generation just before is one at this
        generation for such a comparison. Another generation between them (someone else's
        change) leaves the entry as it was: the next decision compares."""
        seen = self._matched.get((job.namespace, job.name))
        if seen is not None and seen[0] == job.uid and job.generation == seen[1] + 1:
            self._matched[(job.namespace, job.name)] = (job.uid, job.generation, seen[2], seen[3], True)

    def forget(self, namespace: str, name: str) -> None:
        self._matched.pop((namespace, name), None)
