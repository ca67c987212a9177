"""allocationMode All and device-capacity quota: charges the flavor decides from the device inventory."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.api import ClusterQueue, ResourceClaimTemplate, WorkloadStatus
from reconciler.core.devices.dra import DeviceDemand
from reconciler.core.devices.inventory import InventoryIndex
from reconciler.core.model.clusterqueues import compile_cluster_queue
from reconciler.core.model.workloads import WorkloadInfo, compile_workload
from reconciler.core.quota.cache import charge_from_admission
from reconciler.core.quota.inventory_admission import InventoryGate
from reconciler.core.scheduling.scheduler import Admit, Pending
from reconciler.core.status import admitted_workload_status
from reconciler.integrations.batchjob import workload_for_job
from tests.support.builders import claim_template, cluster_queue_body, decode, job
from tests.support.device_engine import (
    CAPACITIES,
    DRIVER,
    FLAVORS,
    GI,
    GPU,
    MAPPINGS,
    MEMORY,
    MIG,
    by_name,
    engine,
    inventory,
    node_slice,
)


def all_request(device_class: str = "gpu.example.com", **extra: Any) -> dict[str, Any]:
    return {"name": "all", "exactly": {"deviceClassName": device_class, "allocationMode": "All", **extra}}


def mig_request(count: int = 1, memory: str | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "mig.example.com", "count": count}
    if memory is not None:
        exactly["capacity"] = {"requests": {"memory": memory}}
    return {"name": "mig", "exactly": exactly}


def compile_(
    name: str,
    requests: Sequence[Mapping[str, Any]],
    *,
    sized: bool = True,
    parallelism: int = 1,
    capacities: Mapping[str, Sequence[tuple[str, str]]] = CAPACITIES,
) -> WorkloadInfo:
    template: ResourceClaimTemplate = claim_template(f"{name}-t", requests)
    wl = workload_for_job(
        job(
            name,
            uid=f"uid-{name}",
            claims=[{"name": "dev", "resourceClaimTemplateName": f"{name}-t"}],
            parallelism=parallelism,
            completions=parallelism,
        )
    )
    info = compile_workload(
        wl,
        lookup_template=lambda ns, n: template if n == f"{name}-t" else None,
        mappings=MAPPINGS,
        capacities=capacities,
        sized=sized,
    )
    info.name = name
    info.created = f"2026-01-01T00:00:{len(name):02d}Z"
    return info


# --- charging: what compile_workload makes of the requests ---------------------------------------


def test_all_without_the_inventory_is_refused_with_the_fix() -> None:
    info = compile_("a", [all_request()], sized=False)
    assert info.problem is not None
    assert info.problem.message.endswith(
        "AllocationMode 'All' is not supported; this controller charges it from the device inventory: "
        "set deviceInventory.mode to Report or Enforce in the Configuration"
    )


def test_all_with_the_inventory_becomes_a_demand_the_flavor_decides() -> None:
    info = compile_("a", [all_request()], parallelism=2)
    assert info.problem is None
    pod_set = info.pod_sets[0]
    assert pod_set.total() == {}
    assert pod_set.demands == (
        DeviceDemand(GPU, "gpu.example.com", None, label="podset main, claim dev, request all"),
    )
    assert info.devices_by_class == {"gpu.example.com": 0}
    assert info.claims_by_class == {"gpu.example.com": 2}


def test_a_requested_capacity_is_charged_without_the_inventory() -> None:
    info = compile_("a", [mig_request(count=2, memory="10Gi")], sized=False, parallelism=3)
    assert info.problem is None
    assert info.pod_sets[0].total() == {MIG: 6, MEMORY: 6 * 10 * GI}
    assert info.pod_sets[0].demands == ()


def test_a_capacity_not_requested_needs_the_inventory() -> None:
    info = compile_("a", [mig_request()], sized=False)
    assert info.problem is not None
    assert info.problem.message == (
        "spec.podSets[0].template.spec.resourceClaims[0].devices.requests[0].exactly.capacity.requests: "
        "Required value: ResourceClaimTemplate a-t: DeviceClass mig.example.com charges its devices' memory "
        "capacity as example.com/gpu-memory, which needs the device inventory: set deviceInventory.mode to "
        "Report or Enforce in the Configuration, or request the amount in capacity.requests.memory"
    )
    sized = compile_("a", [mig_request(count=2)])
    assert sized.pod_sets[0].total() == {MIG: 2}
    assert sized.pod_sets[0].demands == (
        DeviceDemand(MEMORY, "mig.example.com", 2, "memory", None, "podset main, claim dev, request mig"),
    )


def test_a_bad_requested_capacity_names_the_field() -> None:
    info = compile_("a", [mig_request(memory="lots")])
    assert info.problem is not None
    assert '.exactly.capacity.requests.memory: Invalid value: "lots"' in info.problem.message


def test_the_charge_is_part_of_the_shape() -> None:
    assert compile_("a", [all_request()]).shape != compile_("a", [gpu_count(1)]).shape


def gpu_count(count: int) -> dict[str, Any]:
    return {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "count": count}}


# --- sizing: what the inventory says a demand amounts to in a flavor ------------------------------


def test_all_is_the_most_devices_on_one_node_of_the_flavor() -> None:
    inv = inventory(node_slice("node-a", 2), node_slice("node-b", 3), node_slice("node-c", 8))
    demand = DeviceDemand(GPU, "gpu.example.com", None)
    assert inv.most_on_node[("t4", "gpu.example.com")] == 3
    assert inv.size("t4", demand) == (
        3,
        "3 device(s) of DeviceClass gpu.example.com (allocationMode All: the most on one node of flavor t4) "
        "charged as 3 example.com/gpu",
    )
    assert inv.size("a100", demand)[0] == 8


def test_slices_for_all_nodes_count_on_every_node_they_reach() -> None:
    inv = inventory(node_slice("node-a", 1), node_slice("shared", 2, allNodes=True))
    assert inv.most_on_node[("t4", "gpu.example.com")] == 3  # node-a: its own 1 + the shared 2
    assert inv.most_on_node[("a100", "gpu.example.com")] == 2


def test_no_device_of_the_class_on_the_flavor_is_said_with_class_and_flavor() -> None:
    inv = inventory(node_slice("node-c", 2))
    assert inv.size("t4", DeviceDemand(GPU, "gpu.example.com", None)) == (
        "no device of DeviceClass gpu.example.com is published on the nodes of flavor t4 "
        "(allocationMode All needs at least one)"
    )


def test_a_capacity_is_the_largest_among_the_class_devices_of_the_flavor() -> None:
    inv = inventory(node_slice("node-a", 1, ["10Gi", "20Gi"]), node_slice("node-b", 0, ["5Gi"]))
    assert inv.largest_capacity[("t4", "mig.example.com", "memory")] == 20 * GI
    sized = inv.size("t4", DeviceDemand(MEMORY, "mig.example.com", 2, "memory"))
    assert isinstance(sized, tuple)
    amount, how = sized
    assert amount == 40 * GI
    assert "the largest on flavor t4's nodes" in how


def test_an_unknown_capacity_name_is_said() -> None:
    inv = inventory(node_slice("node-a", 1, ["10Gi"]), capacities={"mig.example.com": ["vram"]})
    assert inv.size("t4", DeviceDemand(MEMORY, "mig.example.com", 1, "vram")) == (
        "no device of DeviceClass mig.example.com on the nodes of flavor t4 publishes capacity vram "
        "(charged as example.com/gpu-memory); fix the name in deviceClassMappings capacity or request "
        "the amount in capacity.requests"
    )


def test_the_request_selectors_narrow_all_and_the_capacity() -> None:
    inv = inventory(node_slice("node-a", 1, ["5Gi", "10Gi", "5Gi"]), node_slice("node-b", 0, ["10Gi"]))
    small = (f'device.capacity["{DRIVER}"].memory.compareTo(quantity("5Gi")) == 0',)
    all_small = DeviceDemand(MIG, "mig.example.com", None, selectors=small)
    assert inv.size("t4", all_small)[0] == 2  # node-a has two 5Gi partitions; the class alone: 3
    assert inv.size("t4", DeviceDemand(MIG, "mig.example.com", None))[0] == 3
    memory = DeviceDemand(MEMORY, "mig.example.com", 1, "memory", selectors=small)
    assert inv.size("t4", memory)[0] == 5 * GI  # the largest the selectors accept, not 10Gi
    none = (f'device.capacity["{DRIVER}"].memory.compareTo(quantity("80Gi")) == 0',)
    assert inv.size("t4", DeviceDemand(MIG, "mig.example.com", None, selectors=none)) == (
        "no device of DeviceClass mig.example.com accepted by the request's selectors is published on the "
        "nodes of flavor t4 (allocationMode All needs at least one)"
    )
    broken = inv.size("t4", DeviceDemand(MIG, "mig.example.com", None, selectors=("device.driver ==",)))
    assert isinstance(broken, str)
    assert broken.startswith("the request's selectors do not compile: DeviceClass (request): ")


def test_request_selectors_are_read_from_the_claim() -> None:
    selector = {"cel": {"expression": 'device.attributes["gpu.example.com"].profile == "1g"'}}
    info = compile_("a", [all_request("mig.example.com", selectors=[selector])])
    (demand, memory) = info.pod_sets[0].demands
    assert demand.selectors == memory.selectors == ('device.attributes["gpu.example.com"].profile == "1g"',)
    assert compile_("a", [all_request("mig.example.com")]).shape != info.shape


def test_a_mapped_class_that_does_not_exist_is_said() -> None:
    index = InventoryIndex()
    inv = index.compute(FLAVORS, MAPPINGS, lambda pod: False)
    message = inv.size("t4", DeviceDemand(GPU, "gpu.example.com", None))
    assert isinstance(message, str)
    assert message.startswith("DeviceClass gpu.example.com does not exist")


# --- admission -----------------------------------------------------------------------------------


def test_all_is_admitted_with_the_flavor_charge_and_a_second_waits_for_quota() -> None:
    inv = inventory(node_slice("node-a", 2), node_slice("node-b", 1))
    state = engine([("t4", {GPU: 3})], inv)
    state.add_workload(compile_("a", [all_request()]))
    state.add_workload(compile_("bb", [all_request()]))
    got = by_name(state.schedule())
    admit = got["a"]
    assert isinstance(admit, Admit)
    assert admit.pod_sets[0].usage == {GPU: 2}
    assert admit.charged == (
        "podset main, claim dev, request all: 2 device(s) of DeviceClass gpu.example.com (allocationMode "
        "All: the most on one node of flavor t4) charged as 2 example.com/gpu",
    )
    assert state.ledger.used("cq", ("t4", GPU)) == 2
    waiting = got["bb"]
    assert isinstance(waiting, Pending)
    assert waiting.message == (
        "couldn't assign flavors to pod set main: insufficient unused quota for example.com/gpu in "
        "flavor t4, 1 more needed"
    )


def test_a_flavor_without_devices_of_the_class_is_passed_over() -> None:
    inv = inventory(node_slice("node-c", 4))
    state = engine([("t4", {GPU: 8}), ("a100", {GPU: 8})], inv)
    state.add_workload(compile_("a", [all_request()], parallelism=2))
    admit = by_name(state.schedule())["a"]
    assert isinstance(admit, Admit)
    assert admit.pod_sets[0].flavors == {GPU: "a100"}
    assert admit.pod_sets[0].usage == {GPU: 8}  # 2 pods x 4 devices


def test_no_flavor_with_devices_of_the_class_leaves_it_pending_with_the_class_and_flavor() -> None:
    state = engine([("t4", {GPU: 8})], inventory(node_slice("node-c", 4)))
    state.add_workload(compile_("a", [all_request()]))
    pending = by_name(state.schedule())["a"]
    assert isinstance(pending, Pending)
    assert pending.message == (
        "couldn't assign flavors to pod set main: no device of DeviceClass gpu.example.com is published on "
        "the nodes of flavor t4 (allocationMode All needs at least one)"
    )


def test_without_a_counted_inventory_it_waits() -> None:
    state = engine([("t4", {GPU: 8})], None)
    state.add_workload(compile_("a", [all_request()]))
    pending = by_name(state.schedule())["a"]
    assert isinstance(pending, Pending)
    assert pending.message.endswith("the device inventory has not been counted yet")


def test_all_is_checked_against_free_devices_in_enforce_mode() -> None:
    inv = inventory(node_slice("node-a", 2))
    state = engine([("t4", {GPU: 8})], inv)
    state.scheduler.gate = InventoryGate(inv)
    state.add_workload(compile_("a", [all_request()]))
    state.add_workload(compile_("bb", [all_request()]))
    got = by_name(state.schedule())
    assert isinstance(got["a"], Admit)
    assert isinstance(got["bb"], Pending)
    assert "insufficient devices for example.com/gpu in flavor t4" in got["bb"].message


def test_memory_capacity_is_charged_as_quota() -> None:
    inv = inventory(node_slice("node-a", 0, ["10Gi", "20Gi"]))
    state = engine([("t4", {MIG: 4, MEMORY: "30Gi"})], inv)
    state.add_workload(compile_("a", [mig_request()]))
    state.add_workload(compile_("bb", [mig_request()]))
    got = by_name(state.schedule())
    admit = got["a"]
    assert isinstance(admit, Admit)
    assert admit.pod_sets[0].usage == {MIG: 1, MEMORY: 20 * GI}  # the largest partition
    assert (
        admit.charged[0].endswith("charged as 20Gi example.com/gpu-memory")
        or "21474836480" in admit.charged[0]
    )
    waiting = got["bb"]
    assert isinstance(waiting, Pending)
    assert waiting.message == (
        "couldn't assign flavors to pod set main: insufficient unused quota for example.com/gpu-memory in "
        "flavor t4, 10Gi more needed"
    )


def test_a_requested_capacity_is_charged_as_asked() -> None:
    state = engine([("t4", {MIG: 4, MEMORY: "30Gi"})], inventory(node_slice("node-a", 0, ["20Gi"])))
    for name in ("a", "bb", "ccc"):
        state.add_workload(compile_(name, [mig_request(memory="10Gi")]))
    got = by_name(state.schedule())
    assert [isinstance(got[n], Admit) for n in ("a", "bb", "ccc")] == [True, True, True]
    assert state.ledger.used("cq", ("t4", MEMORY)) == 30 * GI


def test_an_unknown_capacity_name_leaves_it_pending() -> None:
    capacities = {"mig.example.com": [("vram", MEMORY)]}
    inv = inventory(node_slice("node-a", 0, ["20Gi"]), capacities={"mig.example.com": ["vram"]})
    state = engine([("t4", {MIG: 4, MEMORY: "30Gi"})], inv)
    state.add_workload(compile_("a", [mig_request()], capacities=capacities))
    pending = by_name(state.schedule())["a"]
    assert isinstance(pending, Pending)
    assert "publishes capacity vram (charged as example.com/gpu-memory)" in pending.message


def test_a_capacity_resource_the_queue_does_not_cover_is_said() -> None:
    state = engine([("t4", {MIG: 4})], inventory(node_slice("node-a", 0, ["20Gi"])))
    state.add_workload(compile_("a", [mig_request()]))
    pending = by_name(state.schedule())["a"]
    assert isinstance(pending, Pending)
    assert pending.message == (
        "couldn't assign flavors to pod set main: resource example.com/gpu-memory unavailable in ClusterQueue"
    )


def test_an_admitted_workload_keeps_its_charge_when_the_devices_change() -> None:
    inv = inventory(node_slice("node-a", 2))
    state = engine([("t4", {GPU: 8})], inv)
    info = compile_("a", [all_request()])
    state.add_workload(info)
    admit = by_name(state.schedule())["a"]
    assert isinstance(admit, Admit)
    status = admitted_workload_status(WorkloadStatus(), admit, "2026-01-01T00:00:00Z")
    assert status.admission is not None
    # A restart with more devices published: the ledger comes from status.admission, not a new count.
    restarted = engine([("t4", {GPU: 8})], inventory(node_slice("node-a", 6)))
    restarted.add_workload(compile_("a", [all_request()]), status.admission)
    assert restarted.ledger.used("cq", ("t4", GPU)) == 2
    assert charge_from_admission(status.admission).usage == {("t4", GPU): 2}


def test_preemption_sizes_the_preemptor_per_flavor() -> None:
    inv = inventory(node_slice("node-a", 2))
    state = engine([("t4", {GPU: 2})], inv)
    body = cluster_queue_body("cq", [("t4", {GPU: 2})])
    body["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    state.set_cluster_queue(compile_cluster_queue(decode(body, ClusterQueue)))
    low = compile_("low", [gpu_count(2)])
    state.add_workload(low)
    assert isinstance(by_name(state.schedule())["low"], Admit)
    high = compile_("high", [all_request()])
    high.priority = 10
    state.add_workload(high)
    pending = by_name(state.schedule())["high"]
    assert isinstance(pending, Pending)
    assert pending.message.endswith("Pending the preemption of 1 workload(s)")


# --- the ledger invariant -----------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    per_node=st.lists(st.integers(min_value=0, max_value=4), min_size=1, max_size=3),
    quota=st.integers(min_value=0, max_value=10),
    modes=st.lists(st.sampled_from(["All", "one", "two"]), min_size=1, max_size=8),
)
def test_all_charges_never_over_commit_and_equal_the_most_on_one_node(
    per_node: list[int], quota: int, modes: list[str]
) -> None:
    slices = [node_slice(node, n) for node, n in zip(("node-a", "node-b"), per_node, strict=False)]
    inv = inventory(*slices)
    most = max(per_node[:2])
    state = engine([("t4", {GPU: quota})], inv)
    names = []
    for i, mode in enumerate(modes):
        name = "w" * (i + 1)
        names.append(name)
        request = all_request() if mode == "All" else gpu_count(1 if mode == "one" else 2)
        state.add_workload(compile_(name, [request]))
    got = by_name(state.schedule())
    used = state.ledger.used("cq", ("t4", GPU))
    assert used <= quota
    total = 0
    for name, mode in zip(names, modes, strict=True):
        decision = got.get(name)
        if isinstance(decision, Admit):
            amount = decision.pod_sets[0].usage[GPU]
            assert amount == (most if mode == "All" else 1 if mode == "one" else 2)
            total += amount
        elif mode == "All" and most == 0 and decision is not None:
            # (only the first of a shape is told: the others wait untold, as in Kueue)
            assert isinstance(decision, Pending)
            assert "no device of DeviceClass gpu.example.com" in decision.message
    if most == 0 and "All" in modes:
        first_all = names[modes.index("All")]
        assert isinstance(got.get(first_all), Pending)
    assert total == used
