"""Extended resources backed by DRA (KEP-5004): a container asking for ``example.com/gpu: 2``, where
a DeviceClass declares ``spec.extendedResourceName: example.com/gpu`` (or asking for the implicit
``deviceclass.resource.kubernetes.io/<class>``), gets a ResourceClaim the scheduler makes: an
``ExactCount`` request of 2 devices of that class. With the rule on (Kueue's gate
``KueueDRAIntegrationExtendedResource``) such a request is charged as that claim would be: the
class's mapped resource (2 devices), the capacities its mapping charges, and what the device
inventory checks. A class that is not mapped leaves the extended resource charged as it is, as
Kueue does; a name no DeviceClass declares is a plain extended resource.

When several classes declare one name, the scheduler takes the one created last (the name
breaks a tie), and so does the charge (Kueue v0.18.1 takes the first mapped one it lists)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from reconciler.api import DeviceClass

from ..primitives.podrequests import Amounts
from .dra import ClaimCharge, add_per_pod
from .dra_devices import Charging, Requests, charge_device
from .dra_problems import INVENTORY_FIX, DraProblem, field_error

__all__ = ["IMPLICIT_PREFIX", "ExtendedResources", "charge_extended"]

IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"


@dataclass(frozen=True, slots=True)
class ExtendedResources:
    """Which DeviceClass serves each extended resource name, from the DeviceClasses known."""

    # spec.extendedResourceName -> the DeviceClass the scheduler picks for it.
    by_name: Mapping[str, str] = field(default_factory=dict)
    # Every known DeviceClass (the implicit deviceclass.resource.kubernetes.io/<class> names).
    classes: frozenset[str] = frozenset()

    @classmethod
    def of(cls, classes: Iterable[DeviceClass]) -> ExtendedResources:
        # The newest first; of two created at once, the name sorted first (a stable sort by name,
        # then by creation time, newest first; RFC 3339 times sort as the times do).
        ordered = sorted(classes, key=lambda c: c.metadata.name)
        ordered.sort(key=lambda c: c.metadata.creation_timestamp or "", reverse=True)
        picked: dict[str, str] = {}
        for device_class in ordered:
            declared = device_class.spec.extended_resource_name
            if declared:
                picked.setdefault(declared, device_class.metadata.name)
        return cls(picked, frozenset(c.metadata.name for c in ordered))

    def class_for(self, resource: str) -> str | None:
        """The DeviceClass whose devices serve `resource` (None: a plain extended resource)."""
        if resource.startswith(IMPLICIT_PREFIX):
            implicit = resource.removeprefix(IMPLICIT_PREFIX)
            return implicit if implicit in self.classes else None
        return self.by_name.get(resource)

    def names(self) -> frozenset[str]:
        """The extended resource names that DeviceClasses serve (for re-charging on a change)."""
        return frozenset(self.by_name) | frozenset(IMPLICIT_PREFIX + c for c in self.classes)


def charge_extended(
    per_pod: Amounts,
    into: ClaimCharge | None,
    *,
    resources: ExtendedResources,
    pod_set_index: int,
    pod_set_name: str,
    charging: Charging,
) -> ClaimCharge | DraProblem | None:
    """Take the DRA-backed extended resources of a mapped class out of `per_pod` (one pod's
    requests) and charge each as the scheduler's claim of that many devices, added to `into` (the
    pod set's claim charge, if any). None: nothing was DRA-backed and there was no claim charge."""
    out = into
    for resource in sorted(per_pod):
        device_class = resources.class_for(resource)
        logical = charging.mappings.get(device_class) if device_class is not None else None
        if device_class is None or logical is None:
            continue  # no DeviceClass, or one not mapped: charged as the extended resource itself
        count = per_pod[resource]
        path = f"spec.podSets[{pod_set_index}].template.spec.containers[*].resources.requests[{resource}]"
        caps = charging.capacities.get(device_class, ())
        if caps and not charging.sized:
            # The scheduler's claim asks for no capacity amount: each device's must be read.
            names = ", ".join(f"{name} (as {res})" for name, res in caps)
            return DraProblem(
                field_error(
                    path,
                    "Required value",
                    None,
                    f"extended resource {resource} is served by DeviceClass {device_class}, whose "
                    f"mapping charges its devices' capacity {names}, which needs the device "
                    f"inventory: {INVENTORY_FIX}",
                )
            )
        requests = Requests()
        problem = charge_device(
            requests,
            device_class=device_class,
            logical=logical,
            mode="ExactCount",
            count=count,
            capacity=None,
            selectors=None,
            path=path,
            prefix="",
            label=f"podset {pod_set_name}, extended resource {resource}",
            charging=charging,
            ask=(resource, "", ()),
        )
        if problem is not None:
            return problem
        del per_pod[resource]
        out = out if out is not None else ClaimCharge()
        add_per_pod(out, requests)
    return out
