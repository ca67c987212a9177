"""Beyond Kueue: free DRA devices per node, counted from the ResourceSlices.

Kueue v0.18.1's TAS counts a node's capacity from its ``status.allocatable`` only, so GPUs
published through DRA are invisible to it (kubernetes-sigs/kueue#10548). Here a node's free
devices of a DeviceClass are the devices of the slices naming that node (``spec.nodeName``; only a
pool's newest generation) that the class's CEL selectors accept, that no ResourceClaim has been
allocated, and that carry no NoSchedule/NoExecute device taint. They are counted under the
resource name the class is mapped to (``deviceClassMappings``), so a pod set's device charge
(per pod) is placed against them as any other resource. Devices of slices that reach nodes by
``nodeSelector`` or ``allNodes`` are not per node and are not counted here.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from reconciler.api.slices import ResourceSlice

from ..devices.device_cel import CompiledDeviceClass, device_facts
from ..devices.device_pools import untolerated_taint
from ..devices.inventory_reading import DeviceId
from ..primitives.podrequests import Amounts

__all__ = ["free_devices_per_node"]


def free_devices_per_node(
    slices: Iterable[ResourceSlice],
    classes: Mapping[str, CompiledDeviceClass],
    allocated: Collection[DeviceId],
) -> dict[str, Amounts]:
    """Per node name: per resource name (a mapped DeviceClass), the free devices it publishes."""
    local = [s for s in slices if s.spec.node_name]
    newest: dict[tuple[str, str], int] = {}
    for piece in local:
        key = (piece.spec.driver, piece.spec.pool.name)
        newest[key] = max(newest.get(key, piece.spec.pool.generation), piece.spec.pool.generation)
    free: dict[str, Amounts] = {}
    for piece in local:
        spec = piece.spec
        if spec.pool.generation != newest[(spec.driver, spec.pool.name)] or spec.node_name is None:
            continue
        counts = free.setdefault(spec.node_name, {})
        for device in spec.devices:
            if (spec.driver, spec.pool.name, device.name) in allocated:
                continue
            if untolerated_taint(device, ()) is not None:
                continue
            facts = device_facts(spec.driver, device)
            for resource, device_class in classes.items():
                if device_class.selects(facts):
                    counts[resource] = counts.get(resource, 0) + 1
    return free
