"""Benchmark: counting the device inventory (deviceInventory) of a large cluster.

NODES nodes with 8 GPUs each (one ResourceSlice per node, devices differing in
their uuid), 10 flavors: the first count (every device through the class's
CEL selectors), a count with nothing changed, and one after one slice changed.
Prints figures; asserts nothing. Run: .venv/bin/python bench/inventory.py
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import msgspec

from reconciler.api import DeviceClass, ResourceFlavor
from reconciler.api.slices import ResourceSlice
from reconciler.core.devices.inventory import InventoryIndex

DRIVER = "gpu.nvidia.com"
SELECTOR = f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == 'gpu'"


def node_slice(node: int, gpus: int, generation: int = 1) -> ResourceSlice:
    devices: list[dict[str, Any]] = [
        {
            "name": f"gpu-{g}",
            "attributes": {"type": {"string": "gpu"}, "uuid": {"string": f"GPU-{node}-{g}"}},
            "capacity": {"memory": {"value": "16Gi"}},
        }
        for g in range(gpus)
    ]
    spec = {"driver": DRIVER, "nodeName": f"n{node}", "pool": {"name": f"n{node}", "generation": generation}}
    return msgspec.convert(
        {"metadata": {"name": f"s{node}"}, "spec": {**spec, "devices": devices}}, ResourceSlice
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=1000)
    args = parser.parse_args()
    index = InventoryIndex()
    body = {"metadata": {"name": DRIVER}, "spec": {"selectors": [{"cel": {"expression": SELECTOR}}]}}
    index.set_class(DRIVER, msgspec.convert(body, DeviceClass))
    for i in range(args.nodes):
        index.set_node(f"n{i}", {"pool": f"p{i % 10}"})
        index.set_slice(f"s{i}", node_slice(i, 8))
    flavors = {
        f"p{k}": msgspec.convert(
            {"metadata": {"name": f"p{k}"}, "spec": {"nodeLabels": {"pool": f"p{k}"}}}, ResourceFlavor
        )
        for k in range(10)
    }
    mapping = {DRIVER: "nvidia.com/gpu"}
    timings = []
    for step in ("first count", "nothing changed", "one slice changed"):
        if step == "one slice changed":
            index.set_slice("s0", node_slice(0, 4, generation=2))
        started = time.perf_counter()
        inventory = index.compute(flavors, mapping, lambda pod: False)
        timings.append((step, time.perf_counter() - started))
    devices = sum(d.published for d in inventory.by_resource.values())
    print(f"{args.nodes} nodes x 8 GPUs, 10 flavors ({devices} devices)")
    for step, seconds in timings:
        print(f"  {step:18s} {seconds * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
