"""ClusterQueues compiled for admission, and their Active condition."""

from __future__ import annotations

from collections.abc import Container, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from reconciler.api import (
    BorrowWithinCohort,
    ClusterQueue,
    ClusterQueuePreemption,
    FairSharing,
    FlavorFungibility,
    LabelSelector,
    ResourceGroup,
)

from ..primitives.quantity import QuantityError, parse_quantity, to_amount

__all__ = [
    "ClusterQueueModel",
    "FlavorQuota",
    "InvalidClusterQueueError",
    "ResourceGroupModel",
    "active_condition",
    "compile_cluster_queue",
    "compile_resource_groups",
    "fair_weight",
]


WITHIN_CLUSTER_QUEUE_POLICIES = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
RECLAIM_POLICIES = ("Never", "LowerPriority", "Any")
BORROW_WITHIN_COHORT_POLICIES = ("Never", "LowerPriority")


class InvalidClusterQueueError(ValueError):
    """A ClusterQueue spec that cannot be used; the message names the field."""


@dataclass(frozen=True, slots=True)
class FlavorQuota:
    name: str
    nominal: dict[str, int]
    # Only the resources that set a limit; a missing one is unlimited.
    borrowing_limit: dict[str, int] = field(default_factory=dict)
    lending_limit: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ResourceGroupModel:
    covered: tuple[str, ...]
    flavors: tuple[FlavorQuota, ...]


@dataclass(slots=True)
class ClusterQueueModel:
    name: str
    groups: list[ResourceGroupModel]
    namespace_selector: LabelSelector | None
    strategy: str = "BestEffortFIFO"
    stopped: bool = False
    cohort: str | None = None
    # flavorFungibility.whenCanBorrow: stop at the first flavor that fits by borrowing, or look on;
    # whenCanPreempt: stop at the first where preemption found candidates; the preference between
    # borrowing and preempting when the best outcome is chosen (core/scheduling/fungibility.py).
    borrow_stops_search: bool = True
    preempt_stops_search: bool = False
    preference: str | None = None
    # preemption.withinClusterQueue and preemption.reclaimWithinCohort.
    within_cluster_queue: str = "Never"
    reclaim_within_cohort: str = "Never"
    # preemption.borrowWithinCohort: reclaim from lower priorities while borrowing (at or
    # below maxPriorityThreshold when set).
    borrow_within_cohort: bool = False
    max_priority_threshold: int | None = None
    terminating: bool = False  # being deleted: admits nothing new while its workloads finish
    # spec.fairSharing.weight (1 when not given; 0 makes any borrowing the largest share).
    fair_weight: Fraction = Fraction(1)
    # spec.admissionScope.admissionMode UsageBasedAdmissionFairSharing: ordered by LocalQueue usage.
    fair_admission: bool = False
    group_of: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.group_of = {r: i for i, g in enumerate(self.groups) for r in g.covered}

    def flavor_names(self) -> list[str]:
        return [f.name for g in self.groups for f in g.flavors]

    def quota(self, flavor: str, resource: str) -> FlavorQuota | None:
        index = self.group_of.get(resource)
        if index is None:
            return None
        for quota in self.groups[index].flavors:
            if quota.name == flavor:
                return quota
        return None

    def nominal(self, flavor: str, resource: str) -> int:
        quota = self.quota(flavor, resource)
        return 0 if quota is None else quota.nominal.get(resource, 0)

    def borrowing_limit(self, flavor: str, resource: str) -> int | None:
        quota = self.quota(flavor, resource)
        return None if quota is None else quota.borrowing_limit.get(resource)

    def lending_limit(self, flavor: str, resource: str) -> int | None:
        quota = self.quota(flavor, resource)
        return None if quota is None else quota.lending_limit.get(resource)


