"""Admission against the device inventory (``deviceInventory.mode: Enforce``).

Quota alone admits a workload that no published device can serve: the Job
starts, its pods stall unallocated, and the admin learns of it late. In
Enforce mode a flavor assignment that fits quota must also fit the devices of
the mapped DeviceClasses on the flavor's nodes that are still free:

    free = published - allocated - held
    held = what admitted workloads were charged in the flavor, less what is
           already allocated to the pods this controller started

The free devices are those a request can still get (`DeviceInventory.available_for`): a
device with a NoSchedule/NoExecute taint the pod set's requests do not tolerate is not
free for them, nor are partitions the shared counters left cannot hold beside the others.
A claim with ``matchAttribute`` constraints also needs one node of the flavor whose free
devices serve all its constrained requests with one value of the attribute.

The check runs inside flavor assignment, per flavor: a flavor whose quota
fits but whose devices do not is passed over for the next one, as for quota.
A workload no flavor can take waits with a message naming the flavor, the
class, what it needs and what is free; it is tried again when the inventory
or the quota in use changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..devices.dra import DeviceAsk
from ..devices.dra_devices import Tolerations
from ..devices.inventory import DeviceInventory
from ..model.workloads import PodSetInfo
from ..primitives.quantity import format_amount
from .ledger import FlavorResource, Ledger

__all__ = ["DEVICES_DO_NOT_COVER", "InventoryGate", "free_devices"]

# The words of a flavor's reason when its quota fits but its free devices do not.
DEVICES_DO_NOT_COVER = "insufficient devices for"


def _admitted_usage(ledger: Ledger) -> dict[FlavorResource, int]:
    total: dict[FlavorResource, int] = {}
    for usage in ledger.snapshot().values():
        for fr, amount in usage.items():
            total[fr] = total.get(fr, 0) + amount
    return total


def free_devices(
    inventory: DeviceInventory, fr: FlavorResource, admitted: int, tolerations: Tolerations = ()
) -> tuple[int, int, str] | None:
    """(published, free, why some are not free) devices for a flavor's resource, for a request
    with ``tolerations``; None when it is not DRA-mapped."""
    devices = inventory.devices(*fr)
    if devices is None:
        return None
    held = max(0, admitted - devices.allocated_managed)
    availability = inventory.available_for(*fr, tolerations)
    return devices.published, availability.count - held, availability.notes()


def _tolerations(asks: tuple[DeviceAsk, ...], resource: str) -> Tolerations:
    """The device taints the pod set's requests of a resource tolerate: their tolerations when
    they all have the same, else none (a device counts only for requests that all tolerate it)."""
    kinds = {a.tolerations for a in asks if a.resource == resource}
    return next(iter(kinds)) if len(kinds) == 1 else ()


@dataclass(frozen=True)
class InventoryGate:
    """The check flavor assignment runs on a flavor whose quota fits."""

    inventory: DeviceInventory

    def check(self, ledger: Ledger) -> Callable[[FlavorResource, int, PodSetInfo], str | None]:
        """For one assignment: why a flavor's free devices cannot take ``needed`` of a resource
        for a pod set (its tolerations and constraints count)."""
        admitted: dict[FlavorResource, int] | None = None

        def short(fr: FlavorResource, needed: int, pod_set: PodSetInfo) -> str | None:
            nonlocal admitted
            if self.inventory.devices(*fr) is None:
                return None
            flavor, resource = fr
            for constraint in pod_set.constraints:
                if any(a.resource == resource for a in constraint.asks):
                    why = self.inventory.constraint_misfit(flavor, constraint)
                    if why is not None:
                        return f"{DEVICES_DO_NOT_COVER} {resource} in flavor {flavor}: {why}"
            if needed <= 0:
                return None
            if admitted is None:  # the ledger does not change while one workload is assigned
                admitted = _admitted_usage(ledger)
            counts = free_devices(
                self.inventory, fr, admitted.get(fr, 0), _tolerations(pod_set.asks, resource)
            )
            assert counts is not None
            published, free, notes = counts
            if needed <= free:
                return None
            classes = ", ".join(self.inventory.classes_of.get(resource, ()))
            return (
                f"{DEVICES_DO_NOT_COVER} {resource} in flavor {flavor}: DeviceClass {classes} needs "
                f"{format_amount(resource, needed)}, {max(0, free)} available "
                f"({published} published on the flavor's nodes" + (f"; {notes})" if notes else ")")
            )

        return short
