"""Nodes and the pods bound to them, as topology-aware scheduling sees them (Kueue v0.18.1's TAS
cache: its node cache and its non-TAS usage cache).

A node's free capacity is its ``status.allocatable`` less the requests of the pods bound to it
that are neither terminated (``Succeeded``, ``Failed``) nor TAS pods, and one ``pods`` each. A TAS
pod (one carrying a pod-set topology annotation, as Kueue's start puts on them) is left out: what
its Workload's topology assignment takes is charged by the core from the admission instead. With
the device inventory on, each node's free DRA devices from the ResourceSlices are added under
their mapped resource names (beyond Kueue: `core.topology.dra_capacity`). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from reconciler.api import Pod, PodSpecView
from reconciler.api.slices import Node, ResourceSlice
from reconciler.core.devices.device_cel import CompiledDeviceClass
from reconciler.core.devices.inventory import InventoryIndex
from reconciler.core.devices.inventory_reading import DeviceId
from reconciler.core.model.jobs import TERMINATED_PHASES
from reconciler.core.primitives.podrequests import Amounts, add_amounts, pod_requests
from reconciler.core.primitives.quantity import parse_quantity, to_amount
from reconciler.core.topology.domains import TopologyNode
from reconciler.core.topology.dra_capacity import free_devices_per_node
from reconciler.core.topology.requests import PREFERRED, REQUIRED, SLICE_REQUIRED, UNCONSTRAINED

__all__ = ["NodeUsage", "free_devices", "is_tas_pod"]

Key = tuple[str, str]
_TAS_ANNOTATIONS = (REQUIRED, PREFERRED, SLICE_REQUIRED, UNCONSTRAINED)


def is_tas_pod(pod: Pod) -> bool:
    """Kueue's IsTAS: the pod carries a pod-set topology annotation."""
    return any(key in pod.metadata.annotations for key in _TAS_ANNOTATIONS)


class NodeUsage:
    """The nodes and what the non-TAS pods bound to them use, kept incrementally."""

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self._pods: dict[Key, tuple[str, Amounts]] = {}
        self._usage: dict[str, Amounts] = {}
        # The bound, live TAS pods (the devices their claims hold are charged by their assignment).
        self.tas_pods: set[Key] = set()

    def set_node(self, name: str, node: Node | None) -> bool:
        """Record a node (None: deleted); True when what TAS reads of it changed."""
        previous = self.nodes.get(name)
        if node is None:
            return self.nodes.pop(name, None) is not None
        self.nodes[name] = node
        return previous is None or _seen(previous) != _seen(node)

    def set_pod(self, key: Key, pod: Pod | None) -> bool:
        """Record a pod (None: deleted); True when a node's usage (or the TAS pods) changed."""
        live = pod is not None and bool(pod.spec.node_name) and pod.status.phase not in TERMINATED_PHASES
        tas = live and pod is not None and is_tas_pod(pod)
        changed = False
        if tas != (key in self.tas_pods):
            changed = True
            (self.tas_pods.add if tas else self.tas_pods.discard)(key)
        entry = None
        if live and not tas and pod is not None:
            entry = (pod.spec.node_name, _requests(pod))
        previous = self._pods.get(key)
        if previous == entry:
            return changed
        if previous is not None:
            del self._pods[key]
            self._add(previous[0], previous[1], -1)
        if entry is not None:
            self._pods[key] = entry
            self._add(entry[0], entry[1], 1)
        return True

    def usage(self, node: str) -> Mapping[str, int]:
        return self._usage.get(node, {})

    def topology_nodes(self, devices: Mapping[str, Amounts] | None = None) -> list[TopologyNode]:
        """Every node with its free capacity (and its free devices, `devices` per node name)."""
        out: list[TopologyNode] = []
        for name, node in sorted(self.nodes.items()):
            free: Amounts = {k: to_amount(k, parse_quantity(v)) for k, v in node.status.allocatable.items()}
            for resource, used in self._usage.get(name, {}).items():
                free[resource] = free.get(resource, 0) - used
            if devices is not None:
                add_amounts(free, devices.get(name, {}))
            out.append(
                TopologyNode(
                    name,
                    dict(node.metadata.labels),
                    free,
                    tuple(node.spec.taints),
                    ready=node.ready,
                    unschedulable=node.spec.unschedulable,
                )
            )
        return out

    def _add(self, node: str, amounts: Mapping[str, int], sign: int) -> None:
        usage = self._usage.setdefault(node, {})
        for resource, amount in {**amounts, "pods": 1}.items():
            usage[resource] = usage.get(resource, 0) + sign * amount
        if usage.get("pods", 0) <= 0:
            del self._usage[node]


def free_devices(
    index: InventoryIndex, class_to_resource: Mapping[str, str], tas_pods: Collection[Key]
) -> dict[str, Amounts]:
    """Per node: the free devices of each mapped DeviceClass, the devices held by claims of TAS
    pods counted free (their Workloads' assignments charge them)."""
    classes: dict[str, CompiledDeviceClass] = {}
    for class_name, resource in sorted(class_to_resource.items()):
        compiled = index.classes.get(class_name)
        if compiled is not None:
            classes.setdefault(resource, compiled)
    allocated: set[DeviceId] = set()
    for owner, devices in index.claims.values():
        if owner is None or owner not in tas_pods:
            allocated.update(devices)
    slices: Iterable[ResourceSlice] = index.slices.values()
    return free_devices_per_node(slices, classes, allocated)


def _requests(pod: Pod) -> Amounts:
    spec = pod.spec
    view = PodSpecView(
        containers=spec.containers,
        init_containers=spec.init_containers,
        overhead=spec.overhead,
        resources=spec.resources,
    )
    return pod_requests(view)


def _seen(node: Node) -> tuple[object, ...]:
    return (node.metadata.labels, node.spec, node.status.allocatable, node.ready)
