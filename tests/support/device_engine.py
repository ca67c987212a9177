"""Set-ups for device tests: node slices and inventories with GPUs, MIG partitions and memory capacities,
and an engine over them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from reconciler.api import DeviceClass
from reconciler.api.slices import ResourceSlice
from reconciler.core.devices.inventory import DeviceInventory, InventoryIndex
from reconciler.core.engine import Engine
from reconciler.core.scheduling.scheduler import Decision
from tests.support.builders import cluster_queue, flavor

DRIVER = "gpu.example.com"


GPU = "example.com/gpu"


MIG = "example.com/mig"


MEMORY = "example.com/gpu-memory"


WHOLE = f'device.attributes["{DRIVER}"].type == "gpu"'


PART = f'device.attributes["{DRIVER}"].type == "mig"'


MAPPINGS = {"gpu.example.com": GPU, "mig.example.com": MIG}


CAPACITIES = {"mig.example.com": [("memory", MEMORY)]}


GI = 1024**3


FLAVORS = {"t4": flavor("t4", {"pool": "t4"}), "a100": flavor("a100", {"pool": "a100"})}


def device_class(name: str, expression: str) -> DeviceClass:
    body = {"metadata": {"name": name}, "spec": {"selectors": [{"cel": {"expression": expression}}]}}
    return msgspec.convert(body, DeviceClass)


def node_slice(node: str, gpus: int, parts: Sequence[str] = (), **spec: Any) -> ResourceSlice:
    devices: list[dict[str, Any]] = [
        {
            "name": f"gpu-{i}",
            "attributes": {"type": {"string": "gpu"}},
            "capacity": {"memory": {"value": "40Gi"}},
        }
        for i in range(gpus)
    ]
    devices += [
        {"name": f"mig-{i}", "attributes": {"type": {"string": "mig"}}, "capacity": {"memory": {"value": m}}}
        for i, m in enumerate(parts)
    ]
    body = {
        "metadata": {"name": f"{node}-slice"},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
            **(spec or {"nodeName": node}),
        },
    }
    return msgspec.convert(body, ResourceSlice)


def inventory(
    *slices: ResourceSlice, capacities: Mapping[str, Sequence[str]] | None = None
) -> DeviceInventory:
    index = InventoryIndex()
    index.set_class("gpu.example.com", device_class("gpu.example.com", WHOLE))
    index.set_class("mig.example.com", device_class("mig.example.com", PART))
    for node, pool in (("node-a", "t4"), ("node-b", "t4"), ("node-c", "a100")):
        index.set_node(node, {"pool": pool})
    for s in slices:
        index.set_slice(s.metadata.name, s)
    names = capacities if capacities is not None else {c: [n for n, _ in p] for c, p in CAPACITIES.items()}
    return index.compute(FLAVORS, MAPPINGS, lambda pod: False, names)


def engine(quotas: Sequence[tuple[str, Mapping[str, int | str]]], sizes: DeviceInventory | None) -> Engine:
    state = Engine()
    for f in FLAVORS.values():
        state.set_flavor(f)
    state.set_cluster_queue(cluster_queue("cq", quotas))
    state.set_local_queue("ns", "lq", "cq")
    state.set_namespace("ns", {"kubernetes.io/metadata.name": "ns"})
    state.scheduler.sizes = sizes
    return state


def by_name(decisions: list[Decision]) -> dict[str, Decision]:
    return {d.key[1]: d for d in decisions}
