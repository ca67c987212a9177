"""The device inventory: counts per flavor, the Enforce gate in the scheduler, the queue condition."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from reconciler.api import DeviceClass, ResourceClaim
from reconciler.api.slices import ResourceSlice
from reconciler.config import ConfigError, parse_config
from reconciler.core.devices.inventory import InventoryIndex, claim_devices
from reconciler.core.engine import Engine
from reconciler.core.model.workloads import WorkloadInfo, compile_workload
from reconciler.core.quota.inventory_admission import InventoryGate
from reconciler.core.quota.inventory_report import devices_cover_quota, quota_gaps
from reconciler.core.scheduling.scheduler import Admit, Decision, Pending
from reconciler.integrations.batchjob import workload_for_job
from tests.support.builders import cluster_queue, flavor, job

GPU = "nvidia.com/gpu"
DRIVER = "gpu.nvidia.com"
WHOLE = f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].type == "gpu"'
MIG = f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].type == "mig"'
MAPPING = {"gpu.nvidia.com": GPU}


def info(name: str, **job_kwargs: Any) -> WorkloadInfo:
    wl = workload_for_job(job(name, namespace="ns", queue="lq", uid=f"uid-{name}", **job_kwargs))
    result = compile_workload(wl, lookup_template=lambda ns, n: None, mappings={})
    result.name = name
    result.created = f"2026-01-01T00:00:{len(name):02d}Z"
    return result


def decisions_by_name(decisions: list[Decision]) -> dict[str, Decision]:
    return {d.key[1]: d for d in decisions}


def device_class(name: str, *expressions: str) -> DeviceClass:
    body = {
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": e}} for e in expressions]},
    }
    return msgspec.convert(body, DeviceClass)


def node_slice(node: str, gpus: int, migs: int = 0, generation: int = 1, **spec: Any) -> ResourceSlice:
    devices = [{"name": f"gpu-{i}", "attributes": {"type": {"string": "gpu"}}} for i in range(gpus)]
    devices += [{"name": f"mig-{i}", "attributes": {"type": {"string": "mig"}}} for i in range(migs)]
    body = {
        "metadata": {"name": f"{node}-{DRIVER}-{generation}"},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
            "devices": devices,
            **(spec or {"nodeName": node}),
        },
    }
    return msgspec.convert(body, ResourceSlice)


def claim(name: str, devices: list[str], pod: str | None = None, pool: str = "node-a") -> ResourceClaim:
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "ns"},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": DRIVER, "pool": pool, "device": d} for d in devices
                    ]
                }
            }
        },
    }
    if pod is not None:
        body["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": "u"}]
    return msgspec.convert(body, ResourceClaim)


def index_with(*slices: ResourceSlice) -> InventoryIndex:
    index = InventoryIndex()
    index.set_class("gpu.nvidia.com", device_class("gpu.nvidia.com", WHOLE))
    index.set_node("node-a", {"pool": "t4"})
    index.set_node("node-b", {"pool": "t4"})
    index.set_node("node-c", {"pool": "a100"})
    for s in slices:
        index.set_slice(s.metadata.name, s)
    return index


FLAVORS = {"t4": flavor("t4", {"pool": "t4"}), "a100": flavor("a100", {"pool": "a100"})}


def test_devices_are_counted_on_the_nodes_of_each_flavor_and_by_class() -> None:
    index = index_with(node_slice("node-a", 2, migs=3), node_slice("node-b", 1), node_slice("node-c", 4))
    inventory = index.compute(FLAVORS, MAPPING, lambda pod: False)
    assert inventory.devices("t4", GPU) is not None
    assert inventory.by_resource[("t4", GPU)].published == 3  # MIG partitions are not whole GPUs
    assert inventory.by_resource[("a100", GPU)].published == 4
    assert inventory.by_class[("t4", "gpu.nvidia.com")].published == 3
    assert inventory.devices("t4", "cpu") is None  # not DRA-mapped


def test_a_second_class_mapped_to_another_resource_counts_its_own_devices() -> None:
    index = index_with(node_slice("node-a", 2, migs=3))
    index.set_class("mig.nvidia.com", device_class("mig.nvidia.com", MIG))
    inventory = index.compute(FLAVORS, {**MAPPING, "mig.nvidia.com": "nvidia.com/mig"}, lambda pod: False)
    assert inventory.by_resource[("t4", "nvidia.com/mig")].published == 3
    assert inventory.by_resource[("t4", GPU)].published == 2


def test_allocations_count_and_managed_pods_are_told_apart() -> None:
    index = index_with(node_slice("node-a", 2), node_slice("node-b", 1))
    assert index.set_claim(("ns", "c1"), claim("c1", ["gpu-0"], pod="ours"))
    assert index.set_claim(("ns", "c2"), claim("c2", ["gpu-1"], pod="theirs"))
    assert not index.set_claim(("ns", "c2"), claim("c2", ["gpu-1"], pod="theirs"))  # unchanged
    devices = index.compute(FLAVORS, MAPPING, lambda pod: pod == ("ns", "ours")).by_resource[("t4", GPU)]
    assert (devices.published, devices.allocated, devices.allocated_managed) == (3, 2, 1)
    assert index.set_claim(("ns", "c1"), None)
    assert index.compute(FLAVORS, MAPPING, lambda pod: True).by_resource[("t4", GPU)].allocated == 1


def test_only_the_newest_pool_generation_counts() -> None:
    index = index_with(node_slice("node-a", 4, generation=1), node_slice("node-a", 1, generation=2))
    assert index.compute(FLAVORS, MAPPING, lambda pod: False).by_resource[("t4", GPU)].published == 1


def test_slices_for_all_nodes_or_a_node_selector_reach_the_flavors_of_those_nodes() -> None:
    everywhere = node_slice("net", 2, allNodes=True)
    selected = node_slice(
        "rack",
        3,
        nodeSelector={
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a100"]}]}
            ]
        },
    )
    inventory = index_with(everywhere, selected).compute(FLAVORS, MAPPING, lambda pod: False)
    assert inventory.by_resource[("t4", GPU)].published == 2
    assert inventory.by_resource[("a100", GPU)].published == 5


def test_a_slice_changes_and_class_changes_are_seen() -> None:
    index = index_with(node_slice("node-a", 2))
    index.compute(FLAVORS, MAPPING, lambda pod: False)
    index.set_slice(f"node-a-{DRIVER}-1", node_slice("node-a", 5))
    assert index.compute(FLAVORS, MAPPING, lambda pod: False).by_resource[("t4", GPU)].published == 5
    index.set_class("gpu.nvidia.com", device_class("gpu.nvidia.com", MIG))
    assert index.compute(FLAVORS, MAPPING, lambda pod: False).by_resource[("t4", GPU)].published == 0


def test_missing_and_invalid_classes_are_reported() -> None:
    index = index_with(node_slice("node-a", 2))
    index.set_class("bad", device_class("bad", "device.driver =="))
    inventory = index.compute(FLAVORS, {**MAPPING, "bad": GPU, "nowhere": "example.com/x"}, lambda pod: False)
    assert inventory.missing_classes == ("nowhere",)
    assert len(inventory.class_errors) == 1
    assert inventory.class_errors[0].startswith("DeviceClass bad: spec.selectors[0].cel.expression")


def test_claim_devices_reads_allocation_results() -> None:
    assert claim_devices(claim("c", ["gpu-0", "gpu-1"])) == (
        (DRIVER, "node-a", "gpu-0"),
        (DRIVER, "node-a", "gpu-1"),
    )
    assert claim_devices(msgspec.convert({"metadata": {"name": "x"}}, ResourceClaim)) == ()


# --- the Enforce gate in the scheduler -----------------------------------------------------


def engine(quota: int, index: InventoryIndex) -> Engine:
    state = Engine()
    state.set_flavor(FLAVORS["t4"])
    state.set_cluster_queue(cluster_queue("cq", [("t4", {GPU: quota})]))
    state.set_local_queue("ns", "lq", "cq")
    state.set_namespace("ns", {"kubernetes.io/metadata.name": "ns"})
    state.scheduler.gate = InventoryGate(index.compute(state.flavors, MAPPING, lambda pod: pod[1] == "ours"))
    return state


def test_quota_four_but_two_published_admits_two_and_the_third_waits_for_devices() -> None:
    index = index_with(node_slice("node-a", 2))
    state = engine(4, index)
    jobs = [info(n, requests={GPU: "1"}) for n in ("a", "bb", "ccc")]
    for j in jobs:
        state.add_workload(j)
    got = decisions_by_name(state.schedule())
    assert isinstance(got["a"], Admit)
    assert isinstance(got["bb"], Admit)
    third = got["ccc"]
    assert isinstance(third, Pending)
    assert third.reason == "Pending"
    assert third.message == (
        "couldn't assign flavors to pod set main: insufficient devices for nvidia.com/gpu in flavor t4: "
        "DeviceClass gpu.nvidia.com needs 1, 0 available (2 published on the flavor's nodes)"
    )


def test_devices_allocated_to_others_are_not_free_and_our_allocations_are_not_counted_twice() -> None:
    index = index_with(node_slice("node-a", 2), node_slice("node-b", 1))
    index.set_claim(("ns", "other"), claim("other", ["gpu-0"], pod="theirs"))
    state = engine(4, index)
    first = info("a", requests={GPU: "1"})
    state.add_workload(first)
    assert isinstance(decisions_by_name(state.schedule())["a"], Admit)
    # Its pod's claim gets allocated: held turns into allocated, nothing counted twice.
    index.set_claim(("ns", "ours-claim"), claim("ours-claim", ["gpu-1"], pod="ours"))
    state.scheduler.gate = InventoryGate(index.compute(state.flavors, MAPPING, lambda pod: pod[1] == "ours"))
    second = info("bb", requests={GPU: "1"})
    third = info("ccc", requests={GPU: "1"})
    state.add_workload(second)
    state.add_workload(third)
    got = decisions_by_name(state.schedule())
    assert isinstance(got["bb"], Admit)  # 3 published - 1 theirs - 1 ours = 1 free
    assert isinstance(got["ccc"], Pending)
    assert "0 available (3 published" in got["ccc"].message


def test_without_a_gate_quota_alone_decides() -> None:
    state = engine(4, index_with(node_slice("node-a", 1)))
    state.scheduler.gate = None
    for n in ("a", "bb"):
        state.add_workload(info(n, requests={GPU: "1"}))
    assert all(isinstance(d, Admit) for d in state.schedule())


def test_a_request_larger_than_the_flavor_names_needed_and_available() -> None:
    state = engine(8, index_with(node_slice("node-a", 2)))
    state.add_workload(info("a", requests={GPU: "3"}))
    pending = decisions_by_name(state.schedule())["a"]
    assert isinstance(pending, Pending)
    assert "needs 3, 2 available (2 published" in pending.message


# --- the ClusterQueue condition ----------------------------------------------------------


def test_quota_over_the_devices_makes_the_condition_false() -> None:
    index = index_with(node_slice("node-a", 2))
    inventory = index.compute(FLAVORS, MAPPING, lambda pod: False)
    over = cluster_queue("cq", [("t4", {GPU: 4})])
    assert devices_cover_quota(over, inventory) == (
        "False",
        "QuotaExceedsDevices",
        "flavor t4: nominal quota 4 nvidia.com/gpu exceeds the 2 device(s) of DeviceClass gpu.nvidia.com "
        "published on its nodes",
    )
    assert [g.over for g in quota_gaps(over, inventory)] == [2]
    covered = cluster_queue("cq", [("t4", {GPU: 2})])
    assert devices_cover_quota(covered, inventory)[:2] == ("True", "DevicesCoverQuota")


def test_a_mapped_class_that_does_not_exist_makes_the_condition_false() -> None:
    index = index_with(node_slice("node-a", 2))
    index.set_class("gpu.nvidia.com", None)
    inventory = index.compute(FLAVORS, MAPPING, lambda pod: False)
    status, reason, message = devices_cover_quota(cluster_queue("cq", [("t4", {GPU: 1})]), inventory)
    assert (status, reason) == ("False", "DeviceClassNotFound")
    assert (
        message
        == "DeviceClass gpu.nvidia.com (mapped to nvidia.com/gpu in deviceClassMappings) does not exist"
    )


# --- the configuration -------------------------------------------------------------------


def config(inventory: Any) -> dict[str, Any]:
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "deviceInventory": inventory,
    }


@pytest.mark.parametrize(
    ("raw", "mode"),
    [
        (None, "Off"),
        ({}, "Off"),
        ({"mode": False}, "Off"),
        ({"mode": "Enforce"}, "Enforce"),
        ({"mode": "Report"}, "Report"),
    ],
)
def test_device_inventory_modes(raw: Any, mode: str) -> None:
    parsed = parse_config(config(raw)).device_inventory
    assert parsed.mode == mode
    assert parsed.enforce == (mode == "Enforce")
    assert parsed.enabled == (mode != "Off")


def test_bad_device_inventory_names_the_field() -> None:
    with pytest.raises(
        ConfigError,
        match=r"deviceInventory.mode: Unsupported value: 'enforce': supported values: "
        r'"Off", "Report", "Enforce"',
    ):
        parse_config(config({"mode": "enforce"}))
    with pytest.raises(
        ConfigError, match=r"deviceInventory.admission: unknown field; known fields here are: mode"
    ):
        parse_config(config({"admission": "Enforce"}))
    with pytest.raises(ConfigError, match=r"deviceInventory"):
        parse_config(config("Enforce"))


def test_claims_owned_by_a_pod_are_tracked_and_unallocated_claims_are_not_kept() -> None:
    index = index_with(node_slice("node-a", 2))
    index.set_claim(("ns", "c1"), claim("c1", ["gpu-0"], pod="p"))
    index.set_claim(("ns", "c2"), claim("c2", ["gpu-1"], pod="p"))
    assert index.owns_claims(("ns", "p"))
    index.set_claim(("ns", "c1"), None)
    assert index.owns_claims(("ns", "p"))
    # Deallocated (no results): forgotten, and with it the owner.
    assert index.set_claim(("ns", "c2"), claim("c2", [], pod="p"))
    assert not index.owns_claims(("ns", "p"))
    assert index.claims == {}


def test_a_flavor_without_free_devices_is_passed_over_for_the_next() -> None:
    index = index_with(node_slice("node-a", 1), node_slice("node-c", 2))
    state = Engine()
    for f in FLAVORS.values():
        state.set_flavor(f)
    state.set_cluster_queue(cluster_queue("cq", [("t4", {GPU: 4}), ("a100", {GPU: 4})]))
    state.set_local_queue("ns", "lq", "cq")
    state.set_namespace("ns", {"kubernetes.io/metadata.name": "ns"})
    state.scheduler.gate = InventoryGate(index.compute(state.flavors, MAPPING, lambda pod: False))
    for n in ("a", "bb", "ccc", "dddd"):
        state.add_workload(info(n, requests={GPU: "1"}))
    got = decisions_by_name(state.schedule())
    flavors = {n: d.pod_sets[0].flavors[GPU] for n, d in got.items() if isinstance(d, Admit)}
    assert flavors == {"a": "t4", "bb": "a100", "ccc": "a100"}  # t4 has one GPU, a100 two
    last = got["dddd"]
    assert isinstance(last, Pending)
    assert last.message == (
        "couldn't assign flavors to pod set main: "
        "insufficient devices for nvidia.com/gpu in flavor a100: DeviceClass gpu.nvidia.com needs 1, "
        "0 available (2 published on the flavor's nodes), "
        "insufficient devices for nvidia.com/gpu in flavor t4: DeviceClass gpu.nvidia.com needs 1, "
        "0 available (1 published on the flavor's nodes)"
    )
