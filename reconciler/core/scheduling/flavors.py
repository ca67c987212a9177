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

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from reconciler.api import ResourceFlavor, TopologyAssignment

from ..model.clusterqueues import ClusterQueueModel, FlavorQuota, ResourceGroupModel
from ..model.workloads import DeviceSizes, PodSetInfo, WorkloadInfo
from ..primitives.podrequests import Amounts
from ..primitives.quantity import format_amount
from ..primitives.selectors import first_untolerated_taint, flavor_matches_pod_spec, taint_text
from ..quota.capacity import Capacity
from ..quota.ledger import FlavorResource
from .fungibility import (
    BEST,
    FIT,
    NO_CANDIDATES,
    NO_FIT,
    Outcome,
    PreemptionOracle,
    is_preferred,
    mode_text,
    should_try_next,
)

__all__ = [
    "DeviceCheck",
    "FlavorFit",
    "FlavorNoFit",
    "PodSetFlavors",
    "TasFlavors",
    "assign_flavors",
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
    # When waiting for quota: what it would use in the flavors where preemption could make room,
    # and the flavor-resources of it that need preemption (Kueue's assignment in Preempt mode).
    usage: Mapping[FlavorResource, int] | None = None
    needed: frozenset[FlavorResource] = frozenset()
    # The flavors chosen depend on the workload's priority (its preemption candidates), not only
    # on its shape: the verdict is not shared with workloads of the same shape.
    depends: bool = False
    # It fits on quota, not in the topology's domains as they are, but would in empty ones: the
    # quota assignment, placed again by preemption's test of each candidate set.
    retry: FlavorFit | None = None


@dataclass(slots=True)
class _GroupAttempt:
    flavor: str | None = None
    # The flavor preemption could make room in, when none fits (the best such outcome).
    fallback: str | None = None
    reasons: list[str] = field(default_factory=list)
    # Some flavor would fit if quota in use were released.
    quota_bound: bool = False
    # The chosen flavor fits only by borrowing from the cohort.
    borrows: bool = False
    # The chosen flavor's borrow level.
    level: int = 0
    # The preemption oracle was asked (among several flavors): the choice may depend on the
    # workload's priority, not only on its shape.
    asked: bool = False
    # Per flavor tried: (mode, borrow level, reasons), for Kueue's "Flavors considered".
    tried: dict[str, tuple[str, int, list[str]]] = field(default_factory=dict)
    # Per flavor whose quota was checked: each resource's mode there.
    modes: dict[str, dict[str, int]] = field(default_factory=dict)
    # Per flavor whose charge it decided: the amounts there and how they were reckoned.
    sized: dict[str, tuple[Amounts, list[str]]] = field(default_factory=dict)

    def amount(self, resource: str, requests: Amounts, flavor: str | None) -> int:
        """A flavor's charge of a resource."""
        sized = self.sized.get(flavor or "")
        return sized[0][resource] if sized is not None else requests[resource]


@dataclass(frozen=True, slots=True)
class _Checks:
    """What, beyond quota, a flavor is checked against."""

    devices: DeviceCheck | None
    sizes: DeviceSizes | None
    tas: TasFlavors
    oracle: PreemptionOracle | None


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


def _assume(assumed: dict[FlavorResource, int], assigned: Mapping[str, str], usage: Amounts) -> None:
    """Count a pod set's usage on its flavors, for the pod sets after it."""
    for resource, flavor in assigned.items():
        assumed[(flavor, resource)] = assumed.get((flavor, resource), 0) + usage[resource]


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
    oracle: PreemptionOracle | None,
    ask: bool,
) -> tuple[Outcome, bool, int, list[str]]:
    """The group's resources against the flavor's quota: (the worst outcome, whether it borrows,
    the highest borrowing height, notes); each resource's mode goes to `attempt.modes` and what
    does not fit to the attempt's reasons."""
    name = quota.name
    outcome, borrows, height_max, notes = BEST, False, 0, []
    modes = attempt.modes[name] = {}
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
            notes.append(attempt.reasons[-1])
            mine: Outcome = (NO_FIT, 0)
        else:
            borrows = borrows or used + value > nominal
            height, reclaimable = capacity.borrow_level(cq, fr, value)
            mine = (FIT, height)
            if value > available:
                attempt.reasons.append(
                    f"insufficient unused quota for {resource} in flavor {name}, "
                    f"{format_amount(resource, value - available)} more needed"
                )
                notes.append(attempt.reasons[-1])
                attempt.quota_bound = True
                while_borrowing = cq.borrow_within_cohort or (oracle is not None and oracle.while_borrowing)
                if not (nominal >= value or reclaimable or while_borrowing):
                    mine = (NO_FIT, height)
                elif oracle is None or not ask:
                    mine = (NO_CANDIDATES, height)
                else:
                    mine = oracle.possibility(fr, value)
                    attempt.asked = True
        modes[resource] = mine[0]
        height_max = max(height_max, mine[1])
        if is_preferred(outcome, mine, cq.preference):
            outcome = mine
        if outcome[0] == NO_FIT:
            break
    return outcome, borrows, height_max, notes


