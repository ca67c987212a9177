"""Concern: topology-aware scheduling fed from the cluster (Kueue's TAS caches).

Watch events of Topologies go to the core at once (`Engine.set_topology`); those of Nodes and
of every pod into `feed.topology.NodeUsage` (a node's allocatable less what the bound non-TAS
pods request). After a batch that changed what a node offers (or, with the device inventory on,
the devices counted), the core is given the nodes again (`Engine.set_topology_nodes`), which
tries parked workloads again; an unchanged list is not given twice, and none is given while no
flavor names a Topology.
"""

from __future__ import annotations

from collections.abc import Collection

from reconciler.api import Pod, Topology
from reconciler.api.slices import Node
from reconciler.core.devices.inventory import DeviceInventory, InventoryIndex
from reconciler.core.topology.domains import TopologyNode
from reconciler.feed.topology import NodeUsage, free_devices
from reconciler.runtime.shared.context import Context

__all__ = ["TopologyFeed"]

Key = tuple[str, str]


class TopologyFeed:
    def __init__(self, ctx: Context, index: InventoryIndex, owners: Collection[tuple[str, str]]) -> None:
        """`index`: the device inventory's (its slices, classes and claims), read when it is on;
        `owners`: the (apiVersion, kind) of the jobs whose pods are placed (the others' Workloads
        are refused TAS flavors by name)."""
        self.ctx = ctx
        self.index = index
        ctx.engine.cache.topology_owners = frozenset(owners)
        self.usage = NodeUsage()
        self._changed = True
        self._counted: DeviceInventory | None = None
        self._given: list[TopologyNode] | None = None

    def topology(self, key: Key, topology: Topology | None) -> None:
        engine = self.ctx.engine
        if topology is None:
            engine.delete_topology(key[1])
        elif engine.cache.topologies.get(key[1]) != topology:
            engine.set_topology(topology)
        self.ctx.dirty.queue_status = True

    def node(self, key: Key, node: Node | None) -> None:
        if self.usage.set_node(key[1], node):
            self._changed = True

    def pod(self, key: Key, pod: Pod | None) -> None:
        if self.usage.set_pod(key, pod):
            self._changed = True

    def refresh(self) -> None:
        """After a batch (the inventory refreshed first): the nodes to the core, if they moved."""
        ctx = self.ctx
        if not any(f.spec.topology_name for f in ctx.engine.flavors.values()):
            return  # no TAS flavor: the nodes are not needed (nor are parked workloads retried)
        counted = ctx.device_inventory if ctx.config.device_inventory.enabled else None
        if not self._changed and counted is self._counted and self._given is not None:
            return
        self._changed, self._counted = False, counted
        devices = None
        if counted is not None:
            devices = free_devices(self.index, ctx.config.class_to_resource, self.usage.tas_pods)
        nodes = self.usage.topology_nodes(devices)
        if nodes != self._given:
            self._given = nodes
            ctx.engine.set_topology_nodes(nodes)
