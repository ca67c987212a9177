"""Flavor assignment: which ResourceFlavor each requested resource is charged to.

For each pod set, for each resource group its requests touch, the group's
flavors are tried in order; the first flavor whose labels, taints and quota
fit all the group's requested resources wins. When none fits, the reasons are
collected in Kueue's exact words, sorted, and joined into one message, e.g.
`couldn't assign flavors to pod set main: insufficient unused quota for
nvidia.com/gpu in flavor p3-t4, 1 more needed`.

A flavor naming a Topology (``spec.topologyName``) is used only when the cache can place on it
(`TasFlavors`, from `topology_fit`), with Kueue's rules for matching pod sets and TAS flavors;
the placement itself follows a fit on quota (`topology_fit.place_topology`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from reconciler.api import Admission, ResourceFlavor, Toleration, TopologyAssignment

from ..model.clusterqueues import ClusterQueueModel, FlavorQuota, ResourceGroupModel
from ..model.workloads import DeviceSizes, PodSetInfo, WorkloadInfo
from ..primitives.podrequests import Amounts
from ..primitives.quantity import format_amount
from ..primitives.selectors import first_untolerated_taint, flavor_matches_pod_spec, taint_text
from ..quota.capacity import Capacity
from ..quota.ledger import FlavorResource

__all__ = [
    "DeviceCheck",
    "FlavorFit",
    "FlavorNoFit",
    "PodSetFlavors",
    "TasFlavors",
    "admission_node_labels",
    "admission_tolerations",
    "assign_flavors",
    "node_labels_for",
]


# deviceInventory Enforce: why a flavor's free devices cannot take this much of a resource for a
# pod set, or None.
DeviceCheck = Callable[[FlavorResource, int, PodSetInfo], str | None]


@dataclass(frozen=True, slots=True)
class PodSetFlavors:
    name: str
    count: int
    flavors: dict[str, str]
    usage: Amounts
    # Where its pods go (topology-aware scheduling), when a TAS flavor was assigned.
    topology: TopologyAssignment | None = None


@dataclass(frozen=True, slots=True)
class TasFlavors:
    """The flavors topology-aware scheduling can place on (their Topology and nodes are known),
    with their Topology's levels; `only`: every flavor of the ClusterQueue names a Topology."""

    levels: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    only: bool = False
    # The nodes are fed (a flavor missing from `levels` then lacks its Topology).
    fed: bool = False
    # Why this Workload may not be placed in topology domains at all (its kind), or "".
    refusal: str = ""


@dataclass(frozen=True, slots=True)
class FlavorFit:
    pod_sets: list[PodSetFlavors]
    usage: dict[FlavorResource, int]
    # Some of it is borrowed from the cohort.
    borrows: bool = False
    # Kueue's "Flavors considered" of the QuotaReserved Event ("" when every flavor fit plainly).
    considered: str = ""
    # How high in the cohort tree it borrows (0: not at all); Kueue orders a cohort's heads by it.
    borrow_level: int = 0
    # What the charges the chosen flavors decided came to (allocationMode All, device capacities).
    charged: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class FlavorNoFit:
    message: str
    # True when only used quota stands in the way: freeing quota may let it in.
    waiting_for_quota: bool


@dataclass(slots=True)
class _GroupAttempt:
    flavor: str | None = None
    reasons: list[str] = field(default_factory=list)
    # Some flavor would fit if quota in use were released.
    quota_bound: bool = False
    # The chosen flavor fits only by borrowing from the cohort.
    borrows: bool = False
    # The chosen flavor's borrow level.
    level: int = 0
    # Per flavor tried: (mode, borrow level, reasons), for Kueue's "Flavors considered".
    tried: dict[str, tuple[str, int, list[str]]] = field(default_factory=dict)
    # Per flavor whose charge it decided: the amounts there and how they were reckoned.
    sized: dict[str, tuple[Amounts, list[str]]] = field(default_factory=dict)

    def amount(self, resource: str, requests: Amounts) -> int:
        """The chosen flavor's charge of a resource."""
        sized = self.sized.get(self.flavor or "")
        return sized[0][resource] if sized is not None else requests[resource]


