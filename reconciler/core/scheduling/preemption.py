"""Which admitted workloads to preempt so that a pending one fits, as Kueue's classical preemption.

The workload's flavors are those it would get with nothing in the way; the
flavor-resources it lacks unused quota for are the ones preemption must free.
Candidates use one of those and are allowed by the ClusterQueue's policy:

- same ClusterQueue (`withinClusterQueue`: `LowerPriority`, or
  `LowerOrNewerEqualPriority` which adds equal priority queued later);
- other ClusterQueues of the cohort tree that use more than their quota
  (`reclaimWithinCohort`: `Any` or `LowerPriority`). Walking from the
  preemptor's parent to the root, once the requests fit in a subtree's quota
  the preemptor has the better claim to it and takes back regardless of
  `borrowWithinCohort` (reason InCohortReclamation). Otherwise a candidate may
  be preempted while the preemptor borrows only when `borrowWithinCohort` is
  `LowerPriority` and the candidate has lower priority, at or below
  `maxPriorityThreshold` when set (InCohortReclaimWhileBorrowing); else only if
  the preemptor would not borrow afterwards (InCohortReclamation).

Candidates are ordered: already being evicted first, then by kind (cohort
claim, cohort priority, same queue), each by other ClusterQueues first, lower
priority, most recently admitted, UID. They are removed one by one until the
workload fits; those not needed after all are put back, newest removal first.
One run allows borrowing and one does not, in Kueue's order. The ledger is
restored before returning.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from reconciler.api import ResourceFlavor, Workload

from ..model.clusterqueues import ClusterQueueModel
from ..model.workloads import JOB_UID_LABEL, DeviceSizes, WorkloadInfo
from ..primitives.selectors import first_untolerated_taint, flavor_matches_pod_spec
from ..queueing.admission_fair_sharing import order_key
from ..quota.cache import QuotaCache
from ..quota.capacity import CohortTree
from ..quota.ledger import Charge, FlavorResource

__all__ = [
    "IN_CLUSTER_QUEUE",
    "IN_COHORT_FAIR_SHARING",
    "IN_COHORT_RECLAIM_WHILE_BORROWING",
    "IN_COHORT_RECLAMATION",
    "Needs",
    "Target",
    "TopologyCheck",
    "candidate_order",
    "policy_allows",
    "preemption_message",
    "preemption_needs",
    "preemption_targets",
    "preemptor_requests",
    "victim_message",
]

WorkloadKey = tuple[str, str]
# Whether the preemptor's pods fit the topology's domains once these workloads are gone.
TopologyCheck = Callable[[frozenset[WorkloadKey]], bool]
# What a preemptor would use per flavor-resource, and the flavor-resources that need preemption.
Needs = tuple[dict[FlavorResource, int], set[FlavorResource]]
# The admission fair sharing score of a LocalQueue (namespace, name).
LocalQueueUsage = Callable[[tuple[str, str]], float]
IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
_REASON_TEXT = {
    IN_COHORT_FAIR_SHARING: "Fair Sharing within the cohort",
    IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    IN_COHORT_RECLAMATION: "reclamation within the cohort",
    IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
}

# Kinds of candidate (Kueue's preemption variants).
_WITHIN_CQ, _HIERARCHY, _WITHOUT_BORROWING, _WHILE_BORROWING = range(4)


@dataclass(frozen=True, slots=True)
class Target:
    key: WorkloadKey
    cluster_queue: str
    reason: str


@dataclass(frozen=True, slots=True)
class _Candidate:
    key: WorkloadKey
    cluster_queue: str
    variant: int
    # The cohort where the preemptor's and the candidate's paths meet (None: same queue).
    meet: str | None

    @property
    def reason(self) -> str:
        if self.variant == _WITHIN_CQ:
            return IN_CLUSTER_QUEUE
        if self.variant == _WHILE_BORROWING:
            return IN_COHORT_RECLAIM_WHILE_BORROWING
        return IN_COHORT_RECLAMATION


def cluster_queue_path(cache: QuotaCache, cluster_queue: str) -> str:
    """Kueue's path of a ClusterQueue: its cohorts from the root first."""
    return "/" + "/".join([*cache.cohort_path(cluster_queue), cluster_queue])


