"""Topology-aware scheduling in an offline run: the Topologies and Nodes of the input give the
core its topology domains, as the controller's watch of them does. A node offers its whole
`status.allocatable` (the input has no pods bound to it), plus, with the device inventory on,
its free DRA devices from the input's ResourceSlices."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from reconciler.feed import inventory_index
from reconciler.feed.topology import NodeUsage, free_devices
from reconciler.integrations import enabled

from .inputs import Collected

__all__ = ["place_nodes"]


def place_nodes(
    collected: Collected, frameworks: Sequence[str], mappings: Mapping[str, str], inventory_on: bool
) -> None:
    """Give the engine the input's nodes when a flavor names a Topology (else nothing: without
    them such a flavor is refused with Kueue's message, as in the controller)."""
    engine = collected.engine
    if not any(f.spec.topology_name for f in engine.flavors.values()):
        return
    placed = [i for i in enabled(frameworks) if i.topology_placement is not None]
    engine.cache.topology_owners = frozenset((i.api_version, i.kind) for i in placed)
    usage = NodeUsage()
    for node in collected.nodes:
        usage.set_node(node.metadata.name, node)
    devices = None
    if inventory_on:
        index = inventory_index(collected.device_classes, collected.slices, collected.nodes)
        devices = free_devices(index, mappings, usage.tas_pods)
    engine.set_topology_nodes(usage.topology_nodes(devices))