def _considered(tried: Mapping[str, tuple[str, int, list[str]]]) -> str:
    """Kueue's wording of the flavors tried for one pod set, plain fits left out."""
    parts = []
    for name in sorted(tried):
        mode, borrow, reasons = tried[name]
        if mode == "Fit" and borrow == 0:
            continue
        text = mode + (f";borrow={borrow}" if borrow > 0 else "")
        if reasons:
            text += ";" + ";".join(sorted(set(reasons)))
        parts.append(f"{name}({text})")
    return ", ".join(parts)


def _flavor_refusal(
    name: str, flavor: ResourceFlavor | None, pod_set: PodSetInfo, tas: TasFlavors
) -> str | None:
    """Why the pod set cannot use the flavor at all (missing, topology, a taint, node affinity)."""
    placement = pod_set.placement
    if flavor is None:
        return f"flavor {name} not found"
    topology = flavor.spec.topology_name
    if topology and (tas.refusal or name not in tas.levels):
        if tas.refusal:
            return f"flavor {name} has spec.topologyName {topology}: {tas.refusal}"
        if tas.fed:
            return f'Flavor "{name}" information missing in TAS cache'  # Kueue's: no such Topology
        return (
            f"flavor {name} has spec.topologyName {topology}: topology-aware "
            "scheduling needs the nodes, which were not given"
        )
    request = pod_set.topology
    # Kueue's match of a pod set and a flavor for TAS (a TAS-only ClusterQueue implies it).
    if request is not None and not topology:
        return f'Flavor "{name}" does not support TopologyAwareScheduling'
    if request is None and topology and not tas.only:
        return f'Flavor "{name}" supports only TopologyAwareScheduling'
    if request is not None and request.level is not None and request.level not in tas.levels[name]:
        return f'Flavor "{name}" does not contain the requested level'
    taint = first_untolerated_taint(
        flavor.spec.node_taints, [*placement.tolerations, *flavor.spec.tolerations]
    )
    if taint is not None:
        return f"untolerated taint {taint_text(taint)} in flavor {name}"
    if not flavor_matches_pod_spec(placement, flavor.spec.node_labels):
        return f"flavor {name} doesn't match node affinity"
    return None


def _check_quota(
    attempt: _GroupAttempt,
    quota: FlavorQuota,
    wanted: list[str],
    requests: Amounts,
    cq: ClusterQueueModel,
    capacity: Capacity,
    assumed: Mapping[FlavorResource, int],
) -> tuple[bool, bool, str, int, list[str]]:
    """The group's resources against the flavor's quota: (fits, borrows, mode, borrowing level,
    notes); what does not fit is added to the attempt's reasons."""
    name = quota.name
    fits, borrows = True, False
    mode, level, notes = "Fit", 0, []
    for resource in wanted:
        fr = (name, resource)
        previous = assumed.get(fr, 0)
        value = previous + requests[resource]
        nominal = quota.nominal.get(resource, 0)
        used = capacity.used(cq.name, fr)
        maximum, available = capacity.limits(cq, fr, nominal, used)
        if value > maximum:
            attempt.reasons.append(
                f"insufficient quota for {resource} in flavor {name}, previously considered "
                f"podsets requests ({format_amount(resource, previous)}) + current podset "
                f"request ({format_amount(resource, requests[resource])}) > maximum capacity "
                f"({format_amount(resource, maximum)})"
            )
            mode, level, notes = "NoFit", 0, [attempt.reasons[-1]]
            fits = False
            break
        borrows = borrows or used + value > nominal
        height, reclaimable = capacity.borrow_level(cq, fr, value)
        if value > available:
            attempt.reasons.append(
                f"insufficient unused quota for {resource} in flavor {name}, "
                f"{format_amount(resource, value - available)} more needed"
            )
            notes.append(attempt.reasons[-1])
            attempt.quota_bound = True
            fits = False
            # Kueue asks its preemption oracle where preemption could help; this records
            # only whether it would be asked (the candidates are found later, if at all).
            if nominal >= value or reclaimable or cq.borrow_within_cohort:
                mode = "preemptionMode=NoCandidates" if mode == "Fit" else mode
            else:
                mode = "NoFit"
        else:
            level = max(level, height)
    return fits, borrows, mode, level, notes


