"""Extended resources backed by DRA (KEP-5004; Kueue's gate KueueDRAIntegrationExtendedResource): a
container's `nvidia.com/gpu: 2`, declared by a DeviceClass's `spec.extendedResourceName`, charged as a
claim of 2 devices of that class would be (mapped resource, capacities, device inventory)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from reconciler.api import DeviceClass
from reconciler.core.devices.dra import DeviceAsk, DeviceDemand
from reconciler.core.devices.dra_extended import ExtendedResources
from reconciler.core.model.workloads import WorkloadInfo, compile_workload
from reconciler.core.quota.inventory_admission import InventoryGate
from reconciler.core.scheduling.scheduler import Admit, Pending
from reconciler.integrations.batchjob import workload_for_job
from tests.support.builders import job
from tests.support.device_engine import (
    CAPACITIES,
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

EXTENDED = "nvidia.com/gpu"


def device_class(
    name: str, extended: str | None = None, created: str = "2026-01-01T00:00:00Z"
) -> DeviceClass:
    spec: dict[str, Any] = {"extendedResourceName": extended} if extended else {}
    body = {"metadata": {"name": name, "creationTimestamp": created}, "spec": spec}
    return msgspec.convert(body, DeviceClass)


CLASSES = ExtendedResources.of(
    [
        device_class("gpu.example.com", EXTENDED),
        device_class("mig.example.com"),
        device_class("x.example.com"),
    ]
)


def compile_(
    name: str,
    requests: Mapping[str, str],
    *,
    extended: ExtendedResources | None = CLASSES,
    sized: bool = True,
    parallelism: int = 1,
    capacities: Mapping[str, Sequence[tuple[str, str]]] = CAPACITIES,
) -> WorkloadInfo:
    wl = workload_for_job(
        job(name, uid=f"uid-{name}", requests=requests, parallelism=parallelism, completions=parallelism)
    )
    info = compile_workload(
        wl,
        lookup_template=lambda ns, n: None,
        mappings=MAPPINGS,
        capacities=capacities,
        sized=sized,
        extended=extended,
    )
    info.name = name
    info.created = f"2026-01-01T00:00:{len(name):02d}Z"
    return info


def test_without_the_gate_the_extended_resource_is_charged_as_it_is() -> None:
    info = compile_("a", {EXTENDED: "2", "cpu": "1"}, extended=None)
    assert info.pod_sets[0].per_pod == {EXTENDED: 2, "cpu": 1000}
    assert info.devices_by_class == {}


def test_with_the_gate_it_is_charged_as_devices_of_the_declaring_class() -> None:
    info = compile_("a", {EXTENDED: "2", "cpu": "1"}, parallelism=3)
    assert info.problem is None
    pod_set = info.pod_sets[0]
    assert pod_set.per_pod == {GPU: 2, "cpu": 1000}  # nvidia.com/gpu is gone: no double charge
    assert info.total_requests() == [("main", {GPU: 6, "cpu": 3000})]
    assert info.devices_by_class == {"gpu.example.com": 6}
    assert info.claims_by_class == {"gpu.example.com": 3}  # the scheduler's claim, one per pod
    assert pod_set.asks == (DeviceAsk(EXTENDED, "gpu.example.com", GPU, 2),)


def test_the_implicit_name_of_a_class_is_charged_through_it_with_its_capacity() -> None:
    info = compile_("a", {"deviceclass.resource.kubernetes.io/mig.example.com": "2"})
    pod_set = info.pod_sets[0]
    assert pod_set.per_pod == {MIG: 2}
    label = "podset main, extended resource deviceclass.resource.kubernetes.io/mig.example.com"
    assert pod_set.demands == (DeviceDemand(MEMORY, "mig.example.com", 2, "memory", None, label),)


def test_a_class_not_mapped_or_no_class_leaves_the_resource_as_it_is() -> None:
    unmapped = ExtendedResources.of([device_class("x.example.com", "example.com/fpga")])
    info = compile_("a", {"example.com/fpga": "1", "example.com/nic": "1"}, extended=unmapped)
    assert info.pod_sets[0].per_pod == {"example.com/fpga": 1, "example.com/nic": 1}
    assert info.devices_by_class == {}
    missing = compile_("a", {"deviceclass.resource.kubernetes.io/nope.example.com": "1"})
    assert missing.pod_sets[0].per_pod == {"deviceclass.resource.kubernetes.io/nope.example.com": 1}


def test_of_two_classes_declaring_one_name_the_newest_serves_it_then_the_first_name() -> None:
    older = device_class("gpu.example.com", EXTENDED, "2026-01-01T00:00:00Z")
    newer = device_class("mig.example.com", EXTENDED, "2026-02-01T00:00:00Z")
    assert ExtendedResources.of([newer, older]).class_for(EXTENDED) == "mig.example.com"
    assert ExtendedResources.of([older, newer]).class_for(EXTENDED) == "mig.example.com"
    tied = [device_class("mig.example.com", EXTENDED), device_class("gpu.example.com", EXTENDED)]
    assert ExtendedResources.of(tied).class_for(EXTENDED) == "gpu.example.com"
    info = compile_("a", {EXTENDED: "1"}, extended=ExtendedResources.of([older, newer]))
    assert info.pod_sets[0].per_pod == {MIG: 1}


def test_a_capacity_without_the_inventory_is_refused_naming_the_request() -> None:
    info = compile_("a", {"deviceclass.resource.kubernetes.io/mig.example.com": "1"}, sized=False)
    assert info.problem is not None
    assert info.problem.message.startswith(
        "spec.podSets[0].template.spec.containers[*].resources.requests"
        "[deviceclass.resource.kubernetes.io/mig.example.com]: Required value: extended resource "
        "deviceclass.resource.kubernetes.io/mig.example.com is served by DeviceClass mig.example.com, "
        "whose mapping charges its devices' capacity memory (as example.com/gpu-memory), which needs the "
        "device inventory: set deviceInventory.mode to Report or Enforce"
    )


def test_the_capacity_is_the_largest_on_the_flavor_and_the_quota_holds_it() -> None:
    state = engine([("t4", {MIG: 4, MEMORY: "30Gi"})], inventory(node_slice("node-a", 0, ["10Gi", "20Gi"])))
    state.add_workload(compile_("a", {"deviceclass.resource.kubernetes.io/mig.example.com": "1"}))
    state.add_workload(compile_("bb", {"deviceclass.resource.kubernetes.io/mig.example.com": "1"}))
    got = by_name(state.schedule())
    admit = got["a"]
    assert isinstance(admit, Admit)
    assert admit.pod_sets[0].usage == {MIG: 1, MEMORY: 20 * GI}
    waiting = got["bb"]
    assert isinstance(waiting, Pending)
    assert (
        "insufficient unused quota for example.com/gpu-memory in flavor t4, 10Gi more needed"
        in waiting.message
    )


def test_the_free_devices_are_checked_in_enforce_mode() -> None:
    inv = inventory(node_slice("node-a", 2))
    state = engine([("t4", {GPU: 8})], inv)
    state.scheduler.gate = InventoryGate(inv)
    state.add_workload(compile_("a", {EXTENDED: "2"}))
    state.add_workload(compile_("bb", {EXTENDED: "1"}))
    got = by_name(state.schedule())
    assert isinstance(got["a"], Admit)
    waiting = got["bb"]
    assert isinstance(waiting, Pending)
    assert waiting.message == (
        "couldn't assign flavors to pod set main: insufficient devices for example.com/gpu in flavor t4: "
        "DeviceClass gpu.example.com needs 1, 0 available (2 published on the flavor's nodes)"
    )
