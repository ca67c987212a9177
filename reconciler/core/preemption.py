"""Which admitted workloads to preempt so that a pending one fits, as Kueue's classical preemption.

Candidates are the admitted workloads the ClusterQueue's `preemption` policy allows:
- `withinClusterQueue`: in the same ClusterQueue, `LowerPriority` (strictly lower) or
  `LowerOrNewerEqualPriority` (also equal priority but queued later);
- `reclaimWithinCohort`: in another member of the cohort that is borrowing the flavor
  and resource, `Any` or `LowerPriority`.
They are ordered: already being evicted first, other ClusterQueues before the
preemptor's own, lower priority first, most recently admitted first. They are
removed one by one until the workload fits; then those not needed after all are
put back, newest removal first. The ledger is restored before returning.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from reconciler.api import ResourceFlavor

from .cache import QuotaCache
from .clusterqueues import ClusterQueueModel
from .flavors import FlavorFit, assign_flavors
from .ledger import Charge
from .workloads import WorkloadInfo

__all__ = [
    "IN_CLUSTER_QUEUE",
    "IN_COHORT_RECLAMATION",
    "Target",
    "preemption_message",
    "preemption_possibility",
    "preemption_targets",
]

WorkloadKey = tuple[str, str]
IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
_REASON_TEXT = {
    IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    IN_COHORT_RECLAMATION: "reclamation within the cohort",
}


@dataclass(frozen=True, slots=True)
class Target:
    key: WorkloadKey
    cluster_queue: str
    reason: str


def cluster_queue_path(cache: QuotaCache, cluster_queue: str) -> str:
    """Kueue's path of a ClusterQueue: its cohort (when it has one) first."""
    cohort = cache.cohort_of(cluster_queue)
    return f"/{cohort}/{cluster_queue}" if cohort else f"/{cluster_queue}"


def preemption_message(preemptor_uid: str, job_uid: str, reason: str, preemptor_path: str, path: str) -> str:
    return (
        f"Preempted to accommodate a workload (UID: {preemptor_uid or 'UNKNOWN'}, "
        f"JobUID: {job_uid or 'UNKNOWN'}) due to {_REASON_TEXT.get(reason, 'UNKNOWN')}; "
        f"preemptor path: {preemptor_path}; preemptee path: {path}"
    )


def _allowed_in_queue(policy: str, preemptor: WorkloadInfo, candidate: WorkloadInfo) -> bool:
    if policy == "LowerPriority":
        return candidate.priority < preemptor.priority
    if policy == "LowerOrNewerEqualPriority":
        newer_equal = candidate.priority == preemptor.priority and preemptor.created < candidate.created
        return candidate.priority < preemptor.priority or newer_equal
    return False


def _borrowing(cache: QuotaCache, model: ClusterQueueModel, charge: Charge) -> bool:
    return any(
        cache.ledger.used(model.name, fr) > model.nominal(*fr)
        for fr, amount in charge.usage.items()
        if amount
    )


def _candidates(cache: QuotaCache, preemptor: WorkloadInfo, model: ClusterQueueModel) -> list[Target]:
    found: list[Target] = []
    if model.within_cluster_queue != "Never":
        for key in cache.ledger.holders(model.name):
            candidate = cache.workloads.get(key)
            if candidate is not None and _allowed_in_queue(model.within_cluster_queue, preemptor, candidate):
                found.append(Target(key, model.name, IN_CLUSTER_QUEUE))
    if model.cohort is not None and model.reclaim_within_cohort != "Never":
        for other in sorted(cache.cohorts.get(model.cohort, set()) - {model.name}):
            other_model = cache.cluster_queues.get(other)
            if other_model is None:
                continue
            for key in cache.ledger.holders(other):
                candidate, charge = cache.workloads.get(key), cache.ledger.charge_of(key)
                if candidate is None or charge is None or not _borrowing(cache, other_model, charge):
                    continue
                if model.reclaim_within_cohort == "Any" or candidate.priority < preemptor.priority:
                    found.append(Target(key, other, IN_COHORT_RECLAMATION))

    def order(target: Target) -> tuple[bool, bool, int, tuple[tuple[int, ...], int], str]:
        candidate = cache.workloads[target.key]
        at, seq = cache.admitted_at.get(target.key, ("", 0))
        newest_first = (_invert(at), -seq)
        return (
            target.key not in cache.evicting,
            target.cluster_queue == model.name,
            candidate.priority,
            newest_first,
            candidate.uid,
        )

    return sorted(found, key=order)


def preemption_possibility(
    preemptor: WorkloadInfo, model: ClusterQueueModel, cache: QuotaCache, flavor: str
) -> str:
    """What preempting could do in one flavor, in Kueue's words: NoCandidates when no
    workload the policy allows holds quota of the flavor, Reclaim when all such
    workloads are in other ClusterQueues, else Preempt. (Kueue also simulates whether
    the candidates would free enough; here their presence is what counts.)"""
    holding = [
        t
        for t in _candidates(cache, preemptor, model)
        if any(fr[0] == flavor and amount for fr, amount in _usage(cache, t.key).items())
    ]
    if not holding:
        return "NoCandidates"
    return "Reclaim" if all(t.cluster_queue != model.name for t in holding) else "Preempt"


def _usage(cache: QuotaCache, key: WorkloadKey) -> Mapping[tuple[str, str], int]:
    charge = cache.ledger.charge_of(key)
    return charge.usage if charge is not None else {}


def _invert(stamp: str) -> tuple[int, ...]:
    """Sorts RFC 3339 stamps newest first."""
    return tuple(-ord(c) for c in stamp)


def preemption_targets(
    preemptor: WorkloadInfo,
    model: ClusterQueueModel,
    cache: QuotaCache,
    flavors: Mapping[str, ResourceFlavor],
) -> list[Target]:
    """The workloads to evict so that `preemptor` fits in `model`; empty when no set would do."""
    candidates = _candidates(cache, preemptor, model)
    if not candidates:
        return []
    ledger = cache.ledger
    removed: list[tuple[Target, Charge]] = []

    def fits() -> bool:
        return isinstance(assign_flavors(preemptor, model, flavors, cache.capacity), FlavorFit)

    try:
        for target in candidates:
            charge = ledger.release(target.key)
            if charge is None:
                continue
            removed.append((target, charge))
            if not fits():
                continue
            # Fits: put back what turns out not to be needed, newest removal first.
            needed = [removed[-1]]
            for earlier in reversed(removed[:-1]):
                ledger.reserve(earlier[0].key, earlier[1])
                if fits():
                    continue  # not needed: it stays put back
                ledger.release(earlier[0].key)
                needed.append(earlier)
            kept = {t.key for t, _ in needed}
            removed = [(t, c) for t, c in removed if t.key in kept]
            return [t for t, _ in removed]
        return []
    finally:
        for target, charge in removed:
            if not ledger.holds(target.key):
                ledger.reserve(target.key, charge)