def _try_group(
    group: ResourceGroupModel,
    requests: Amounts,
    pod_set: PodSetInfo,
    cq: ClusterQueueModel,
    flavors: Mapping[str, ResourceFlavor],
    capacity: Capacity,
    assumed: Mapping[FlavorResource, int],
    devices: DeviceCheck | None = None,
    sizes: DeviceSizes | None = None,
    tas: TasFlavors = TasFlavors(),
) -> _GroupAttempt:
    attempt = _GroupAttempt()
    wanted = sorted(r for r in requests if r in group.covered)
    demanded = pod_set.demanded.intersection(wanted)
    base = requests
    # With flavorFungibility.whenCanBorrow TryNextFlavor, a flavor that fits only by
    # borrowing is kept in reserve while later flavors are tried for one that does not.
    borrowing_fit: str | None = None
    for quota in group.flavors:
        name = quota.name
        refusal = _flavor_refusal(name, flavors.get(name), pod_set, tas)
        if refusal is not None:
            attempt.reasons.append(refusal)
            attempt.tried[name] = ("NoFit", 0, [refusal])
            continue
        requests = base
        if demanded:
            # allocationMode All, device capacities: the flavor's devices decide the amount.
            resolved = pod_set.requests_in(base, name, sizes)
            if isinstance(resolved, str):
                attempt.reasons.append(resolved)
                attempt.tried[name] = ("NoFit", 0, [resolved])
                continue
            requests, lines = resolved
            attempt.sized[name] = (requests, [line for r, line in lines if r in demanded])
        checked = _check_quota(attempt, quota, wanted, requests, cq, capacity, assumed)
        fits, borrows, mode, level, notes = checked
        if fits and devices is not None:
            short = next(
                (
                    s
                    for r in wanted
                    if (s := devices((name, r), assumed.get((name, r), 0) + requests[r], pod_set))
                ),
                None,
            )
            if short is not None:
                attempt.reasons.append(short)  # the next flavor's nodes may have free devices
                mode, level, notes = "NoFit", 0, [short]
                fits = False
        attempt.tried[name] = (mode, level, notes)
        if not fits:
            continue
        if not borrows or cq.borrow_stops_search:
            attempt.flavor, attempt.borrows, attempt.level = name, borrows, level
            return attempt
        if borrowing_fit is None:
            borrowing_fit = name
    if borrowing_fit is not None:
        attempt.flavor, attempt.borrows = borrowing_fit, True
        attempt.level = attempt.tried[borrowing_fit][1]
    return attempt


