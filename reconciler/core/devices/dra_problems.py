"""What cannot be charged for a pod set's claims: `DraProblem`, with Kueue's wording (the
format of apimachinery's field errors) and, for what this controller charges beyond Kueue, the fix."""

from __future__ import annotations

import json
from dataclasses import dataclass

__all__ = [
    "CLAIMS_NOT_SUPPORTED",
    "CLAIMS_NOT_SUPPORTED_REQUEUE",
    "INVENTORY_FIX",
    "DraProblem",
    "field_error",
    "mode_problem",
    "unmapped",
]

CLAIMS_NOT_SUPPORTED = "KueueDRAIntegration feature does not support use of resource claims"
CLAIMS_NOT_SUPPORTED_REQUEUE = "DRA resource claims not supported"
INVENTORY_FIX = "set deviceInventory.mode to Report or Enforce in the Configuration"


@dataclass(frozen=True, slots=True)
class DraProblem:
    """Why a workload cannot be charged.

    `retryable` problems (a template or claim that does not exist yet) clear
    by themselves when the missing object appears; the others need the user
    to change the Job or the configuration. `unmapped_class` names the
    DeviceClass when the problem is that it has no mapping.
    """

    message: str
    retryable: bool = False
    requeue_message: str | None = None
    unmapped_class: str | None = None


def field_error(path: str, kind: str, value: object, detail: str) -> str:
    """Format like apimachinery's field.Error: `<path>: <Type>: <value>: <detail>`."""
    body = kind if kind in ("Internal error", "Required value") else f"{kind}: {json.dumps(value)}"
    return f"{path}: {body}: {detail}" if detail else f"{path}: {body}"


def unmapped(path: str, device_class: str, pod_set_name: str) -> DraProblem:
    return DraProblem(
        field_error(
            path,
            "Not found",
            f"DeviceClass {device_class} is not mapped in DRA configuration for podset {pod_set_name}",
            "",
        ),
        unmapped_class=device_class,
    )


def mode_problem(path: str, mode: str, prefix: str, sized: bool) -> DraProblem | None:
    if mode == "All":
        if sized:
            return None
        return DraProblem(
            field_error(
                path,
                "Invalid value",
                "All",
                prefix + "AllocationMode 'All' is not supported; this controller charges it from the "
                f"device inventory: {INVENTORY_FIX}",
            )
        )
    if mode != "ExactCount":
        return DraProblem(
            field_error(path, "Invalid value", mode, prefix + f"unsupported allocation mode: {mode}")
        )
    return None
