"""Flavor assignment: which ResourceFlavor each requested resource is charged to.

For each pod set, for each resource group its requests touch, the group's
flavors are tried in order; the first flavor whose labels, taints and quota
fit all the group's requested resources wins. When none fits, the reasons are
collected in Kueue's exact words, sorted, and joined into one message, e.g.
`couldn't assign flavors to pod set main: insufficient unused quota for
nvidia.com/gpu in flavor p3-t4, 1 more needed`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from reconciler.api import Admission, ResourceFlavor, Toleration

from .capacity import Capacity
from .clusterqueues import ClusterQueueModel, ResourceGroupModel
from .ledger import FlavorResource
from .podrequests import Amounts
from .quantity import format_amount
from .selectors import first_untolerated_taint, flavor_matches_pod_spec, taint_text
from .workloads import PodSetInfo, WorkloadInfo

__all__ = [
    "DeviceCheck",
    "FlavorAttempt",
    "FlavorFit",
    "FlavorNoFit",
    "PodSetFlavors",
    "admission_node_labels",
    "admission_tolerations",
    "assign_flavors",
    "considered_flavors",
    "node_labels_for",
]


# deviceInventory Enforce: why a flavor's free devices cannot take this much of a resource, or None.
DeviceCheck = Callable[[FlavorResource, int], str | None]


@dataclass(frozen=True, slots=True)
class PodSetFlavors:
    name: str
    count: int
    flavors: dict[str, str]
    usage: Amounts


@dataclass(frozen=True, slots=True)
class FlavorAttempt:
    """One flavor tried for a pod set, as Kueue's QuotaReserved Event lists it."""

    flavor: str
    fits: bool
    # Only quota in use stands in the way (preempting could make room).
    quota_bound: bool = False
    borrows: bool = False
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class FlavorFit:
    pod_sets: list[PodSetFlavors]
    usage: dict[FlavorResource, int]
    # Some of it is borrowed from the cohort.
    borrows: bool = False
    # Per pod set, the flavors tried on the way, by flavor name.
    attempts: tuple[tuple[str, tuple[FlavorAttempt, ...]], ...] = ()


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
    tried: list[FlavorAttempt] = field(default_factory=list)

    def no_fit(
        self, flavor: str, reasons: list[str], quota_bound: bool = False, borrows: bool = False
    ) -> None:
        self.reasons.extend(reasons)
        self.tried.append(FlavorAttempt(flavor, False, quota_bound, borrows, tuple(sorted(reasons))))


def _try_group(
    group: ResourceGroupModel,
    requests: Amounts,
    pod_set: PodSetInfo,
    cq: ClusterQueueModel,
    flavors: Mapping[str, ResourceFlavor],
    capacity: Capacity,
    assumed: Mapping[FlavorResource, int],
    devices: DeviceCheck | None = None,
) -> _GroupAttempt:
    attempt = _GroupAttempt()
    wanted = sorted(r for r in requests if r in group.covered)
    # With flavorFungibility.whenCanBorrow TryNextFlavor, a flavor that fits only by
    # borrowing is kept in reserve while later flavors are tried for one that does not.
    borrowing_fit: str | None = None
    for quota in group.flavors:
        name = quota.name
        flavor = flavors.get(name)
        if flavor is None:
            attempt.no_fit(name, [f"flavor {name} not found"])
            continue
        spec = pod_set.placement
        taint = first_untolerated_taint(
            flavor.spec.node_taints, [*spec.tolerations, *flavor.spec.tolerations]
        )
        if taint is not None:
            attempt.no_fit(name, [f"untolerated taint {taint_text(taint)} in flavor {name}"])
            continue
        if not flavor_matches_pod_spec(spec, flavor.spec.node_labels):
            attempt.no_fit(name, [f"flavor {name} doesn't match node affinity"])
            continue
        fits, borrows, quota_bound = True, False, False
        # Would it still borrow once preemption freed this ClusterQueue's own quota?
        borrows_after_preemption = False
        reasons: list[str] = []
        for resource in wanted:
            fr = (name, resource)
            previous = assumed.get(fr, 0)
            value = previous + requests[resource]
            nominal = quota.nominal.get(resource, 0)
            used = capacity.used(cq.name, fr)
            maximum, available = capacity.limits(cq, fr, nominal, used)
            if value > maximum:
                reasons.append(
                    f"insufficient quota for {resource} in flavor {name}, previously considered "
                    f"podsets requests ({format_amount(resource, previous)}) + current podset "
                    f"request ({format_amount(resource, requests[resource])}) > maximum capacity "
                    f"({format_amount(resource, maximum)})"
                )
                fits, quota_bound = False, False
                break
            borrows = borrows or used + value > nominal
            borrows_after_preemption = borrows_after_preemption or (cq.cohort is not None and value > nominal)
            if value > available:
                reasons.append(
                    f"insufficient unused quota for {resource} in flavor {name}, "
                    f"{format_amount(resource, value - available)} more needed"
                )
                attempt.quota_bound = quota_bound = True
                fits = False
        if fits and devices is not None:
            short = next(
                (s for r in wanted if (s := devices((name, r), assumed.get((name, r), 0) + requests[r]))),
                None,
            )
            if short is not None:
                reasons.append(short)  # the next flavor's nodes may have free devices
                fits = False
        if not fits:
            attempt.no_fit(name, reasons, quota_bound, quota_bound and borrows_after_preemption)
            continue
        attempt.tried.append(FlavorAttempt(name, True, borrows=borrows))
        if not borrows or cq.borrow_stops_search:
            attempt.flavor, attempt.borrows = name, borrows
            return attempt
        if borrowing_fit is None:
            borrowing_fit = name
    if borrowing_fit is not None:
        attempt.flavor, attempt.borrows = borrowing_fit, True
    return attempt