def assign_flavors(
    workload: WorkloadInfo,
    cq: ClusterQueueModel,
    flavors: Mapping[str, ResourceFlavor],
    capacity: Capacity,
    devices: DeviceCheck | None = None,
    sizes: DeviceSizes | None = None,
    tas: TasFlavors = TasFlavors(),
) -> FlavorFit | FlavorNoFit:
    """`sizes`: the device inventory, which decides the charges of allocationMode All and of
    device capacities per flavor (without it a workload with such charges fits no flavor)."""
    assumed: dict[FlavorResource, int] = {}
    results: list[PodSetFlavors] = []
    considered: list[str] = []
    charged: list[str] = []
    # Pod sets that wait for quota: Kueue goes on with the next pod sets, counting each of
    # them on the flavor preemption could free, and names every one in its message.
    waits: list[str] = []
    borrows, level = False, 0
    for pod_set in workload.pod_sets:
        requests = pod_set.base_requests()
        demanded = pod_set.demanded
        if "pods" in cq.group_of:
            requests["pods"] = pod_set.count
        assigned: dict[str, str] = {}
        usage = dict(requests)
        tried_groups: set[int] = set()
        tried: dict[str, tuple[str, int, list[str]]] = {}
        reasons: list[str] = []
        failed = False
        waiting = True
        for resource in sorted(requests):
            index = cq.group_of.get(resource)
            if index is None:
                if requests[resource] == 0 and resource not in demanded:
                    continue
                reasons.append(f"resource {resource} unavailable in ClusterQueue")
                failed, waiting = True, False
                break
            if index in tried_groups:
                continue
            tried_groups.add(index)
            group = cq.groups[index]
            attempt = _try_group(
                group, requests, pod_set, cq, flavors, capacity, assumed, devices, sizes, tas
            )
            tried.update(attempt.tried)
            if attempt.flavor is None:
                failed = True
                reasons.extend(attempt.reasons)
                candidate = _preempt_candidate(group, attempt)
                if not attempt.quota_bound or candidate is None:
                    waiting = waiting and attempt.quota_bound
                    break
                assigned.update({r: candidate for r in group.covered if r in requests})
                continue
            borrows = borrows or attempt.borrows
            level = max(level, attempt.level)
            for covered in group.covered:
                if covered in requests:
                    assigned[covered] = attempt.flavor
                    usage[covered] = attempt.amount(covered, requests)
            charged.extend(attempt.sized.get(attempt.flavor, ({}, []))[1])
        for resource, flavor in assigned.items():
            fr = (flavor, resource)
            assumed[fr] = assumed.get(fr, 0) + usage[resource]
        if failed:
            waits.append(f"couldn't assign flavors to pod set {pod_set.name}: " + ", ".join(sorted(reasons)))
            if not waiting:
                return FlavorNoFit("; ".join(waits), waiting_for_quota=False)
            continue
        results.append(PodSetFlavors(pod_set.name, pod_set.count, assigned, usage))
        text = _considered(tried)
        if text:
            considered.append(f"{pod_set.name}: {text}")
    if waits:
        return FlavorNoFit("; ".join(waits), waiting_for_quota=True)
    return FlavorFit(results, assumed, borrows, " | ".join(considered), level, tuple(charged))


def _preempt_candidate(group: ResourceGroupModel, attempt: _GroupAttempt) -> str | None:
    """The flavor a pod set that waits for quota is counted on (Kueue keeps the first flavor
    where preemption could make room); None when no flavor could ever fit."""
    return next((q.name for q in group.flavors if attempt.tried.get(q.name, ("NoFit",))[0] != "NoFit"), None)


def _flavor_labels(flavor_names: Iterable[str], flavors: Mapping[str, ResourceFlavor]) -> dict[str, str]:
    labels: dict[str, str] = {}
    for name in dict.fromkeys(flavor_names):
        flavor = flavors.get(name)
        if flavor is not None:
            labels.update(flavor.spec.node_labels)
    return labels


def node_labels_for(
    pod_sets: Iterable[PodSetFlavors], flavors: Mapping[str, ResourceFlavor]
) -> dict[str, dict[str, str]]:
    """Per pod set, the nodeLabels of its assigned flavors, to merge into the Job's nodeSelector.

    As Kueue does, each distinct flavor assigned to a pod set contributes its labels.
    """
    return {ps.name: _flavor_labels(ps.flavors.values(), flavors) for ps in pod_sets}


def admission_node_labels(
    admission: Admission, flavors: Mapping[str, ResourceFlavor]
) -> dict[str, dict[str, str]]:
    """The same, read back from a Workload's status.admission."""
    return {a.name: _flavor_labels(a.flavors.values(), flavors) for a in admission.pod_set_assignments}


def admission_tolerations(
    admission: Admission, flavors: Mapping[str, ResourceFlavor]
) -> dict[str, list[Toleration]]:
    """Per pod set, the tolerations of its assigned flavors (each distinct one once), for its pods."""
    out: dict[str, list[Toleration]] = {}
    for assignment in admission.pod_set_assignments:
        tolerations: list[Toleration] = []
        for name in dict.fromkeys(assignment.flavors.values()):
            flavor = flavors.get(name)
            if flavor is not None:
                tolerations.extend(t for t in flavor.spec.tolerations if t not in tolerations)
        out[assignment.name] = tolerations
    return out
