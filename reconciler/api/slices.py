"""What DRA drivers publish (resource.k8s.io/v1 ResourceSlice) and the Nodes they publish for.

Only the fields the device inventory reads: a slice's driver, pool, the node
(or nodes) it serves, its shared counter sets (partitionable devices), and its
devices with their attributes, capacities, taints and the counters they consume.
Attribute values keep the API's one-of shape (``{"string": "gpu"}``).
"""

from __future__ import annotations

from typing import Any

import msgspec

from .meta import ApiStruct, Condition, ObjectMeta, Taint
from .pods import NodeSelector


class CapacityValue(ApiStruct):
    value: str = "0"
    # DRA consumable capacity (KEP-5075): how a shared device's capacity is consumed; its
    # ``default`` is what a request that names no amount of this capacity consumes.
    request_policy: dict[str, Any] | None = None


class DeviceTaint(ApiStruct):
    """A taint on a device: NoSchedule and NoExecute keep it from requests that do not tolerate
    it; other effects (None) do not."""

    key: str = ""
    value: str = ""
    effect: str = ""


class CounterConsumption(ApiStruct):
    """What a device (a partition) takes from one shared counter set of its pool."""

    counter_set: str = ""
    counters: dict[str, CapacityValue] = {}


class SliceDevice(ApiStruct):
    name: str = ""
    attributes: dict[str, dict[str, Any]] = {}
    capacity: dict[str, CapacityValue] = {}
    taints: list[DeviceTaint] = []
    consumes_counters: list[CounterConsumption] = []


class CounterSet(ApiStruct):
    """A shared counter set (KEP-4815): what the partitions of one device share, e.g. a GPU's memory."""

    name: str = ""
    counters: dict[str, CapacityValue] = {}


class ResourcePool(ApiStruct):
    name: str = ""
    generation: int = 0
    resource_slice_count: int = 1


class ResourceSliceSpec(ApiStruct):
    driver: str = ""
    pool: ResourcePool = msgspec.field(default_factory=ResourcePool)
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    devices: list[SliceDevice] = []
    shared_counters: list[CounterSet] = []


class ResourceSlice(ApiStruct, kw_only=True):
    api_version: str = "resource.k8s.io/v1"
    kind: str = "ResourceSlice"
    metadata: ObjectMeta
    spec: ResourceSliceSpec = msgspec.field(default_factory=ResourceSliceSpec)


class NodeSpec(ApiStruct):
    unschedulable: bool = False
    taints: list[Taint] = []


class NodeStatus(ApiStruct):
    allocatable: dict[str, str | int] = {}
    conditions: list[Condition] = []


class Node(ApiStruct, kw_only=True):
    """A Node's labels (which flavors its devices count for), and what topology-aware scheduling
    reads: whether it is schedulable and ready, its taints and allocatable resources."""

    api_version: str = "v1"
    kind: str = "Node"
    metadata: ObjectMeta
    spec: NodeSpec = msgspec.field(default_factory=NodeSpec)
    status: NodeStatus = msgspec.field(default_factory=NodeStatus)

    @property
    def ready(self) -> bool:
        return any(c.type == "Ready" and c.status == "True" for c in self.status.conditions)