def compile_resource_groups(
    resource_groups: Sequence[ResourceGroup], parent_field: str, has_parent: bool, *, is_cohort: bool = False
) -> list[ResourceGroupModel]:
    """Quotas of a ClusterQueue or Cohort; limits need a parent (`parent_field` names it). As in
    Kueue, only a ClusterQueue's lendingLimit must stay within its nominal quota."""
    parent_word = "parent" if is_cohort else parent_field
    groups: list[ResourceGroupModel] = []
    seen_resources: set[str] = set()
    for gi, group in enumerate(resource_groups):
        path = f"spec.resourceGroups[{gi}]"
        for resource in group.covered_resources:
            if resource in seen_resources:
                raise InvalidClusterQueueError(
                    f"{path}.coveredResources: resource {resource} is covered by more than one "
                    "resource group; list each resource in one group only"
                )
            seen_resources.add(resource)
        flavors: list[FlavorQuota] = []
        for fi, flavor in enumerate(group.flavors):
            nominal: dict[str, int] = {}
            borrowing: dict[str, int] = {}
            lending: dict[str, int] = {}
            for ri, quota in enumerate(flavor.resources):
                where = f"{path}.flavors[{fi}].resources[{ri}]"
                if quota.name not in group.covered_resources:
                    raise InvalidClusterQueueError(
                        f"{where}.name: {quota.name} is not in "
                        f"coveredResources; add it there or remove it from flavor {flavor.name}"
                    )
                nominal[quota.name] = _amount(f"{where}.nominalQuota", quota.name, quota.nominal_quota)
                for field_name, value, limits in (
                    ("borrowingLimit", quota.borrowing_limit, borrowing),
                    ("lendingLimit", quota.lending_limit, lending),
                ):
                    if value is None:
                        continue
                    if not has_parent:
                        raise InvalidClusterQueueError(
                            f"{where}.{field_name}: must be nil when {parent_word} is empty; "
                            f"set spec.{parent_field} or remove the limit"
                        )
                    limits[quota.name] = _amount(f"{where}.{field_name}", quota.name, value)
                if not is_cohort and lending.get(quota.name, 0) > nominal[quota.name]:
                    raise InvalidClusterQueueError(
                        f"{where}.lendingLimit: must be less than or equal to the nominalQuota; "
                        "lower it or raise nominalQuota"
                    )
            flavors.append(FlavorQuota(flavor.name, nominal, borrowing, lending))
        groups.append(ResourceGroupModel(tuple(group.covered_resources), tuple(flavors)))
    return groups


def compile_cluster_queue(cq: ClusterQueue) -> ClusterQueueModel:
    groups = compile_resource_groups(cq.spec.resource_groups, "cohortName", bool(cq.spec.cohort_name))
    fungibility = cq.spec.flavor_fungibility or FlavorFungibility()
    preemption = cq.spec.preemption or ClusterQueuePreemption()
    for field_name, value, allowed in (
        ("withinClusterQueue", preemption.within_cluster_queue, WITHIN_CLUSTER_QUEUE_POLICIES),
        ("reclaimWithinCohort", preemption.reclaim_within_cohort, RECLAIM_POLICIES),
    ):
        if value not in allowed:
            raise InvalidClusterQueueError(
                f"spec.preemption.{field_name}: {value!r} is not one of {', '.join(allowed)}; use one of them"
            )
    _check_fungibility(fungibility)
    borrow = preemption.borrow_within_cohort or BorrowWithinCohort()
    if borrow.policy not in BORROW_WITHIN_COHORT_POLICIES:
        raise InvalidClusterQueueError(
            f"spec.preemption.borrowWithinCohort.policy: {borrow.policy!r} is not one of "
            f"{', '.join(BORROW_WITHIN_COHORT_POLICIES)}; use one of them"
        )
    if preemption.reclaim_within_cohort == "Never" and borrow.policy != "Never":
        # Kueue's CEL rule on spec.preemption, in its words.
        raise InvalidClusterQueueError(
            "spec.preemption: Invalid value: reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never; "
            "set reclaimWithinCohort or borrowWithinCohort.policy: Never"
        )
    return ClusterQueueModel(
        name=cq.metadata.name,
        groups=groups,
        namespace_selector=cq.spec.namespace_selector,
        strategy=cq.spec.queueing_strategy or "BestEffortFIFO",
        stopped=cq.spec.stop_policy in ("Hold", "HoldAndDrain"),
        cohort=cq.spec.cohort_name or None,
        borrow_stops_search=fungibility.when_can_borrow != "TryNextFlavor",
        preempt_stops_search=fungibility.when_can_preempt == "MayStopSearch",
        preference=fungibility.preference,
        within_cluster_queue=preemption.within_cluster_queue,
        reclaim_within_cohort=preemption.reclaim_within_cohort,
        borrow_within_cohort=borrow.policy != "Never",
        max_priority_threshold=borrow.max_priority_threshold,
        terminating=bool(cq.metadata.deletion_timestamp),
        fair_weight=fair_weight(cq.spec.fair_sharing),
        fair_admission=cq.spec.admission_scope is not None
        and cq.spec.admission_scope.admission_mode == USAGE_BASED,
    )


