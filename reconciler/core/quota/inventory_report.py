"""What a ClusterQueue's quota looks like next to the device inventory: its condition.

The condition ``DevicesCoverQuota`` (this controller's own; Kueue has none) is
False when a mapped DeviceClass of a resource the ClusterQueue covers does not
exist (``DeviceClassNotFound``), has selectors that do not compile
(``DeviceClassInvalid``), or when a flavor's nominal quota exceeds the devices
published on the flavor's nodes (``QuotaExceedsDevices``); True otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..devices.inventory import DeviceInventory
from ..model.clusterqueues import ClusterQueueModel
from ..primitives.quantity import format_amount

__all__ = [
    "DEVICES_COVER_QUOTA",
    "QuotaGap",
    "devices_cover_quota",
    "quota_gaps",
]

DEVICES_COVER_QUOTA = "DevicesCoverQuota"


@dataclass(frozen=True, slots=True)
class QuotaGap:
    """A flavor's nominal quota of a DRA-mapped resource, beside what its nodes publish."""

    flavor: str
    resource: str
    nominal: int
    published: int

    @property
    def over(self) -> int:
        return max(0, self.nominal - self.published)


def quota_gaps(model: ClusterQueueModel, inventory: DeviceInventory) -> list[QuotaGap]:
    """Every (flavor, DRA-mapped resource) of the ClusterQueue with its nominal quota and devices."""
    out: list[QuotaGap] = []
    for group in model.groups:
        for quota in group.flavors:
            for resource in sorted(group.covered):
                devices = inventory.devices(quota.name, resource)
                if devices is not None:
                    out.append(
                        QuotaGap(quota.name, resource, quota.nominal.get(resource, 0), devices.published)
                    )
    return out


def devices_cover_quota(model: ClusterQueueModel, inventory: DeviceInventory) -> tuple[str, str, str]:
    """The condition: (status, reason, message)."""
    gaps = quota_gaps(model, inventory)
    resources = sorted({g.resource for g in gaps})
    missing = [
        f"DeviceClass {c} (mapped to {r} in deviceClassMappings) does not exist"
        for r in resources
        for c in inventory.classes_of.get(r, ())
        if c in inventory.missing_classes
    ]
    if missing:
        return "False", "DeviceClassNotFound", "; ".join(missing)
    mapped = {c for r in resources for c in inventory.classes_of.get(r, ())}
    invalid = [e for e in inventory.class_errors if e.split(":", 1)[0].removeprefix("DeviceClass ") in mapped]
    if invalid:
        return "False", "DeviceClassInvalid", "; ".join(invalid)
    over = [
        f"flavor {g.flavor}: nominal quota {format_amount(g.resource, g.nominal)} {g.resource} exceeds the "
        f"{g.published} device(s) of DeviceClass {', '.join(inventory.classes_of[g.resource])} "
        f"published on its nodes"
        for g in gaps
        if g.over
    ]
    if over:
        return "False", "QuotaExceedsDevices", "; ".join(over)
    return "True", DEVICES_COVER_QUOTA, "The devices published on the flavors' nodes cover the nominal quota"