def assign_flavors(
    workload: WorkloadInfo,
    cq: ClusterQueueModel,
    flavors: Mapping[str, ResourceFlavor],
    capacity: Capacity,
    devices: DeviceCheck | None = None,
) -> FlavorFit | FlavorNoFit:
    assumed: dict[FlavorResource, int] = {}
    results: list[PodSetFlavors] = []
    attempts: list[tuple[str, tuple[FlavorAttempt, ...]]] = []
    borrows = False
    for pod_set in workload.pod_sets:
        requests = pod_set.total()
        if "pods" in cq.group_of:
            requests["pods"] = pod_set.count
        assigned: dict[str, str] = {}
        tried_groups: set[int] = set()
        reasons: list[str] = []
        tried: dict[str, FlavorAttempt] = {}
        failed = False
        waiting = True
        for resource in sorted(requests):
            index = cq.group_of.get(resource)
            if index is None:
                if requests[resource] == 0:
                    continue
                reasons.append(f"resource {resource} unavailable in ClusterQueue")
                failed, waiting = True, False
                break
            if index in tried_groups:
                continue
            tried_groups.add(index)
            group = cq.groups[index]
            attempt = _try_group(group, requests, pod_set, cq, flavors, capacity, assumed, devices)
            tried.update((a.flavor, a) for a in attempt.tried)
            if attempt.flavor is None:
                failed = True
                reasons.extend(attempt.reasons)
                if not attempt.quota_bound:
                    waiting = False
                    break
                continue
            borrows = borrows or attempt.borrows
            for covered in group.covered:
                if covered in requests:
                    assigned[covered] = attempt.flavor
        if failed:
            message = f"couldn't assign flavors to pod set {pod_set.name}: " + ", ".join(sorted(reasons))
            return FlavorNoFit(message, waiting_for_quota=waiting)
        for resource, flavor in assigned.items():
            fr = (flavor, resource)
            assumed[fr] = assumed.get(fr, 0) + requests[resource]
        results.append(PodSetFlavors(pod_set.name, pod_set.count, assigned, requests))
        attempts.append((pod_set.name, tuple(tried[f] for f in sorted(tried))))
    return FlavorFit(results, assumed, borrows, tuple(attempts))


def considered_flavors(fit: FlavorFit, possibility: Callable[[str], str]) -> str:
    """The flavors tried on the way to `fit` in Kueue's words, for its QuotaReserved Event:
    `main: p3-t4(preemptionMode=NoCandidates;insufficient unused quota ...)`; empty when
    every pod set got its first flavor without borrowing. `possibility(flavor)` tells
    what preempting could do in a flavor short of unused quota: NoCandidates, Preempt or
    Reclaim. A borrowing flavor shows `borrow=1`: the cohorts here are one level deep."""
    parts: list[str] = []
    for pod_set, attempts in fit.attempts:
        shown: list[str] = []
        for a in attempts:
            if a.fits and not a.borrows:
                continue
            if a.fits:
                mode = "Fit"
            elif a.quota_bound:
                mode = f"preemptionMode={possibility(a.flavor)}"
            else:
                mode = "NoFit"
            details = [mode, *(["borrow=1"] if a.borrows else []), *a.reasons]
            shown.append(f"{a.flavor}({';'.join(details)})")
        if shown:
            parts.append(f"{pod_set}: {', '.join(shown)}")
    return " | ".join(parts)


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