def preemption_message(preemptor_uid: str, job_uid: str, reason: str, preemptor_path: str, path: str) -> str:
    return (
        f"Preempted to accommodate a workload (UID: {preemptor_uid or 'UNKNOWN'}, "
        f"JobUID: {job_uid or 'UNKNOWN'}) due to {_REASON_TEXT.get(reason, 'UNKNOWN')}; "
        f"preemptor path: {preemptor_path}; preemptee path: {path}"
    )


def victim_message(cache: QuotaCache, preemptor: Workload, cluster_queue: str, target: Target) -> str:
    """The message of one preemption (its victim's Evicted, Preempted and Requeued conditions, its
    Events): the preemptor (admitted to `cluster_queue`) by its UIDs, both ClusterQueues by path."""
    return preemption_message(
        preemptor.metadata.uid,
        preemptor.metadata.labels.get(JOB_UID_LABEL, ""),
        target.reason,
        cluster_queue_path(cache, cluster_queue),
        cluster_queue_path(cache, target.cluster_queue),
    )


def policy_allows(policy: str, preemptor: WorkloadInfo, candidate: WorkloadInfo) -> bool:
    if policy == "LowerPriority":
        return candidate.priority < preemptor.priority
    if policy == "LowerOrNewerEqualPriority":
        newer_equal = candidate.priority == preemptor.priority and preemptor.created < candidate.created
        return candidate.priority < preemptor.priority or newer_equal
    return policy == "Any"


def _requests(
    preemptor: WorkloadInfo,
    model: ClusterQueueModel,
    flavors: Mapping[str, ResourceFlavor],
    tree: CohortTree,
    sizes: DeviceSizes | None = None,
) -> dict[FlavorResource, int] | None:
    """The flavor-resources the workload would use: per resource group, the first flavor it may run
    on whose maximum capacity holds it. None when some group has no such flavor."""
    usage: dict[FlavorResource, int] = {}
    for pod_set in preemptor.pod_sets:
        base = pod_set.base_requests()
        demanded = pod_set.demanded
        if "pods" in model.group_of:
            base["pods"] = pod_set.count
        for index in sorted({model.group_of.get(r, -1) for r in base if base[r] or r in demanded}):
            if index < 0:
                return None
            group = model.groups[index]
            wanted = [r for r in base if r in group.covered]
            chosen = None
            requests = base
            for quota in group.flavors:
                flavor = flavors.get(quota.name)
                if flavor is None:
                    continue
                spec = pod_set.placement
                taints = [*spec.tolerations, *flavor.spec.tolerations]
                if first_untolerated_taint(flavor.spec.node_taints, taints) is not None:
                    continue
                if not flavor_matches_pod_spec(spec, flavor.spec.node_labels):
                    continue
                requests = base
                if demanded.intersection(wanted):
                    resolved = pod_set.requests_in(base, quota.name, sizes)
                    if isinstance(resolved, str):
                        continue
                    requests = resolved[0]
                if all(
                    usage.get((quota.name, r), 0) + requests[r]
                    <= tree.limits(
                        model,
                        (quota.name, r),
                        quota.nominal.get(r, 0),
                        tree.used(model.name, (quota.name, r)),
                    )[0]
                    for r in wanted
                ):
                    chosen = quota.name
                    break
            if chosen is None:
                return None
            for r in wanted:
                usage[(chosen, r)] = usage.get((chosen, r), 0) + requests[r]
    return usage


def preemptor_requests(
    preemptor: WorkloadInfo, model: ClusterQueueModel, cache: QuotaCache, sizes: DeviceSizes | None = None
) -> dict[FlavorResource, int]:
    """The flavor-resources the workload would use with nothing in its way (empty when none)."""
    return _requests(preemptor, model, cache.flavors, cache.capacity, sizes) or {}


def _uses(cache: QuotaCache, key: WorkloadKey, needed: set[FlavorResource]) -> bool:
    charge = cache.ledger.charge_of(key)
    return charge is not None and any(charge.usage.get(fr, 0) for fr in needed)