_FUNGIBILITY_POLICIES = ("MayStopSearch", "TryNextFlavor")
_PREFERENCES = ("BorrowingOverPreemption", "PreemptionOverBorrowing")


def _check_fungibility(fungibility: FlavorFungibility) -> None:
    """Kueue's rules for spec.flavorFungibility: the policies and the preference from their
    enums, and a preference only when both policies are TryNextFlavor (its webhook's words)."""
    where = "spec.flavorFungibility"
    for field_name, value, allowed in (
        ("whenCanBorrow", fungibility.when_can_borrow, _FUNGIBILITY_POLICIES),
        ("whenCanPreempt", fungibility.when_can_preempt, _FUNGIBILITY_POLICIES),
        ("preference", fungibility.preference, _PREFERENCES),
    ):
        if value is not None and value not in allowed:
            raise InvalidClusterQueueError(
                f"{where}.{field_name}: {value!r} is not one of {', '.join(allowed)}; use one of them"
            )
    preference = fungibility.preference
    if preference is not None and not (
        fungibility.when_can_borrow == fungibility.when_can_preempt == "TryNextFlavor"
    ):
        raise InvalidClusterQueueError(
            f'{where}.preference: Invalid value: "{preference}": preference "{preference}" requires '
            "both whenCanBorrow and whenCanPreempt to be TryNextFlavor"
        )


_MIN_WEIGHT = Fraction(1, 10**9)
USAGE_BASED = "UsageBasedAdmissionFairSharing"


def fair_weight(fair_sharing: FairSharing | None) -> Fraction:
    """spec.fairSharing.weight, exactly; 1 when not given. Refuses (naming the field) what Kueue's
    webhook refuses: a negative weight, or one above 0 but not above 10^-9."""
    if fair_sharing is None or fair_sharing.weight is None:
        return Fraction(1)
    where = "spec.fairSharing.weight"
    raw = fair_sharing.weight
    try:
        weight = parse_quantity(str(raw) if isinstance(raw, float) else raw)
    except QuantityError as err:
        raise InvalidClusterQueueError(f"{where}: {err}") from None
    if weight < 0:
        raise InvalidClusterQueueError(
            f'{where}: Invalid value: "{raw}": must be greater than or equal to 0; give 0 or more'
        )
    if 0 < weight <= _MIN_WEIGHT:
        raise InvalidClusterQueueError(
            f'{where}: Invalid value: "{raw}": When not 0, weight must be > 10e-9; give 0 or a larger weight'
        )
    return weight


def _amount(where: str, resource: str, value: str | int) -> int:
    try:
        amount = to_amount(resource, parse_quantity(value))
    except QuantityError as err:
        raise InvalidClusterQueueError(f"{where}: {err}") from None
    if amount < 0:
        raise InvalidClusterQueueError(
            f'{where}: Invalid value: "{value}": must be greater than or equal to 0; '
            "give a quota of 0 or more"
        )
    return amount


def active_condition(
    model: ClusterQueueModel,
    flavors: Container[str],
    cycle_problem: str = "",
    missing_topologies: Sequence[tuple[str, str]] = (),
) -> tuple[str, str, str]:
    """(status, reason, message) of the ClusterQueue's Active condition, as Kueue words it.

    `missing_topologies`: (flavor, Topology) of its TAS flavors whose Topology is not known
    (Kueue's TopologyNotFound, with topology-aware scheduling running). `cycle_problem`
    (`cohort has a cycle: a -> b -> a`) is set when the cohorts above it form a cycle: Kueue
    leaves such a ClusterQueue out of scheduling but still calls it Ready; here it is
    Active=False with reason HasCycle (an intended difference, see docs/scheduling.md)."""
    if model.terminating:
        return "False", "Terminating", "Can't admit new workloads; clusterQueue is terminating"
    reasons: list[str] = []
    messages: list[str] = []
    if model.stopped:
        reasons.append("Stopped")
        messages.append("is stopped")
    missing = [name for name in dict.fromkeys(model.flavor_names()) if name not in flavors]
    if missing:
        reasons.append("FlavorNotFound")
        messages.append(f"references missing ResourceFlavor(s): {','.join(missing)}")
    for flavor, topology in missing_topologies:
        reasons.append("TopologyNotFound")
        messages.append(f'there is no Topology "{topology}" for TAS flavor "{flavor}"')
    if cycle_problem:
        reasons.append("HasCycle")
        messages.append(cycle_problem)
    if reasons:
        return "False", reasons[0], f"Can't admit new workloads: {', '.join(messages)}."
    return "True", "Ready", "Can admit new workloads"
