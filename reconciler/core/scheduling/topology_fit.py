"""Topology-aware scheduling in the scheduling cycle: the TAS flavors the cache can place on, the
topology step after a fit on quota, and what an admission's topology assignments take.

A flavor is a TAS flavor here only when the cache has both its Topology and the nodes (fed as
`TopologyNode`s: each node's free capacity without the pods of admitted TAS workloads); until
then the flavor assignment refuses it by name. The trees are built for each assignment from the
nodes, less every admitted workload's assignments, then `admit_topology` places the pod sets.

A Workload that fits on quota but not in the domains is placed again as if no admitted workload
held anything there (Kueue's simulated empty topology): when it fits so, preemption may make room
(its verdict waits for quota, with the flavor-resources of its TAS pod sets needing preemption and
`retry` kept), and preemption's test of a candidate set places it again without their
assignments (`topology_fits`), as Kueue's preemption checks the topology with quota; when it does
not fit even so, it waits, as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from reconciler.api import ResourceFlavor, TopologyAssignment

from ..model.clusterqueues import ClusterQueueModel
from ..model.workloads import WorkloadInfo
from ..quota.cache import QuotaCache
from ..topology.admit import PodSetTopology, admit_topology, flavor_trees
from ..topology.assignment import charge, decode_assignment
from ..topology.placement import Placed, PodSetPlacement
from .flavors import FlavorFit, FlavorNoFit, PodSetFlavors, TasFlavors

__all__ = [
    "TAS_KINDS_ONLY",
    "admitted_pod_sets",
    "place_topology",
    "record_topology",
    "short_of_quota",
    "tas_flavors",
    "topology_fits",
]

Key = tuple[str, str]


TAS_KINDS_ONLY = (
    "topology-aware scheduling is supported for batch/v1 Jobs and JobSets only by this controller"
)


def tas_flavors(cache: QuotaCache, cq: ClusterQueueModel, owner: tuple[str, str] = ("", "")) -> TasFlavors:
    """The TAS flavors a Workload (its controller `owner`) may be placed on in this ClusterQueue."""
    if cache.topology_nodes is None:
        return TasFlavors()
    if cache.topology_owners is not None and owner not in cache.topology_owners:
        return TasFlavors(fed=True, refusal=TAS_KINDS_ONLY)
    levels: dict[str, tuple[str, ...]] = {}
    for name, flavor in cache.flavors.items():
        topology = cache.topologies.get(flavor.spec.topology_name or "")
        if topology is not None and topology.spec.levels:
            levels[name] = tuple(level.node_label for level in topology.spec.levels)
    names = [q.name for group in cq.groups for q in group.flavors]
    only = bool(names) and all(_topology_of(cache.flavors.get(n)) for n in names)
    return TasFlavors(levels, only, fed=True)


def _topology_of(flavor: ResourceFlavor | None) -> str | None:
    return None if flavor is None else flavor.spec.topology_name


def _tas_flavor(assigned: Mapping[str, str], flavors: Mapping[str, ResourceFlavor]) -> list[str]:
    return sorted({f for f in assigned.values() if _topology_of(flavors.get(f))})


def place_topology(info: WorkloadInfo, fit: FlavorFit, cache: QuotaCache) -> FlavorFit | FlavorNoFit:
    """The fit with each TAS pod set's topology assignment, or why they do not fit (waiting for
    preemption when an empty topology would hold them)."""
    wanted = _wanted(info, fit, cache)
    if isinstance(wanted, FlavorNoFit):
        return wanted
    if not wanted:
        return fit
    result = _place(wanted, cache)
    if isinstance(result, str):
        if isinstance(_place(wanted, cache, empty=True), str):
            return FlavorNoFit(result, waiting_for_quota=False)
        return FlavorNoFit(result, True, dict(fit.usage), _tas_resources(fit, cache), retry=fit)
    pod_sets = [replace(ps, topology=result.get(ps.name)) for ps in fit.pod_sets]
    return replace(fit, pod_sets=pod_sets)


def short_of_quota(info: WorkloadInfo, verdict: FlavorNoFit, cache: QuotaCache) -> FlavorNoFit:
    """A Workload short of quota on a TAS flavor (`verdict.retry`, its quota assignment): one an
    empty topology could not hold either does not preempt (Kueue's no fit); else preemption
    frees the domains too (its TAS flavor-resources need preemption, and each candidate set is
    placed again)."""
    retry = verdict.retry
    if retry is None:
        return verdict
    wanted = _wanted(info, retry, cache)
    if isinstance(wanted, FlavorNoFit):
        return replace(wanted, message=verdict.message)
    if not wanted:
        return verdict
    if isinstance(_place(wanted, cache, empty=True), str):
        return FlavorNoFit(verdict.message, waiting_for_quota=False)
    return replace(verdict, needed=verdict.needed | _tas_resources(retry, cache))


def topology_fits(info: WorkloadInfo, fit: FlavorFit, cache: QuotaCache, excluded: frozenset[Key]) -> bool:
    """Whether the quota assignment's TAS pod sets fit once the `excluded` workloads are gone."""
    wanted = _wanted(info, fit, cache)
    return isinstance(wanted, list) and not isinstance(_place(wanted, cache, excluded), str)


def _tas_resources(fit: FlavorFit, cache: QuotaCache) -> frozenset[tuple[str, str]]:
    """The flavor-resources the fit charges to TAS flavors (they need preemption for the domains)."""
    flavors = cache.flavors
    return frozenset(
        (f, r) for ps in fit.pod_sets for r, f in ps.flavors.items() if _topology_of(flavors.get(f))
    )


def _place(
    wanted: list[PodSetTopology],
    cache: QuotaCache,
    excluded: frozenset[Key] = frozenset(),
    *,
    empty: bool = False,
) -> dict[str, TopologyAssignment] | str:
    """The pod sets placed on the trees less what admitted workloads hold there (but the
    `excluded`; with `empty`, none: Kueue's simulated empty topology)."""
    tas = {p.flavor: cache.flavors[p.flavor] for p in wanted}
    trees = flavor_trees(tas, cache.topologies, cache.topology_nodes or [])
    for key, entries in () if empty else cache.topology_usage.items():
        if key in excluded:
            continue
        for flavor_name, placed, per_pod in entries:
            if flavor_name in trees:
                charge(trees[flavor_name], placed, per_pod)
    return admit_topology(wanted, cache.flavors, trees)


def _wanted(info: WorkloadInfo, fit: FlavorFit, cache: QuotaCache) -> list[PodSetTopology] | FlavorNoFit:
    """The TAS pod sets of the fit, to place (none: nothing to place)."""
    infos = {ps.name: ps for ps in info.pod_sets}
    wanted: list[PodSetTopology] = []
    for ps in fit.pod_sets:
        names = _tas_flavor(ps.flavors, cache.flavors)
        if not names:
            continue
        if len(names) > 1:
            message = f"couldn't assign flavors to pod set {ps.name}: more than one TAS flavor assigned: "
            return FlavorNoFit(message + ", ".join(names), waiting_for_quota=False)
        one = infos[ps.name]
        flavor = cache.flavors[names[0]]
        placement = PodSetPlacement(
            count=ps.count,
            per_pod=one.per_pod,
            node_selector=dict(one.placement.node_selector),
            affinity=one.placement.affinity,
            tolerations=(*one.placement.tolerations, *flavor.spec.tolerations),
        )
        wanted.append(PodSetTopology(ps.name, names[0], one.topology, placement))
    return wanted


def record_topology(
    cache: QuotaCache,
    info: WorkloadInfo,
    assigned: Iterable[tuple[str, Mapping[str, str], TopologyAssignment | None]],
) -> None:
    """Remember what an admitted workload's topology assignments take (pod set name, its flavors,
    its assignment), so the next placements see it until the workload is released."""
    infos = {ps.name: ps for ps in info.pod_sets}
    entries: list[tuple[str, Placed, Mapping[str, int]]] = []
    for name, flavors, assignment in assigned:
        names = _tas_flavor(flavors, cache.flavors)
        if assignment is None or not names or name not in infos:
            continue
        entries.append((names[0], decode_assignment(assignment), infos[name].per_pod))
    if entries:
        cache.topology_usage[info.key] = entries


def admitted_pod_sets(
    pod_sets: Iterable[PodSetFlavors],
) -> list[tuple[str, Mapping[str, str], TopologyAssignment | None]]:
    return [(ps.name, ps.flavors, ps.topology) for ps in pod_sets]
