"""What the free devices can still serve (deviceInventory Enforce): adminAccess, device taints and
tolerations, complete pool generations (Kueue issue 14573), matchAttribute constraints and
partitionable devices (shared counters)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import pytest

from reconciler.api import DeviceClass, ResourceClaim, ResourceClaimTemplate
from reconciler.api.slices import ResourceSlice, SliceDevice
from reconciler.core.devices.device_pools import untolerated_taint
from reconciler.core.devices.inventory import DeviceInventory, InventoryIndex
from reconciler.core.engine import Engine
from reconciler.core.model.workloads import WorkloadInfo, compile_workload
from reconciler.core.quota.inventory_admission import InventoryGate
from reconciler.core.scheduling.scheduler import Admit, Pending
from reconciler.integrations.batchjob import workload_for_job
from tests.support.builders import cluster_queue, decode, flavor, job

DRIVER = "gpu.example.com"
GPU, MIG, NIC = "example.com/gpu", "example.com/mig", "example.com/nic"
CLASSES = {
    "gpu.example.com": f'device.attributes["{DRIVER}"].type == "gpu"',
    "mig.example.com": f'device.attributes["{DRIVER}"].type == "mig"',
    "nic.example.com": f'device.attributes["{DRIVER}"].type == "nic"',
}
MAPPINGS = {"gpu.example.com": GPU, "mig.example.com": MIG, "nic.example.com": NIC}
FLAVORS = {"t4": flavor("t4", {"pool": "t4"})}
TAINT = {"key": "example.com/unhealthy", "value": "true", "effect": "NoSchedule"}
PCIE = "resource.kubernetes.io/pcieRoot"


def device(name: str, kind: str = "gpu", **extra: Any) -> dict[str, Any]:
    return {"name": name, "attributes": {"type": {"string": kind}}, **extra}


def slice_(
    node: str,
    devices: Sequence[Mapping[str, Any]],
    generation: int = 1,
    count: int = 1,
    part: int = 0,
    **spec: Any,
) -> ResourceSlice:
    body = {
        "metadata": {"name": f"{node}-g{generation}-{part}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": count},
            "devices": [dict(d) for d in devices],
            **spec,
        },
    }
    return msgspec.convert(body, ResourceSlice)


def index_of(*slices: ResourceSlice) -> InventoryIndex:
    index = InventoryIndex()
    for name, expression in CLASSES.items():
        index.set_class(
            name,
            decode(
                {"metadata": {"name": name}, "spec": {"selectors": [{"cel": {"expression": expression}}]}},
                DeviceClass,
            ),
        )
    index.set_node("node-a", {"pool": "t4"})
    index.set_node("node-b", {"pool": "t4"})
    for s in slices:
        index.set_slice(s.metadata.name, s)
    return index


def compute(index: InventoryIndex) -> DeviceInventory:
    return index.compute(FLAVORS, MAPPINGS, lambda pod: False)


def allocated(name: str, devices: Sequence[str], pool: str = "node-a", admin: bool = False) -> ResourceClaim:
    results = [
        {
            "request": "r",
            "driver": DRIVER,
            "pool": pool,
            "device": d,
            **({"adminAccess": True} if admin else {}),
        }
        for d in devices
    ]
    body = {
        "metadata": {"name": name, "namespace": "ns"},
        "status": {"allocation": {"devices": {"results": results}}},
    }
    return msgspec.convert(body, ResourceClaim)


def workload(
    name: str,
    requests: Sequence[Mapping[str, Any]],
    constraints: Sequence[Mapping[str, Any]] = (),
    sized: bool = True,
) -> WorkloadInfo:
    template = decode(
        {
            "metadata": {"name": f"{name}-t", "namespace": "ns"},
            "spec": {
                "spec": {
                    "devices": {"requests": [dict(r) for r in requests], "constraints": list(constraints)}
                }
            },
        },
        ResourceClaimTemplate,
    )
    claims = [{"name": "dev", "resourceClaimTemplateName": f"{name}-t"}]
    wl = workload_for_job(job(name, uid=f"uid-{name}", claims=claims))
    info = compile_workload(
        wl,
        lookup_template=lambda ns, n: template if n == f"{name}-t" else None,
        mappings=MAPPINGS,
        sized=sized,
    )
    info.name, info.created = name, f"2026-01-01T00:00:{len(name):02d}Z"
    return info


def exactly(
    device_class: str = "gpu.example.com", name: str = "gpu", count: int | None = 1, **extra: Any
) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": device_class, "count": count, **extra}}


def decide(inventory: DeviceInventory, *workloads: WorkloadInfo, quota: int = 8) -> dict[str, Any]:
    state = Engine()
    state.set_flavor(FLAVORS["t4"])
    state.set_cluster_queue(cluster_queue("cq", [("t4", {GPU: quota, MIG: quota, NIC: quota})]))
    state.set_local_queue("ns", "lq", "cq")
    state.set_namespace("ns", {"kubernetes.io/metadata.name": "ns"})
    state.scheduler.gate = InventoryGate(inventory)
    state.scheduler.sizes = inventory
    for w in workloads:
        state.add_workload(w)
    return {d.key[1]: d for d in state.schedule()}


# --- 1. adminAccess charges nothing and holds nothing ------------------------------------------


def test_admin_access_charges_nothing_in_exact_all_and_shared_paths() -> None:
    # allocationMode All with adminAccess is not refused even without the inventory: nothing to size.
    admin_all = workload("a", [exactly(allocationMode="All", count=None, adminAccess=True)], sized=False)
    assert admin_all.problem is None
    assert (admin_all.pod_sets[0].total(), admin_all.pod_sets[0].demands) == ({}, ())
    mixed = workload("b", [exactly(count=2), exactly(name="watch", count=5, adminAccess=True)])
    assert mixed.pod_sets[0].total() == {GPU: 2}
    assert [a.request for a in mixed.pod_sets[0].asks] == ["gpu"]  # no device check for the admin one


def test_a_first_available_subrequest_has_no_admin_access_field_and_is_charged() -> None:
    # resource.k8s.io/v1 DeviceSubRequest has no adminAccess: the allocator treats it as false.
    sub = {
        "name": "g",
        "firstAvailable": [{"name": "one", "deviceClassName": "gpu.example.com", "adminAccess": True}],
    }
    info = workload("a", [sub])
    assert info.pod_sets[0].total() == {GPU: 1}


def test_devices_allocated_with_admin_access_stay_free() -> None:
    index = index_of(slice_("node-a", [device("gpu-0"), device("gpu-1")]))
    index.set_claim(("ns", "monitor"), allocated("monitor", ["gpu-0", "gpu-1"], admin=True))
    index.set_claim(("ns", "job"), allocated("job", ["gpu-1"]))
    devices = compute(index).by_resource[("t4", GPU)]
    assert (devices.published, devices.allocated, devices.available) == (2, 1, 1)


# --- 2. device taints and request tolerations ----------------------------------------------------


def _tainted(effect: str = "NoSchedule") -> DeviceInventory:
    return compute(
        index_of(slice_("node-a", [device("gpu-0", taints=[{**TAINT, "effect": effect}]), device("gpu-1")]))
    )


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        ({"key": "example.com/unhealthy", "operator": "Exists"}, True),
        ({"key": "example.com/unhealthy", "operator": "Equal", "value": "true"}, True),
        (
            {"key": "example.com/unhealthy", "value": "true", "effect": "NoSchedule"},
            True,
        ),  # operator defaults to Equal
        ({"operator": "Exists"}, True),  # empty key with Exists: every taint
        ({"key": "example.com/unhealthy", "operator": "Equal", "value": "false"}, False),
        ({"key": "example.com/unhealthy", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "example.com/other", "operator": "Exists"}, False),
    ],
)
def test_tolerations_match_device_taints_as_the_allocator(
    toleration: dict[str, str], tolerated: bool
) -> None:
    d = msgspec.convert(device("gpu-0", taints=[TAINT]), SliceDevice)
    key, operator, value, effect = (toleration.get(k, "") for k in ("key", "operator", "value", "effect"))
    assert (untolerated_taint(d, ((key, operator, value, effect),)) is None) is tolerated


def test_a_taint_of_effect_none_does_not_keep_the_device() -> None:
    assert _tainted("None").by_resource[("t4", GPU)].available == 2
    assert _tainted("NoExecute").by_resource[("t4", GPU)].available == 1


def test_an_untolerated_taint_keeps_the_device_and_the_reason_names_class_node_and_shortfall() -> None:
    got = decide(_tainted(), workload("a", [exactly(count=2)]))
    assert isinstance(got["a"], Pending)
    assert got["a"].message == (
        "couldn't assign flavors to pod set main: insufficient devices for example.com/gpu in flavor t4: "
        "DeviceClass gpu.example.com needs 2, 1 available (2 published on the flavor's nodes; on node node-a "
        "1 carry a taint the request does not tolerate (example.com/unhealthy=true:NoSchedule))"
    )


def test_a_request_that_tolerates_the_taint_gets_the_device() -> None:
    tolerates = [{"key": "example.com/unhealthy", "operator": "Exists", "effect": "NoSchedule"}]
    got = decide(_tainted(), workload("a", [exactly(count=2, tolerations=tolerates)]))
    assert isinstance(got["a"], Admit)


def test_a_first_available_subrequest_s_tolerations_count() -> None:
    sub = {
        "name": "g",
        "firstAvailable": [
            {
                "name": "two",
                "deviceClassName": "gpu.example.com",
                "count": 2,
                "tolerations": [{"operator": "Exists"}],
            }
        ],
    }
    assert isinstance(decide(_tainted(), workload("a", [sub]))["a"], Admit)
    plain = {
        "name": "g",
        "firstAvailable": [{"name": "two", "deviceClassName": "gpu.example.com", "count": 2}],
    }
    assert isinstance(decide(_tainted(), workload("b", [plain]))["b"], Pending)


# --- 3. only the newest complete pool generation counts (Kueue issue 14573) ----------------------


def test_a_pool_whose_newest_generation_is_incomplete_counts_nothing_until_complete() -> None:
    old = slice_("node-a", [device("gpu-0")], generation=1)
    new_first = slice_("node-a", [device("gpu-0")], generation=2, count=2, part=0)
    index = index_of(old, new_first)
    # Generation 1 is outdated, generation 2 has 1 of its 2 slices: the allocator skips the pool.
    assert compute(index).by_resource[("t4", GPU)].published == 0
    got = decide(compute(index), workload("a", [exactly()]))
    assert isinstance(got["a"], Pending)
    assert "needs 1, 0 available (0 published" in got["a"].message
    index.set_slice("node-a-g2-1", slice_("node-a", [device("gpu-1")], generation=2, count=2, part=1))
    assert compute(index).by_resource[("t4", GPU)].published == 2


def test_a_pool_with_a_device_name_twice_counts_nothing() -> None:
    index = index_of(
        slice_("node-a", [device("gpu-0")], count=2, part=0),
        slice_("node-a", [device("gpu-0")], count=2, part=1),
    )
    assert compute(index).by_resource[("t4", GPU)].published == 0


def test_allocation_mode_all_is_not_sized_on_a_node_whose_pool_is_being_updated() -> None:
    index = index_of(
        slice_("node-a", [device(f"gpu-{i}") for i in range(4)]),
        slice_(
            "node-a",
            [device("nic-0", "nic")],
            part=9,
            pool={"name": "nics", "generation": 1, "resourceSliceCount": 2},
        ),
        slice_("node-b", [device("gpu-0")]),
    )
    # node-a has 4 GPUs, but its NIC pool is incomplete: a request for all devices cannot go there.
    assert compute(index).by_resource[("t4", GPU)].published == 5
    assert compute(index).most_on_node[("t4", "gpu.example.com")] == 1


# --- 4. matchAttribute constraints -----------------------------------------------------------------


def _on(name: str, kind: str, root: str) -> dict[str, Any]:
    return device(name, kind, attributes={"type": {"string": kind}, PCIE: {"string": root}})


GPU_AND_NIC = [exactly(), exactly("nic.example.com", name="nic")]
SAME_ROOT = [{"requests": ["gpu", "nic"], "matchAttribute": PCIE}]


def test_a_constrained_claim_needs_one_node_with_both_devices_on_one_pcie_root() -> None:
    split = index_of(slice_("node-a", [_on("gpu-0", "gpu", "pci-0"), _on("nic-0", "nic", "pci-1")]))
    got = decide(compute(split), workload("a", GPU_AND_NIC, SAME_ROOT), workload("b", GPU_AND_NIC))
    assert isinstance(got["b"], Admit)  # without the constraint, any GPU and NIC do
    assert isinstance(got["a"], Pending)
    assert got["a"].message == (
        "couldn't assign flavors to pod set main: insufficient devices for example.com/gpu in flavor t4: "
        "podset main, claim dev: requests gpu, nic need free devices with one value of "
        "resource.kubernetes.io/pcieRoot on one node, and none of the flavor's 1 node(s) has them"
    )
    # Another node with both on one root: that node serves the claim.
    paired = slice_("node-b", [_on("gpu-0", "gpu", "pci-7"), _on("nic-0", "nic", "pci-7")])
    split.set_slice(paired.metadata.name, paired)
    assert isinstance(decide(compute(split), workload("a", GPU_AND_NIC, SAME_ROOT))["a"], Admit)


def test_an_allocated_device_does_not_serve_the_constraint() -> None:
    index = index_of(
        slice_(
            "node-a",
            [_on("gpu-0", "gpu", "pci-0"), _on("gpu-1", "gpu", "pci-1"), _on("nic-0", "nic", "pci-1")],
        )
    )
    assert isinstance(decide(compute(index), workload("a", GPU_AND_NIC, SAME_ROOT))["a"], Admit)
    index.set_claim(("ns", "other"), allocated("other", ["gpu-1"]))
    assert isinstance(decide(compute(index), workload("a", GPU_AND_NIC, SAME_ROOT))["a"], Pending)


def test_a_constraint_without_requests_covers_all_and_a_count_of_two_needs_two_equal_values() -> None:
    index = index_of(slice_("node-a", [_on("gpu-0", "gpu", "pci-0"), _on("gpu-1", "gpu", "pci-1")]))
    every = [{"matchAttribute": PCIE}]
    assert isinstance(decide(compute(index), workload("a", [exactly(count=2)], every))["a"], Pending)
    assert isinstance(decide(compute(index), workload("b", [exactly(count=2)]))["b"], Admit)


# --- 5. partitionable devices: shared counters ---------------------------------------------------


def _partitioned(*allocated_devices: str) -> DeviceInventory:
    """One GPU of 8 memory slices: the whole GPU (all 8) and three 4-slice partitions."""

    def uses(n: int) -> list[dict[str, Any]]:
        return [{"counterSet": "gpu-0-counters", "counters": {"memory": {"value": str(n)}}}]

    devices = [device("gpu-0", consumesCounters=uses(8))] + [
        device(f"mig-{i}", "mig", consumesCounters=uses(4)) for i in range(3)
    ]
    counters = [{"name": "gpu-0-counters", "counters": {"memory": {"value": "8"}}}]
    index = index_of(slice_("node-a", devices, sharedCounters=counters))
    if allocated_devices:
        index.set_claim(("ns", "held"), allocated("held", list(allocated_devices)))
    return compute(index)


def test_partitions_of_one_gpu_compete_for_its_counters() -> None:
    free = _partitioned()
    assert free.by_resource[("t4", MIG)].published == 3
    assert free.by_resource[("t4", MIG)].available == 2  # 3 x 4 slices do not fit in 8
    assert _partitioned("mig-0").by_resource[("t4", MIG)].available == 1
    # The whole GPU allocated: no partition is left, nor is a second whole GPU.
    whole_taken = _partitioned("gpu-0")
    assert (
        whole_taken.by_resource[("t4", MIG)].available,
        whole_taken.by_resource[("t4", GPU)].available,
    ) == (0, 0)
    # A partition allocated: the whole GPU no longer fits.
    assert _partitioned("mig-1").by_resource[("t4", GPU)].available == 0


def test_the_third_partition_waits_and_the_reason_names_the_counters() -> None:
    got = decide(
        _partitioned(), *(workload(n, [exactly("mig.example.com", name="mig")]) for n in ("a", "bb", "ccc"))
    )
    assert [isinstance(got[n], Admit) for n in ("a", "bb")] == [True, True]
    assert isinstance(got["ccc"], Pending)
    assert got["ccc"].message.endswith(
        "DeviceClass mig.example.com needs 1, 0 available (3 published on the flavor's nodes; "
        "1 do not fit the shared counters left beside the others)"
    )
