"""Beyond Kueue: the free GPUs of each topology domain counted from the ResourceSlices, so a pod set
of one-GPU pods with required: rack lands in a rack with that many free devices, whatever the
nodes' extended resources say (Kueue v0.18.1 counts allocatable only: kubernetes-sigs/kueue#10548)."""

from __future__ import annotations

import msgspec

from reconciler.api.slices import ResourceSlice
from reconciler.core.devices.device_cel import compile_device_class
from reconciler.core.topology.domains import HOSTNAME, TopologyNode, build_tree
from reconciler.core.topology.dra_capacity import free_devices_per_node
from reconciler.core.topology.placement import NotFit, Placed, PodSetPlacement, place
from reconciler.core.topology.requests import TopologyRequest
from tests.support.device_engine import DRIVER, device_class, node_slice

RACK = "cloud.com/topology-rack"
GPUS = "gpus"  # the resource name the DeviceClass is mapped to
CLASSES = {GPUS: compile_device_class(device_class("gpu", f"device.driver == '{DRIVER}'"))}
RACKS = {"n1": "r1", "n2": "r1", "n3": "r2", "n4": "r2"}


def nodes(free_devices: dict[str, dict[str, int]]) -> list[TopologyNode]:
    """Nodes whose allocatable says nothing of GPUs: their devices come from the slices."""
    return [
        TopologyNode(
            name, {RACK: rack, HOSTNAME: name}, {"cpu": 8000, "pods": 110, **free_devices.get(name, {})}
        )
        for name, rack in RACKS.items()
    ]


def test_free_devices_leave_out_allocated_tainted_older_generations_and_shared_slices() -> None:
    tainted = msgspec.to_builtins(node_slice("n2", 2))
    tainted["spec"]["devices"][0]["taints"] = [{"key": "broken", "effect": "NoSchedule"}]
    old = msgspec.to_builtins(node_slice("n3", 4))
    old["metadata"]["name"] = "n3-old"
    newer = msgspec.to_builtins(node_slice("n3", 1))
    newer["spec"]["pool"]["generation"] = 2
    slices = [
        node_slice("n1", 2),
        msgspec.convert(tainted, ResourceSlice),
        msgspec.convert(old, ResourceSlice),
        msgspec.convert(newer, ResourceSlice),
        node_slice("everywhere", 8, allNodes=True),
    ]
    free = free_devices_per_node(slices, CLASSES, allocated={(DRIVER, "n1", "gpu-0")})
    assert free == {"n1": {GPUS: 1}, "n2": {GPUS: 1}, "n3": {GPUS: 1}}


def test_required_rack_counts_the_devices_the_slices_publish() -> None:
    slices = [node_slice(name, 2) for name in RACKS]
    allocated = {(DRIVER, "n1", "gpu-0")}
    tree = build_tree("default", (RACK, HOSTNAME), nodes(free_devices_per_node(slices, CLASSES, allocated)))
    pods = PodSetPlacement(count=4, per_pod={GPUS: 1})
    placed = place(tree, TopologyRequest(required=RACK), pods)
    assert isinstance(placed, Placed)
    assert {d.values[0]: d.count for d in placed.domains} == {"n3": 2, "n4": 2}
    assert place(tree, TopologyRequest(required=RACK), PodSetPlacement(count=5, per_pod={GPUS: 1})) == NotFit(
        'topology "default" allows to fit only 4 out of 5 pod(s)'
    )


def test_without_the_slices_no_node_has_a_gpu_as_in_kueue() -> None:
    tree = build_tree("default", (RACK, HOSTNAME), nodes({}))
    assert place(tree, TopologyRequest(required=RACK), PodSetPlacement(count=1, per_pod={GPUS: 1})) == NotFit(
        'topology "default" doesn\'t allow to fit any of 1 pod(s). '
        'Total nodes: 4; excluded: resource "gpus": 4'
    )