def _try_group(
    group: ResourceGroupModel,
    requests: Amounts,
    pod_set: PodSetInfo,
    cq: ClusterQueueModel,
    flavors: Mapping[str, ResourceFlavor],
    capacity: Capacity,
    assumed: Mapping[FlavorResource, int],
    checks: _Checks,
) -> _GroupAttempt:
    """The group's flavors in order, as far as flavor fungibility goes; the best outcome wins
    (`attempt.flavor` when it fits, `attempt.fallback` when only preemption could make room)."""
    attempt = _GroupAttempt()
    wanted = sorted(r for r in requests if r in group.covered)
    demanded = pod_set.demanded.intersection(wanted)
    base = requests
    best: tuple[str, bool, Outcome] | None = None
    for quota in group.flavors:
        name = quota.name
        refusal = _flavor_refusal(name, flavors.get(name), pod_set, checks.tas)
        if refusal is not None:
            attempt.reasons.append(refusal)
            attempt.tried[name] = ("NoFit", 0, [refusal])
            continue
        requests = base
        if demanded:
            # allocationMode All, device capacities: the flavor's devices decide the amount.
            resolved = pod_set.requests_in(base, name, checks.sizes)
            if isinstance(resolved, str):
                attempt.reasons.append(resolved)
                attempt.tried[name] = ("NoFit", 0, [resolved])
                continue
            requests, lines = resolved
            attempt.sized[name] = (requests, [line for r, line in lines if r in demanded])
        # With one flavor there is nothing to choose: what preemption could do is found later.
        ask = len(group.flavors) > 1
        outcome, borrows, height, notes = _check_quota(
            attempt, quota, wanted, requests, cq, capacity, assumed, checks.oracle, ask
        )
        if outcome[0] == FIT and checks.devices is not None:
            short = next(
                (
                    s
                    for r in wanted
                    if (s := checks.devices((name, r), assumed.get((name, r), 0) + requests[r], pod_set))
                ),
                None,
            )
            if short is not None:
                attempt.reasons.append(short)  # the next flavor's nodes may have free devices
                outcome, height, notes = (NO_FIT, 0), 0, [short]
        attempt.tried[name] = (mode_text(outcome[0]), height, notes)
        if outcome[0] == NO_FIT:
            continue
        if not should_try_next(outcome, cq.borrow_stops_search, cq.preempt_stops_search):
            best = (name, borrows, outcome)
            break
        if best is None or is_preferred(outcome, best[2], cq.preference):
            best = (name, borrows, outcome)
    if best is not None:
        name, borrows, outcome = best
        if outcome[0] == FIT:
            attempt.flavor, attempt.borrows, attempt.level = name, borrows, outcome[1]
        else:
            attempt.fallback = name
    return attempt


def assign_flavors(
    workload: WorkloadInfo,
    cq: ClusterQueueModel,
    flavors: Mapping[str, ResourceFlavor],
    capacity: Capacity,
    devices: DeviceCheck | None = None,
    sizes: DeviceSizes | None = None,
    tas: TasFlavors = TasFlavors(),
    oracle: PreemptionOracle | None = None,
) -> FlavorFit | FlavorNoFit:
    """`sizes`: the device inventory, which decides the charges of allocationMode All and of
    device capacities per flavor (without it a workload with such charges fits no flavor);
    `oracle`: what preemption could do in a flavor (without it, preemption finds nobody)."""
    checks = _Checks(devices, sizes, tas, oracle)
    assumed: dict[FlavorResource, int] = {}
    results: list[PodSetFlavors] = []
    considered: list[str] = []
    charged: list[str] = []
    # Pod sets waiting for quota, counted on the flavor preemption could free (Kueue names each).
    waits: list[str] = []
    needed: set[FlavorResource] = set()
    borrows, level, depends = False, 0, False
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
            attempt = _try_group(group, requests, pod_set, cq, flavors, capacity, assumed, checks)
            tried.update(attempt.tried)
            depends = depends or attempt.asked
            chosen = attempt.flavor
            if chosen is None:
                failed = True
                reasons.extend(attempt.reasons)
                chosen = attempt.fallback
                if not attempt.quota_bound or chosen is None:
                    waiting = waiting and attempt.quota_bound
                    break
                modes = attempt.modes.get(chosen, {})
                needed.update((chosen, r) for r, mode in modes.items() if mode != FIT)
            else:
                borrows = borrows or attempt.borrows
                level = max(level, attempt.level)
                charged.extend(attempt.sized.get(chosen, ({}, []))[1])
            for covered in group.covered:
                if covered in requests:
                    assigned[covered] = chosen
                    usage[covered] = attempt.amount(covered, requests, chosen)
        _assume(assumed, assigned, usage)
        results.append(PodSetFlavors(pod_set.name, pod_set.count, assigned, usage))
        if failed:
            waits.append(f"couldn't assign flavors to pod set {pod_set.name}: " + ", ".join(sorted(reasons)))
            if not waiting:
                return FlavorNoFit("; ".join(waits), waiting_for_quota=False)
            continue
        if text := _considered(tried):
            considered.append(f"{pod_set.name}: {text}")
    if waits:
        retry = FlavorFit(results, assumed) if _on_tas(results, tas) else None
        return FlavorNoFit("; ".join(waits), True, assumed, frozenset(needed), depends, retry)
    return FlavorFit(results, assumed, borrows, " | ".join(considered), level, tuple(charged))


def _on_tas(pod_sets: list[PodSetFlavors], tas: TasFlavors) -> bool:
    """Some pod set is charged to a flavor topology-aware scheduling places on."""
    return any(f in tas.levels for ps in pod_sets for f in ps.flavors.values())
