"""A reconciler harness whose device inventory is on (Enforce or another mode) for the given device
classes."""

from __future__ import annotations

from typing import Any

from reconciler.api import DeviceClass, ResourceFlavor
from reconciler.api.resources import DEVICE_CLASSES, NODES, RESOURCE_FLAVORS, RESOURCE_SLICES
from reconciler.api.slices import Node, ResourceSlice
from reconciler.config import parse_config
from reconciler.runtime.loop.reconciler import Reconciler
from tests.support.reconciler_harness import Harness, decode


def enforcing(mode: str = "Enforce", classes: tuple[str, ...] = ("gpu.nvidia.com",)) -> Harness:
    config = parse_config(
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "resources": {
                "deviceClassMappings": [{"name": "nvidia.com/gpu", "deviceClassNames": list(classes)}]
            },
            "deviceInventory": {"mode": mode},
        }
    )
    h = Harness()
    h.reconciler = Reconciler(config, h.actions.append, clock=lambda: "2026-01-01T00:00:00Z")
    return h


def add_inventory(h: Harness, docs: list[dict[str, Any]]) -> None:
    """ResourceFlavors, DeviceClasses, Nodes and ResourceSlices, each added as the watch shows it."""
    kinds = {
        "ResourceFlavor": (RESOURCE_FLAVORS, ResourceFlavor),
        "DeviceClass": (DEVICE_CLASSES, DeviceClass),
        "Node": (NODES, Node),
        "ResourceSlice": (RESOURCE_SLICES, ResourceSlice),
    }
    for doc in docs:
        resource, kind = kinds[doc["kind"]]
        h.event("ADDED", resource, decode(doc, kind))
