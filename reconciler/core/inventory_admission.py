"""Admission against the device inventory (``deviceInventory.mode: Enforce``).

Quota alone admits a workload that no published device can serve: the Job
starts, its pods stall unallocated, and the admin learns of it late. In
Enforce mode a flavor assignment that fits quota must also fit the devices of
the mapped DeviceClasses on the flavor's nodes that are still free:

    free = published - allocated - held
    held = what admitted workloads were charged in the flavor, less what is
           already allocated to the pods this controller started

A workload that does not fit waits with a message naming the flavor, the
class, what it needs and what is free; it is tried again when the inventory
or the quota in use changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .inventory import DeviceInventory
from .ledger import FlavorResource, Ledger
from .quantity import format_amount

__all__ = ["DEVICES_DO_NOT_COVER", "InventoryGate", "free_devices", "over_inventory"]

# How the pending message of a workload that fits quota but not the devices begins.
DEVICES_DO_NOT_COVER = "devices do not cover the workload"


def _admitted_usage(ledger: Ledger) -> dict[FlavorResource, int]:
    total: dict[FlavorResource, int] = {}
    for usage in ledger.snapshot().values():
        for fr, amount in usage.items():
            total[fr] = total.get(fr, 0) + amount
    return total


def free_devices(inventory: DeviceInventory, fr: FlavorResource, admitted: int) -> tuple[int, int] | None:
    """(published, free) devices for a flavor's resource; None when it is not DRA-mapped."""
    devices = inventory.devices(*fr)
    if devices is None:
        return None
    held = max(0, admitted - devices.allocated_managed)
    return devices.published, devices.published - devices.allocated - held


@dataclass(frozen=True)
class InventoryGate:
    """The check the scheduler runs on a flavor assignment that fits quota."""

    inventory: DeviceInventory

    def shortfall(self, usage: Mapping[FlavorResource, int], ledger: Ledger) -> str | None:
        """Why the devices do not cover ``usage`` (per flavor and resource), or None when they do."""
        admitted: dict[FlavorResource, int] | None = None
        reasons: list[str] = []
        for fr, needed in sorted(usage.items()):
            if needed <= 0 or self.inventory.devices(*fr) is None:
                continue
            if admitted is None:
                admitted = _admitted_usage(ledger)
            counts = free_devices(self.inventory, fr, admitted.get(fr, 0))
            assert counts is not None
            published, free = counts
            if needed <= free:
                continue
            flavor, resource = fr
            classes = ", ".join(self.inventory.classes_of.get(resource, ()))
            reasons.append(
                f"insufficient devices for {resource} in flavor {flavor}: DeviceClass {classes} needs "
                f"{format_amount(resource, needed)}, {max(0, free)} available "
                f"({published} published on the flavor's nodes)"
            )
        return ", ".join(reasons) or None


def over_inventory(inventory: DeviceInventory, flavor: str, resource: str, nominal: int) -> int:
    """How far a nominal quota exceeds the devices published for it (0 when covered or not DRA)."""
    devices = inventory.devices(flavor, resource)
    if devices is None:
        return 0
    return max(0, nominal - devices.published)
