"""Two dimensions from one DeviceClass (HAMi-style fractional GPUs, DRA consumable capacity): a
mapping charges a card's `memory` and `cores` each as its own quota resource; a request that names
no memory (HAMi's cores-only request) is charged the most a device of the class on the flavor's
nodes would give it (its requestPolicy default, else its whole memory). The controller, `simulate`
and `explain` charge one fixture alike."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.api import DeviceClass, ResourceClaimTemplate, ResourceFlavor
from reconciler.api.resources import (
    RESOURCE_CLAIM_TEMPLATES,
)
from reconciler.api.slices import Node, ResourceSlice
from reconciler.config import ConfigError, parse_config
from reconciler.core.devices.dra import DeviceDemand
from reconciler.core.devices.inventory import DeviceInventory
from reconciler.core.model.workloads import WorkloadInfo, compile_workload
from reconciler.core.scheduling.scheduler import Admit, Pending
from reconciler.explain.quota import _inventory as explain_inventory
from reconciler.explain.quota import fed_engine
from reconciler.explain.state import ClusterState, Target
from reconciler.integrations.batchjob import workload_for_job
from reconciler.runtime.loop.reconciler import Reconciler
from reconciler.simulate import InputObject, prepare
from tests.support.builders import claim_template, decode, job, job_body
from tests.support.device_engine import by_name, engine
from tests.support.inventory_harness import add_inventory
from tests.support.reconciler_harness import Harness

CLASS = "hami.example.com"
GPU = "example.com/vgpu"
MEM = "example.com/gpu-memory"
CORES = "example.com/gpu-cores"
GI = 1024**3
CONFIG: dict[str, Any] = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
    "kind": "Configuration",
    "resources": {
        "deviceClassMappings": [
            {
                "name": GPU,
                "deviceClassNames": [CLASS],
                "capacity": [{"name": "memory", "resource": MEM}, {"name": "cores", "resource": CORES}],
            }
        ]
    },
    "deviceInventory": {"mode": "Report"},
}
CAPACITIES = parse_config(CONFIG).class_capacities
MAPPINGS = {CLASS: GPU}


def card(name: str, memory: str, default: str | None = None) -> dict[str, Any]:
    mem: dict[str, Any] = {"value": memory}
    if default is not None:
        mem["requestPolicy"] = {"default": default, "validRange": {"min": "1Gi"}}
    return {
        "name": name,
        "allowMultipleAllocations": True,
        "capacity": {"memory": mem, "cores": {"value": "100"}},
    }


def objects(default: str | None = None) -> list[dict[str, Any]]:
    """Flavor t4 (node-t, a 24Gi card and a 16Gi one) and a100 (node-a, an 80Gi card)."""
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": f},
            "spec": {"nodeLabels": {"pool": f}},
        }
        for f in ("t4", "a100")
    ]
    docs.append(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": CLASS},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{CLASS}"'}}]},
        }
    )
    for node, pool, cards in (
        ("node-t", "t4", [card("c0", "24Gi", default), card("c1", "16Gi")]),
        ("node-a", "a100", [card("c0", "80Gi")]),
    ):
        docs.append(
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": {"pool": pool}}}
        )
        docs.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": node},
                "spec": {
                    "driver": CLASS,
                    "nodeName": node,
                    "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                    "devices": cards,
                },
            }
        )
    return docs


def request(**capacity: Any) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": CLASS}
    if capacity:
        exactly["capacity"] = {"requests": capacity}
    return {"name": "vgpu", "exactly": exactly}


def compile_(name: str, req: dict[str, Any], *, sized: bool = True, pods: int = 1) -> WorkloadInfo:
    template: ResourceClaimTemplate = claim_template("t", [req])
    claims = [{"name": "gpu", "resourceClaimTemplateName": "t"}]
    wl = workload_for_job(job(name, uid=f"uid-{name}", claims=claims, parallelism=pods, completions=pods))
    info = compile_workload(
        wl, lookup_template=lambda ns, n: template, mappings=MAPPINGS, capacities=CAPACITIES, sized=sized
    )
    info.name = name
    return info


def inventory(default: str | None = None) -> DeviceInventory:
    docs = objects(default)
    state = ClusterState(
        target=Target("workload", "ns", "w"),
        now="2026-01-01T00:00:30Z",
        flavors=[decode(d, ResourceFlavor) for d in docs if d["kind"] == "ResourceFlavor"],
        device_classes=[decode(d, DeviceClass) for d in docs if d["kind"] == "DeviceClass"],
        resource_slices=[decode(d, ResourceSlice) for d in docs if d["kind"] == "ResourceSlice"],
        nodes=[decode(d, Node) for d in docs if d["kind"] == "Node"],
        capacities=CAPACITIES,
    )
    return explain_inventory(state, MAPPINGS)


def test_one_class_charges_two_capacities_each_as_its_own_resource() -> None:
    assert CAPACITIES == {CLASS: (("memory", MEM), ("cores", CORES))}
    info = compile_("a", request(cores=30, memory="4Gi"), sized=False, pods=2)
    assert info.problem is None
    assert info.total_requests() == [("main", {GPU: 2, MEM: 8 * GI, CORES: 60})]


def test_a_cores_only_request_is_charged_the_largest_card_memory_of_the_flavor() -> None:
    info = compile_("a", request(cores=30))
    assert info.pod_sets[0].per_pod == {GPU: 1, CORES: 30}
    label = "podset main, claim gpu, request vgpu"
    assert info.pod_sets[0].demands == (DeviceDemand(MEM, CLASS, 1, "memory", None, label),)
    state = engine([("t4", {GPU: 4, MEM: "30Gi", CORES: 400})], inventory())
    state.add_workload(info)
    state.add_workload(compile_("bb", request(cores=30)))
    got = by_name(state.schedule())
    admit = got["a"]
    assert isinstance(admit, Admit)
    assert admit.pod_sets[0].usage == {GPU: 1, CORES: 30, MEM: 24 * GI}  # the 24Gi card, not the 16Gi
    waiting = got["bb"]
    assert isinstance(waiting, Pending)
    assert (
        "insufficient unused quota for example.com/gpu-memory in flavor t4, 18Gi more needed"
        in waiting.message
    )


def test_the_flavor_decides_the_worst_case() -> None:
    inv = inventory()
    demand = DeviceDemand(MEM, CLASS, 1, "memory")
    assert inv.size("t4", demand) == (
        24 * GI,
        "1 device(s) of DeviceClass hami.example.com x 24Gi memory "
        "(the largest on flavor t4's nodes) charged as 24Gi example.com/gpu-memory",
    )
    assert inv.size("a100", demand)[0] == 80 * GI


def test_a_request_policy_default_is_what_an_unasked_capacity_consumes() -> None:
    # The 24Gi card's memory defaults to 8Gi per request: the largest is now the 16Gi card.
    assert inventory(default="8Gi").size("t4", DeviceDemand(MEM, CLASS, 1, "memory"))[0] == 16 * GI


def test_without_the_inventory_a_cores_only_request_is_refused_naming_the_field() -> None:
    info = compile_("a", request(cores=30), sized=False)
    assert info.problem is not None
    assert (
        ".exactly.capacity.requests: Required value: ResourceClaimTemplate t: DeviceClass "
        in info.problem.message
    )
    assert (
        "charges its devices' memory capacity as example.com/gpu-memory, which needs the device inventory"
        in (info.problem.message)
    )


def test_a_percentage_is_not_a_quantity_and_is_refused_naming_the_field() -> None:
    info = compile_("a", request(cores=30, memory="50%"))
    assert info.problem is not None
    assert '.exactly.capacity.requests.memory: Invalid value: "50%"' in info.problem.message


def test_bad_capacity_mappings_are_refused_with_the_field_named() -> None:
    bad = {
        **CONFIG,
        "resources": {
            "deviceClassMappings": [
                {
                    "name": GPU,
                    "deviceClassNames": [CLASS],
                    "capacity": [{"name": "memory", "resource": MEM}, {"name": "cores", "resource": MEM}],
                }
            ]
        },
    }
    with pytest.raises(
        ConfigError, match=r"^resources\.deviceClassMappings\[0\]\.capacity\[1\]\.resource: Duplicate"
    ):
        parse_config(bad)


def test_the_controller_simulate_and_explain_charge_it_alike() -> None:
    docs = objects()
    template = claim_template("t", [request(cores=30)])
    wl = workload_for_job(job("a", uid="uid-a", claims=[{"name": "gpu", "resourceClaimTemplateName": "t"}]))
    h = Harness()
    h.reconciler = Reconciler(parse_config(CONFIG), h.actions.append, clock=lambda: "2026-01-01T00:00:00Z")
    add_inventory(h, docs)
    h.event("ADDED", RESOURCE_CLAIM_TEMPLATES, template)
    h.reconciler.inventory.refresh()
    runtime_inv = h.reconciler.ctx.device_inventory
    assert runtime_inv is not None
    live = h.reconciler.workload_sync.compile(wl)

    tmpl_doc = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t", "namespace": "ns"},
        "spec": {"spec": {"devices": {"requests": [request(cores=30)]}}},
    }
    job_doc = job_body("a", uid="uid-a", claims=[{"name": "gpu", "resourceClaimTemplateName": "t"}])
    prepared = prepare(
        [InputObject(f"#{i}", d) for i, d in enumerate([*docs, tmpl_doc, job_doc])],
        MAPPINGS,
        inventory_mode="Report",
        capacities=CAPACITIES,
    )
    simulated = next(iter(prepared.infos.values()))
    assert prepared.inventory is not None

    state = ClusterState(
        target=Target("workload", "ns", wl.metadata.name),
        now="2026-01-01T00:00:30Z",
        workloads=[wl],
        flavors=[decode(d, ResourceFlavor) for d in docs if d["kind"] == "ResourceFlavor"],
        device_classes=[decode(d, DeviceClass) for d in docs if d["kind"] == "DeviceClass"],
        resource_slices=[decode(d, ResourceSlice) for d in docs if d["kind"] == "ResourceSlice"],
        nodes=[decode(d, Node) for d in docs if d["kind"] == "Node"],
        templates=[template],
        mappings=MAPPINGS,
        capacities=CAPACITIES,
        inventory_on=True,
    )
    explained = fed_engine(state, wl, MAPPINGS)[1]
    assert isinstance(explained, WorkloadInfo)
    explained_inv = explain_inventory(state, MAPPINGS)

    def charge(info: WorkloadInfo, inv: DeviceInventory) -> tuple[Any, ...]:
        ps = info.pod_sets[0]
        return ps.per_pod, ps.demands, ps.total_in("t4", inv), ps.total_in("a100", inv)

    seen = charge(live, runtime_inv)
    assert seen[2][0] == {GPU: 1, CORES: 30, MEM: 24 * GI}
    assert seen[3][0] == {GPU: 1, CORES: 30, MEM: 80 * GI}
    assert charge(simulated, prepared.inventory) == seen
    assert charge(explained, explained_inv) == seen
