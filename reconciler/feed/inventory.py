"""The device inventory's objects into its index (what DRA drivers publish, per flavor)."""

from __future__ import annotations

from collections.abc import Iterable

from reconciler.api import DeviceClass, ResourceClaim
from reconciler.api.slices import Node, ResourceSlice
from reconciler.core.devices.inventory import InventoryIndex

__all__ = ["inventory_index"]


def inventory_index(
    classes: Iterable[DeviceClass],
    slices: Iterable[ResourceSlice],
    nodes: Iterable[Node],
    claims: Iterable[ResourceClaim] = (),
) -> InventoryIndex:
    """An index over DeviceClasses, ResourceSlices, Nodes (their labels) and allocated claims."""
    index = InventoryIndex()
    for device_class in classes:
        index.set_class(device_class.metadata.name, device_class)
    for resource_slice in slices:
        index.set_slice(resource_slice.metadata.name, resource_slice)
    for node in nodes:
        index.set_node(node.metadata.name, node.metadata.labels)
    for claim in claims:
        index.set_claim((claim.metadata.namespace, claim.metadata.name), claim)
    return index
