"""The topology step of an admission, after the flavors are chosen (Kueue's TAS flavor assigner).

Per TAS flavor, its tree: the Topology it names, over the nodes carrying its node labels, each
node's free capacity as the caller counts it. Then each pod set of the Workload in turn: its
flavor must name a Topology (``Flavor "F" does not support TopologyAwareScheduling``), that
Topology must be known (``Flavor "F" information missing in TAS cache``) and have the requested
level (``Flavor "F" does not contain the requested level``); it is placed, and what it takes is
charged before the next pod set is placed. A pod set without a request on a TAS flavor is placed
unconstrained (Kueue's implied TAS). The result is the ``topologyAssignment`` of each pod set, or
Kueue's message for the first that does not fit: ``couldn't assign flavors to pod set NAME: ...``.
Pure; not yet called by the scheduler (TAS flavors are refused until the runtime places pods).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from reconciler.api import ResourceFlavor, Topology, TopologyAssignment

from .assignment import charge, encode_assignment
from .domains import TopologyNode, TopologyTree, build_tree
from .placement import NotFit, PodSetPlacement, place
from .requests import TopologyRequest

__all__ = ["PodSetTopology", "admit_topology", "flavor_trees"]


@dataclass(frozen=True, slots=True)
class PodSetTopology:
    """A pod set whose resources were assigned `flavor`, with its topology request (if any)."""

    name: str
    flavor: str
    request: TopologyRequest | None
    placement: PodSetPlacement


def flavor_trees(
    flavors: Mapping[str, ResourceFlavor], topologies: Mapping[str, Topology], nodes: Sequence[TopologyNode]
) -> dict[str, TopologyTree]:
    """The tree of each flavor naming a known Topology with levels."""
    trees: dict[str, TopologyTree] = {}
    for name, flavor in flavors.items():
        topology = topologies.get(flavor.spec.topology_name or "")
        if topology is None or not topology.spec.levels:
            continue
        levels = [level.node_label for level in topology.spec.levels]
        trees[name] = build_tree(topology.metadata.name, levels, nodes, flavor.spec.node_labels)
    return trees


def admit_topology(
    pod_sets: Sequence[PodSetTopology],
    flavors: Mapping[str, ResourceFlavor],
    trees: Mapping[str, TopologyTree],
) -> dict[str, TopologyAssignment] | str:
    """Each pod set's assignment, placed in turn (the trees are charged as it goes), or why not."""
    assignments: dict[str, TopologyAssignment] = {}
    for pod_set in pod_sets:
        problem = _mismatch(pod_set, flavors.get(pod_set.flavor), trees)
        if problem is not None:
            return f"couldn't assign flavors to pod set {pod_set.name}: {problem}"
        tree = trees[pod_set.flavor]
        request = pod_set.request or TopologyRequest(unconstrained=True)
        placed = place(tree, request, pod_set.placement)
        if isinstance(placed, NotFit):
            return f"couldn't assign flavors to pod set {pod_set.name}: {placed.message}"
        charge(tree, placed, pod_set.placement.per_pod)
        assignments[pod_set.name] = encode_assignment(placed)
    return assignments


def _mismatch(
    pod_set: PodSetTopology, flavor: ResourceFlavor | None, trees: Mapping[str, TopologyTree]
) -> str | None:
    name = pod_set.flavor
    if flavor is None:
        return f"flavor {name} not found"
    if flavor.spec.topology_name is None:
        return f'Flavor "{name}" does not support TopologyAwareScheduling'
    tree = trees.get(name)
    if tree is None:
        return f'Flavor "{name}" information missing in TAS cache'
    level = pod_set.request.level if pod_set.request is not None else None
    if level is not None and tree.level_index(level) is None:
        return f'Flavor "{name}" does not contain the requested level'
    return None
