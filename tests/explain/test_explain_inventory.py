"""`reconciler explain` for a Workload that fits quota but waits for devices (deviceInventory Enforce)."""

from __future__ import annotations

from reconciler.api import Condition
from reconciler.api.slices import Node, ResourceSlice
from reconciler.explain.analyze import explain
from reconciler.explain.state import ClusterState
from tests.support.explain_state import decode, walkthrough_state, workload_of

A = "kueue-dra-running-a"
B = "kueue-dra-pending-b"
WAITING = (
    "couldn't assign flavors to pod set main: insufficient devices for nvidia.com/gpu in flavor p3-t4: "
    "DeviceClass gpu.nvidia.com needs 1, 0 available (1 published on the flavor's nodes)"
)


def test_a_workload_waiting_for_devices_is_not_blamed_on_the_controller() -> None:
    state = walkthrough_state("job", B)
    state.workloads = [w for w in state.workloads if not w.metadata.name.startswith(f"job-{A}-")]
    workload = workload_of(state, B)
    workload.status.conditions = [c for c in workload.status.conditions if c.type != "QuotaReserved"] + [
        Condition("QuotaReserved", "False", "Pending", WAITING)
    ]
    ex = explain(state)
    assert ex.summary == (
        "it fits the quota of ClusterQueue p3-dra-cq but waits for free devices (deviceInventory mode "
        f"Enforce): {WAITING}"
    )


def _all_devices(state: ClusterState) -> None:
    """Job B's template asks for every GPU of its node (allocationMode All)."""
    (template,) = state.templates
    request = template.spec.spec.devices.requests[0]
    assert request.exactly is not None
    request.exactly.allocation_mode, request.exactly.count = "All", None


def _node_with_gpus(state: ClusterState, gpus: int) -> None:
    (flavor,) = state.flavors
    labels = dict(flavor.spec.node_labels)
    state.nodes = [decode({"metadata": {"name": "gpu-node-1", "labels": labels}}, Node)]
    state.resource_slices = [
        decode(
            {
                "metadata": {"name": "gpu-node-1-slice"},
                "spec": {
                    "driver": "gpu.nvidia.com",
                    "nodeName": "gpu-node-1",
                    "pool": {"name": "gpu-node-1", "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": f"gpu-{i}"} for i in range(gpus)],
                },
            },
            ResourceSlice,
        )
    ]


def test_an_all_devices_request_is_sized_from_the_published_devices() -> None:
    state = walkthrough_state("job", B)
    state.workloads = [w for w in state.workloads if not w.metadata.name.startswith(f"job-{A}-")]
    _all_devices(state)
    ex = explain(state)
    assert ex.summary.endswith(
        "couldn't assign flavors to pod set main: no device of DeviceClass gpu.nvidia.com is published on "
        "the nodes of flavor p3-t4 (allocationMode All needs at least one)"
    )
    _node_with_gpus(state, 2)
    ex = explain(state)
    assert "insufficient quota for nvidia.com/gpu in flavor p3-t4" in ex.summary
    assert "current podset request (2) > maximum capacity (1)" in ex.summary


def test_an_all_devices_request_with_the_inventory_off_names_the_fix() -> None:
    state = walkthrough_state("job", B)
    _all_devices(state)
    state.inventory_on = False
    ex = explain(state)
    text = " ".join([ex.summary, *ex.findings])
    assert "set deviceInventory.mode to Report or Enforce in the Configuration" in text


def test_unreadable_slices_and_nodes_are_noted_only_when_they_size_the_charge() -> None:
    state = walkthrough_state("job", B)
    state.unreadable = ["ResourceSlices (forbidden)", "Nodes (forbidden)"]
    assert [n for n in explain(state).notes if n.startswith("could not read")] == []
    _all_devices(state)
    assert [n for n in explain(state).notes if n.startswith("could not read")] == [
        "could not read ResourceSlices (forbidden); the answer may be incomplete",
        "could not read Nodes (forbidden); the answer may be incomplete",
    ]