def _classify(
    cache: QuotaCache,
    preemptor: WorkloadInfo,
    model: ClusterQueueModel,
    key: WorkloadKey,
    cq: str,
    advantage: bool,
) -> int | None:
    candidate = cache.workloads.get(key)
    if candidate is None:
        return None
    policy = model.within_cluster_queue if cq == model.name else model.reclaim_within_cohort
    if not policy_allows(policy, preemptor, candidate):
        return None
    if cq == model.name:
        return _WITHIN_CQ
    if advantage:
        return _HIERARCHY
    if not model.borrow_within_cohort:
        return _WITHOUT_BORROWING
    threshold = model.max_priority_threshold
    if candidate.priority >= preemptor.priority or (threshold is not None and candidate.priority > threshold):
        return _WITHOUT_BORROWING
    return _WHILE_BORROWING


def _collect(
    cache: QuotaCache,
    tree: CohortTree,
    preemptor: WorkloadInfo,
    model: ClusterQueueModel,
    needed: set[FlavorResource],
    requests: Mapping[FlavorResource, int],
) -> tuple[list[_Candidate], list[_Candidate], list[_Candidate]]:
    """(same queue, cohort claim, cohort priority) candidates."""

    def from_queue(cq: str, meet: str | None, advantage: bool) -> list[_Candidate]:
        out = []
        for key in cache.ledger.holders(cq):
            if not _uses(cache, key, needed):
                continue
            variant = _classify(cache, preemptor, model, key, cq, advantage)
            if variant is not None:
                out.append(_Candidate(key, cq, variant, meet))
        return out

    same = from_queue(model.name, None, False) if model.within_cluster_queue != "Never" else []
    claim: list[_Candidate] = []
    by_priority: list[_Candidate] = []
    node = ("cq", model.name)
    parents = tree.ancestors(node)
    if not parents or model.reclaim_within_cohort == "Never":
        return same, claim, by_priority
    advantage, remaining = tree.fits_in_quota(node, requests)
    previous: str | None = None
    for top in parents:
        into = claim if advantage else by_priority
        # Over-quota subtrees under `top` (the one already walked excepted), their over-quota queues.
        stack = [top]
        while stack:
            for kind, name in tree.children(stack.pop()):
                if kind == "cohort":
                    if name != previous and not tree.within_nominal(("cohort", name), needed):
                        stack.append(name)
                elif name != model.name and not tree.within_nominal(("cq", name), needed):
                    into.extend(from_queue(name, top, advantage))
        fits, remaining = tree.fits_in_quota(("cohort", top), remaining)
        advantage = advantage or fits
        previous = top
    return same, claim, by_priority


def preemption_targets(
    preemptor: WorkloadInfo,
    model: ClusterQueueModel,
    cache: QuotaCache,
    flavors: Mapping[str, ResourceFlavor],
    sizes: DeviceSizes | None = None,
    usage: LocalQueueUsage | None = None,
    needs: Needs | None = None,
    topology: TopologyCheck | None = None,
) -> list[Target]:
    """The workloads to evict so that `preemptor` fits in `model`; empty when no set would do
    (`sizes`: the device inventory, for charges the flavor decides; `usage`: the admission fair
    sharing score of a LocalQueue, when `model` orders by it; `needs`: what it would use and
    what of it needs preemption, as its flavor assignment found, else found here; `topology`:
    whether its pods fit the topology's domains without the workloads given, checked with quota)."""
    tree = cache.capacity
    needs = needs or preemption_needs(preemptor, model, cache, sizes)
    if needs is None:
        return []
    requests, needed = needs
    same, claim, by_priority = _collect(cache, tree, preemptor, model, needed, requests)
    order = candidate_order(cache, model.name, usage)
    lists = [sorted(part, key=lambda c: order(c.key)) for part in (claim, by_priority, same)]
    evicting = [c for part in lists for c in part if c.key in cache.evicting]
    rest = [c for part in lists for c in part if c.key not in cache.evicting]
    candidates = evicting + rest
    if not candidates:
        return []
    no_others = not claim and not by_priority
    under_nominal = all(cache.ledger.used(model.name, fr) < model.nominal(*fr) for fr in needed)
    if no_others or (not model.borrow_within_cohort and not under_nominal):
        attempts = [True]
    elif not model.borrow_within_cohort and not claim:
        attempts = [False, True]
    else:
        attempts = [True, False]
    for allow_borrowing in attempts:
        found = _attempt(cache, tree, model, candidates, (needed, requests), allow_borrowing, topology)
        if found:
            return found
    return []


