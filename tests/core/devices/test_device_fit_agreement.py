"""The controller, `simulate` and `explain` count the same devices: one set of DeviceClasses,
ResourceSlices (a taint, shared counters, a pool being updated) and Nodes fed through each."""

from __future__ import annotations

from typing import Any

from reconciler.api import DeviceClass, ResourceFlavor
from reconciler.api.slices import Node, ResourceSlice
from reconciler.core.devices.inventory import DeviceInventory
from reconciler.explain.quota import _inventory as explain_inventory
from reconciler.explain.state import ClusterState, Target
from reconciler.simulate import InputObject, prepare
from tests.support.builders import decode
from tests.support.inventory_harness import add_inventory, enforcing

DRIVER = "gpu.nvidia.com"
MAPPINGS = {DRIVER: "nvidia.com/gpu"}
KUEUE = "kueue.x-k8s.io/v1beta2"
Obj = dict[str, Any]


def _slice(name: str, node: str, generation: int, count: int, devices: list[Obj], **spec: Any) -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": count},
            "devices": devices,
            **spec,
        },
    }


def objects() -> list[Obj]:
    uses = [{"counterSet": "gpu-0", "counters": {"memory": {"value": "4"}}}]
    docs: list[Obj] = [
        {
            "apiVersion": KUEUE,
            "kind": "ResourceFlavor",
            "metadata": {"name": "t4"},
            "spec": {"nodeLabels": {"gpu": "t4"}},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": DRIVER},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        },
    ]
    docs += [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": n, "labels": {"gpu": "t4"}}}
        for n in ("node-1", "node-2")
    ]
    tainted = {"name": "gpu-9", "taints": [{"key": "example.com/broken", "effect": "NoExecute"}]}
    parts = [{"name": f"part-{i}", "consumesCounters": uses} for i in range(3)]
    counters = [{"name": "gpu-0", "counters": {"memory": {"value": "8"}}}]
    docs.append(_slice("node-1", "node-1", 1, 1, [tainted, *parts], sharedCounters=counters))
    # node-2: generation 1 outdated, generation 2 has 1 of its 2 slices.
    docs.append(_slice("node-2-old", "node-2", 1, 1, [{"name": "gpu-0"}, {"name": "gpu-1"}]))
    docs.append(_slice("node-2-new", "node-2", 2, 2, [{"name": "gpu-0"}]))
    return docs


def through_runtime(docs: list[Obj]) -> DeviceInventory:
    h = enforcing()
    add_inventory(h, docs)
    h.reconciler.inventory.refresh()
    inventory = h.reconciler.ctx.device_inventory
    assert inventory is not None
    return inventory


def through_simulate(docs: list[Obj]) -> DeviceInventory:
    prepared = prepare(
        [InputObject(f"#{i}", d) for i, d in enumerate(docs)], MAPPINGS, inventory_mode="Enforce"
    )
    assert prepared.inventory is not None
    return prepared.inventory


def through_explain(docs: list[Obj]) -> DeviceInventory:
    def of(kind: str, cls: type[Any]) -> list[Any]:
        return [decode(d, cls) for d in docs if d["kind"] == kind]

    state = ClusterState(
        target=Target("workload", "ns", "w"),
        now="2026-01-01T00:00:30Z",
        flavors=of("ResourceFlavor", ResourceFlavor),
        device_classes=of("DeviceClass", DeviceClass),
        resource_slices=of("ResourceSlice", ResourceSlice),
        nodes=of("Node", Node),
        mappings=MAPPINGS,
    )
    return explain_inventory(state, MAPPINGS)


def _seen(inventory: DeviceInventory) -> tuple[Any, ...]:
    return (
        dict(inventory.by_resource),
        dict(inventory.most_on_node),
        inventory.available_for("t4", "nvidia.com/gpu", ()),
    )


def test_the_controller_simulate_and_explain_count_the_same_devices() -> None:
    docs = objects()
    runtime = _seen(through_runtime(docs))
    devices = runtime[0][("t4", "nvidia.com/gpu")]
    # node-2's pool is being updated: nothing of it counts; node-1: the tainted GPU is published but
    # not free, and two of its three partitions fit the counters.
    assert (devices.published, devices.available) == (4, 2)
    assert runtime[1] == {("t4", DRIVER): 4}
    assert runtime[2].notes() == (
        "on node node-1 1 carry a taint the request does not tolerate (example.com/broken:NoExecute); "
        "1 do not fit the shared counters left beside the others"
    )
    assert _seen(through_simulate(docs)) == runtime
    assert _seen(through_explain(docs)) == runtime
