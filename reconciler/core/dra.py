"""DRA: what a pod set's ResourceClaimTemplates charge against quota.

Each device request of a referenced ResourceClaimTemplate is charged as
`count` units per pod of the logical resource its DeviceClass is mapped to
(`deviceClassMappings`). What Kueue cannot charge yet is reported with
Kueue's exact wording, so users see the same messages as with Kueue.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from reconciler.api import PodSpecView, ResourceClaimTemplate

from .podrequests import Amounts

__all__ = [
    "CLAIMS_NOT_SUPPORTED",
    "ClaimCharge",
    "DraProblem",
    "claim_charges",
    "uses_dra",
]

CLAIMS_NOT_SUPPORTED = "KueueDRAIntegration feature does not support use of resource claims"
CLAIMS_NOT_SUPPORTED_REQUEUE = "DRA resource claims not supported"


@dataclass(frozen=True, slots=True)
class DraProblem:
    """Why a workload cannot be charged.

    `retryable` problems (a template that does not exist yet) clear by
    themselves when the missing object appears; the others need the user to
    change the Job or the configuration.
    """

    message: str
    retryable: bool = False
    requeue_message: str | None = None


@dataclass(frozen=True, slots=True)
class ClaimCharge:
    per_pod: Amounts


def uses_dra(spec: PodSpecView) -> bool:
    return bool(spec.resource_claims)


def _field_error(path: str, kind: str, value: object, detail: str) -> str:
    """Format like apimachinery's field.Error: `<path>: <Type>: <value>: <detail>`."""
    body = kind if kind in ("Internal error", "Required value") else f"{kind}: {json.dumps(value)}"
    return f"{path}: {body}: {detail}" if detail else f"{path}: {body}"


def claim_charges(
    *,
    pod_set_index: int,
    pod_set_name: str,
    spec: PodSpecView,
    namespace: str,
    lookup_template: Callable[[str, str], ResourceClaimTemplate | None],
    mappings: Mapping[str, str],
) -> ClaimCharge | DraProblem:
    """Logical-resource amounts one pod of this pod set is charged for its claims.

    `mappings` maps DeviceClass name → logical resource name.
    """
    if any(c.resource_claim_name for c in spec.resource_claims):
        return DraProblem(CLAIMS_NOT_SUPPORTED, requeue_message=CLAIMS_NOT_SUPPORTED_REQUEUE)
    per_pod: Amounts = {}
    base = f"spec.podSets[{pod_set_index}].template.spec.resourceClaims"
    for j, claim in enumerate(spec.resource_claims):
        template_name = claim.resource_claim_template_name
        if not template_name:
            continue
        claim_path = f"{base}[{j}]"
        template = lookup_template(namespace, template_name)
        if template is None:
            return DraProblem(
                _field_error(
                    claim_path,
                    "Internal error",
                    None,
                    f"failed to get claim spec for ResourceClaimTemplate {template_name} in podset "
                    f'{pod_set_name}: resourceclaimtemplates.resource.k8s.io "{template_name}" not found',
                ),
                retryable=True,
            )
        for k, request in enumerate(template.spec.spec.devices.requests):
            req_path = f"{claim_path}.devices.requests[{k}]"
            prefix = f"ResourceClaimTemplate {template_name}: "
            if request.first_available is not None:
                return DraProblem(
                    _field_error(
                        req_path,
                        "Invalid value",
                        None,
                        prefix + "FirstAvailable device selection is not supported",
                    )
                )
            exact = request.exactly
            if exact is None:
                return DraProblem(
                    _field_error(
                        req_path,
                        "Invalid value",
                        None,
                        prefix + "Exactly must be set if FirstAvailable is nil",
                    )
                )
            if exact.admin_access:
                continue
            mode = exact.allocation_mode or "ExactCount"
            if mode == "All":
                return DraProblem(
                    _field_error(
                        f"{req_path}.exactly.allocationMode",
                        "Invalid value",
                        "All",
                        prefix + "AllocationMode 'All' is not supported",
                    )
                )
            if mode != "ExactCount":
                return DraProblem(
                    _field_error(
                        f"{req_path}.exactly.allocationMode",
                        "Invalid value",
                        mode,
                        prefix + f"unsupported allocation mode: {mode}",
                    )
                )
            if not exact.device_class_name:
                continue
            logical = mappings.get(exact.device_class_name)
            if logical is None:
                return DraProblem(
                    _field_error(
                        f"{claim_path}.resourceClaimTemplateName",
                        "Not found",
                        f"DeviceClass {exact.device_class_name} is not mapped in DRA configuration "
                        f"for podset {pod_set_name}",
                        "",
                    )
                )
            count = 1 if exact.count is None else exact.count
            per_pod[logical] = per_pod.get(logical, 0) + count
    return ClaimCharge(per_pod)