def preemption_needs(
    preemptor: WorkloadInfo,
    model: ClusterQueueModel,
    cache: QuotaCache,
    sizes: DeviceSizes | None = None,
    fair_sharing: bool = False,
) -> Needs | None:
    """What the workload would use, and the flavor-resources of it that need preemption; None when
    preemption cannot help (Kueue's flavor assigner tries it only where it could help the queue)."""
    tree = cache.capacity
    requests = _requests(preemptor, model, cache.flavors, tree, sizes)
    if not requests:
        return None
    needed = {
        fr
        for fr, amount in requests.items()
        if amount > tree.limits(model, fr, model.nominal(*fr), tree.used(model.name, fr))[1]
    }
    if not needed:
        return None
    while_borrowing = model.borrow_within_cohort or (fair_sharing and model.reclaim_within_cohort != "Never")
    for fr in needed:
        if not (
            model.nominal(*fr) >= requests[fr]
            or tree.borrow_level(model, fr, requests[fr])[1]
            or while_borrowing
        ):
            return None
    return requests, needed


def candidate_order(
    cache: QuotaCache, cluster_queue: str, usage: LocalQueueUsage | None = None
) -> Callable[[WorkloadKey], tuple[object, ...]]:
    """Kueue's order of preemption candidates for a preemptor of `cluster_queue`: other
    ClusterQueues' first, then (admission fair sharing: `usage` gives the score of a LocalQueue
    of `cluster_queue`) the higher LocalQueue usage among its own, lower priority, most recently
    admitted, then UID."""

    def order(key: WorkloadKey) -> tuple[object, ...]:
        info = cache.workloads[key]
        charge = cache.ledger.charge_of(key)
        at, seq = cache.admitted_at.get(key, ("", 0))
        same = charge is not None and charge.cluster_queue == cluster_queue
        heavier = -order_key(usage((info.namespace, info.queue_name))) if same and usage is not None else 0.0
        return (same, heavier, info.priority, _invert(at), -seq, info.uid)

    return order


def _attempt(
    cache: QuotaCache,
    tree: CohortTree,
    model: ClusterQueueModel,
    candidates: list[_Candidate],
    wanted: tuple[set[FlavorResource], Mapping[FlavorResource, int]],
    allow_borrowing: bool,
    topology: TopologyCheck | None = None,
) -> list[Target]:
    ledger = cache.ledger
    node = ("cq", model.name)
    needed, requests = wanted

    def fits() -> bool:
        for fr, amount in requests.items():
            if not allow_borrowing and tree.borrowing_with(node, fr, amount):
                return False
            if amount > tree.available(node, fr):
                return False
        if topology is None:
            return True
        return topology(frozenset(c.key for c, _ in removed if not ledger.holds(c.key)))

    def valid(c: _Candidate) -> bool:
        if c.cluster_queue == model.name:
            return True
        if allow_borrowing and c.variant == _WITHOUT_BORROWING:
            return False
        if tree.within_nominal(("cq", c.cluster_queue), needed):
            return False
        for cohort in tree.ancestors(("cq", c.cluster_queue)):
            if cohort == c.meet:
                break
            if tree.within_nominal(("cohort", cohort), needed):
                return False
        return True

    removed: list[tuple[_Candidate, Charge]] = []
    try:
        for candidate in candidates:
            if not valid(candidate):
                continue
            charge = ledger.release(candidate.key)
            if charge is None:
                continue
            removed.append((candidate, charge))
            if not fits():
                continue
            # Fits: put back what turns out not to be needed, newest removal first.
            kept = {candidate.key}
            for earlier, earlier_charge in reversed(removed[:-1]):
                ledger.reserve(earlier.key, earlier_charge)
                if fits():
                    continue  # not needed: it stays put back
                ledger.release(earlier.key)
                kept.add(earlier.key)
            removed = [(c, ch) for c, ch in removed if c.key in kept]
            return [Target(c.key, c.cluster_queue, c.reason) for c, _ in removed]
        return []
    finally:
        for candidate, charge in removed:
            if not ledger.holds(candidate.key):
                ledger.reserve(candidate.key, charge)


def _invert(stamp: str) -> tuple[int, ...]:
    """Sorts RFC 3339 stamps newest first."""
    return tuple(-ord(c) for c in stamp)
