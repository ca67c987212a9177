"""`reconciler explain` for a Workload that fits quota but waits for devices (deviceInventory Enforce)."""

from __future__ import annotations

from reconciler.api import Condition
from reconciler.explain.analyze import explain
from tests.support.explain_state import walkthrough_state, workload_of

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
