"""DRA: what a pod set's ResourceClaims charge against quota.

Each device request of a referenced ResourceClaimTemplate is charged as
`count` units per pod of the logical resource its DeviceClass is mapped to
(`deviceClassMappings`). What Kueue cannot charge is reported with Kueue's
exact wording, so users see the same messages as with Kueue; two things Kueue
rejects are charged here:

- `firstAvailable` requests: the first subrequest whose DeviceClass is mapped
  to a resource the Workload's ClusterQueue has quota for (covers) is charged
  (its `count`, per pod); when the ClusterQueue covers none of them (or is not
  known), the first mapped one. The choice is recorded so the Workload can show
  it. It depends on the configuration and the ClusterQueue's resources, never
  on what happens to be free: a Workload's charge does not change while it
  waits for room.
- `allocationMode: All` (with the device inventory on): the pod gets every device
  of the class on its node, so the charge is a `DeviceDemand` the flavor
  resolves at flavor assignment (the most devices of the class on one of its
  nodes). Without the inventory it is refused with Kueue's words and the fix.
- device capacities (a mapping's `capacity`, this controller's extension): each
  device is charged the capacity the request asks for
  (`exactly.capacity.requests[name]`), else, as a `DeviceDemand`, the largest
  capacity of the class's devices on the flavor's nodes.
- shared claims (`resourceClaimName`, a pre-created ResourceClaim): all pods
  of a pod set share the claim's devices, so they are charged once per
  Workload, on the first pod set that names the claim, whatever the pod
  count. Several Workloads naming the same claim are each charged once (the
  quota a Workload holds never depends on another one finishing first).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.api import DeviceRequest, PodSpecView, ResourceClaim, ResourceClaimTemplate

from .podrequests import Amounts, add_amounts
from .quantity import QuantityError, parse_quantity, to_amount

__all__ = [
    "CLAIMS_NOT_SUPPORTED",
    "ClaimCharge",
    "DeviceDemand",
    "DraProblem",
    "claim_charges",
    "uses_dra",
]

CLAIMS_NOT_SUPPORTED = "KueueDRAIntegration feature does not support use of resource claims"
CLAIMS_NOT_SUPPORTED_REQUEUE = "DRA resource claims not supported"

ClaimLookup = Callable[[str, str], ResourceClaim | None]
# DeviceClass -> (device capacity name, quota resource) pairs charged besides the device count.
Capacities = Mapping[str, Sequence[tuple[str, str]]]
_NO_CAPACITIES: Capacities = {}
INVENTORY_FIX = "set deviceInventory.mode to Report or Enforce in the Configuration"
# Whether the Workload's ClusterQueue has quota for a logical resource.
Covered = Callable[[str], bool]
TemplateLookup = Callable[[str, str], ResourceClaimTemplate | None]


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


@dataclass(frozen=True, slots=True)
class DeviceDemand:
    """A charge whose amount the flavor decides, from the devices published on its nodes.

    `count` devices per pod (None: allocationMode All, every device of the class on the
    pod's node); charged as that many devices of `resource`, or with `capacity`, as that
    capacity of each device: `per_device` when the request asks for an amount, else the
    largest capacity among the class's devices on the flavor's nodes.
    """

    resource: str
    device_class: str
    count: int | None
    capacity: str | None = None
    per_device: int | None = None
    # Where it comes from, for what is recorded on the Workload.
    label: str = ""
    # The request's own CEL selectors: only the class's devices they accept count.
    selectors: tuple[str, ...] = ()


@dataclass(slots=True)
class ClaimCharge:
    """What one pod set's claims charge: per pod (templates), once (shared claims), and why."""

    per_pod: Amounts = field(default_factory=dict)
    # Shared claims named by this pod set first: charged once for the Workload.
    once: Amounts = field(default_factory=dict)
    # firstAvailable choices, one readable line each.
    choices: list[str] = field(default_factory=list)
    # Devices per DeviceClass, per pod and once, and claims per DeviceClass (for metrics).
    devices_per_pod: Amounts = field(default_factory=dict)
    devices_once: Amounts = field(default_factory=dict)
    claims_per_pod: Amounts = field(default_factory=dict)
    claims_once: Amounts = field(default_factory=dict)
    # Charges the flavor decides (allocationMode All, device capacities), per pod and once.
    demands_per_pod: list[DeviceDemand] = field(default_factory=list)
    demands_once: list[DeviceDemand] = field(default_factory=list)


def uses_dra(spec: PodSpecView) -> bool:
    return bool(spec.resource_claims)


def _field_error(path: str, kind: str, value: object, detail: str) -> str:
    """Format like apimachinery's field.Error: `<path>: <Type>: <value>: <detail>`."""
    body = kind if kind in ("Internal error", "Required value") else f"{kind}: {json.dumps(value)}"
    return f"{path}: {body}: {detail}" if detail else f"{path}: {body}"


@dataclass(slots=True)
class _Requests:
    """The charge of one claim's device requests."""

    amounts: Amounts = field(default_factory=dict)
    devices: Amounts = field(default_factory=dict)
    choices: list[str] = field(default_factory=list)
    demands: list[DeviceDemand] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Charging:
    """What charging a device request depends on besides the request."""

    mappings: Mapping[str, str]
    capacities: Capacities
    # The device inventory is on: allocationMode All and device capacities can be charged.
    sized: bool


def _unmapped(path: str, device_class: str, pod_set_name: str) -> DraProblem:
    return DraProblem(
        _field_error(
            path,
            "Not found",
            f"DeviceClass {device_class} is not mapped in DRA configuration for podset {pod_set_name}",
            "",
        ),
        unmapped_class=device_class,
    )


def _mode_problem(path: str, mode: str, prefix: str, sized: bool) -> DraProblem | None:
    if mode == "All":
        if sized:
            return None
        return DraProblem(
            _field_error(
                path,
                "Invalid value",
                "All",
                prefix + "AllocationMode 'All' is not supported; this controller charges it from the "
                f"device inventory: {INVENTORY_FIX}",
            )
        )
    if mode != "ExactCount":
        return DraProblem(
            _field_error(path, "Invalid value", mode, prefix + f"unsupported allocation mode: {mode}")
        )
    return None


def _charge_device(
    into: _Requests,
    *,
    device_class: str,
    logical: str,
    mode: str,
    count: int,
    capacity: object,
    selectors: object,
    path: str,
    prefix: str,
    label: str,
    charging: _Charging,
) -> DraProblem | None:
    """Charge one request (or chosen subrequest) of a mapped DeviceClass: its devices, then the
    capacities its mapping charges. `path` is the request's, `capacity` its `capacity` field."""
    all_devices = mode == "All"
    cel = _expressions(selectors)
    if all_devices:
        into.demands.append(DeviceDemand(logical, device_class, None, label=label, selectors=cel))
        into.devices.setdefault(device_class, 0)
    else:
        into.amounts[logical] = into.amounts.get(logical, 0) + count
        into.devices[device_class] = into.devices.get(device_class, 0) + count
    wanted = capacity.get("requests") if isinstance(capacity, dict) else None
    requests = wanted if isinstance(wanted, dict) else {}
    for name, resource in charging.capacities.get(device_class, ()):
        asked = requests.get(name)
        if asked is None:
            if not charging.sized:
                return DraProblem(
                    _field_error(
                        f"{path}.capacity.requests",
                        "Required value",
                        None,
                        prefix + f"DeviceClass {device_class} charges its devices' {name} capacity as "
                        f"{resource}, which needs the device inventory: {INVENTORY_FIX}, or request "
                        f"the amount in capacity.requests.{name}",
                    )
                )
            count_of = None if all_devices else count
            into.demands.append(DeviceDemand(resource, device_class, count_of, name, None, label, cel))
            continue
        try:
            per_device = to_amount(resource, parse_quantity(asked))
        except QuantityError as err:
            return DraProblem(
                _field_error(f"{path}.capacity.requests.{name}", "Invalid value", asked, prefix + str(err))
            )
        if all_devices:
            into.demands.append(DeviceDemand(resource, device_class, None, name, per_device, label, cel))
        else:
            into.amounts[resource] = into.amounts.get(resource, 0) + count * per_device
    return None


def _expressions(selectors: object) -> tuple[str, ...]:
    """The CEL expressions of a request's ``selectors`` (``[{cel: {expression: ...}}]``)."""
    out: list[str] = []
    for selector in selectors if isinstance(selectors, list) else []:
        cel = selector.get("cel") if isinstance(selector, dict) else None
        expression = cel.get("expression") if isinstance(cel, dict) else None
        if isinstance(expression, str) and expression.strip():
            out.append(expression)
    return tuple(out)


def _first_available(
    subrequests: Sequence[Mapping[str, Any]],
    *,
    path: str,
    prefix: str,
    what: str,
    charging: _Charging,
    pod_set_name: str,
    into: _Requests,
    covered: Covered | None,
) -> DraProblem | None:
    """Charge the first mapped subrequest the ClusterQueue covers (else the first mapped one)."""
    mappings = charging.mappings
    mapped = [
        (index, sub, mappings[str(sub.get("deviceClassName") or "")])
        for index, sub in enumerate(subrequests)
        if str(sub.get("deviceClassName") or "") in mappings
    ]
    if covered is not None:
        mapped = [m for m in mapped if covered(m[2])] or mapped
    for index, sub, logical in mapped[:1]:
        device_class = str(sub.get("deviceClassName") or "")
        mode = str(sub.get("allocationMode") or "ExactCount")
        sub_path = f"{path}.firstAvailable[{index}]"
        problem = _mode_problem(f"{sub_path}.allocationMode", mode, prefix, charging.sized)
        if problem is not None:
            return problem
        raw_count = sub.get("count")
        count = raw_count if isinstance(raw_count, int) and not isinstance(raw_count, bool) else 1
        label = f"{what}: subrequest {sub.get('name') or index}"
        problem = _charge_device(
            into,
            device_class=device_class,
            logical=logical,
            mode=mode,
            count=count,
            capacity=sub.get("capacity"),
            selectors=sub.get("selectors"),
            path=sub_path,
            prefix=prefix,
            label=label,
            charging=charging,
        )
        if problem is not None:
            return problem
        amount = "all devices on the node" if mode == "All" else str(count)
        into.choices.append(f"{label} (DeviceClass {device_class} charged as {amount} {logical})")
        return None
    classes = sorted({str(s.get("deviceClassName") or "") for s in subrequests} - {""})
    if not classes:
        return DraProblem(
            _field_error(
                f"{path}.firstAvailable", "Required value", None, prefix + "no subrequest names a DeviceClass"
            )
        )
    return _unmapped(f"{path}.firstAvailable", classes[0], pod_set_name)


def _charge_requests(
    requests: Sequence[DeviceRequest],
    *,
    path: str,
    prefix: str,
    label: str,
    charging: _Charging,
    pod_set_name: str,
    unmapped_path: str,
    covered: Covered | None,
) -> _Requests | DraProblem:
    out = _Requests()
    mappings = charging.mappings
    for k, request in enumerate(requests):
        req_path = f"{path}.devices.requests[{k}]"
        if request.first_available is not None:
            problem = _first_available(
                request.first_available,
                path=req_path,
                prefix=prefix,
                what=f"{label}, request {request.name or k}",
                charging=charging,
                pod_set_name=pod_set_name,
                into=out,
                covered=covered,
            )
            if problem is not None:
                return problem
            continue
        exact = request.exactly
        if exact is None:
            return DraProblem(
                _field_error(
                    req_path, "Invalid value", None, prefix + "Exactly must be set if FirstAvailable is nil"
                )
            )
        if exact.admin_access:
            continue
        mode = exact.allocation_mode or "ExactCount"
        problem = _mode_problem(f"{req_path}.exactly.allocationMode", mode, prefix, charging.sized)
        if problem is not None:
            return problem
        if not exact.device_class_name:
            continue
        logical = mappings.get(exact.device_class_name)
        if logical is None:
            return _unmapped(unmapped_path, exact.device_class_name, pod_set_name)
        problem = _charge_device(
            out,
            device_class=exact.device_class_name,
            logical=logical,
            mode=mode,
            count=1 if exact.count is None else exact.count,
            capacity=exact.capacity,
            selectors=exact.selectors,
            path=f"{req_path}.exactly",
            prefix=prefix,
            label=f"{label}, request {request.name or k}",
            charging=charging,
        )
        if problem is not None:
            return problem
    return out


def _count_claim(into: Amounts, devices: Mapping[str, int]) -> None:
    for device_class in devices:
        into[device_class] = into.get(device_class, 0) + 1


def claim_charges(
    *,
    pod_set_index: int,
    pod_set_name: str,
    spec: PodSpecView,
    namespace: str,
    lookup_template: TemplateLookup,
    mappings: Mapping[str, str],
    lookup_claim: ClaimLookup | None = None,
    charged_claims: set[str] | None = None,
    covered: Covered | None = None,
    capacities: Capacities = _NO_CAPACITIES,
    sized: bool = False,
) -> ClaimCharge | DraProblem:
    """Logical-resource amounts this pod set is charged for its claims.

    `mappings` maps DeviceClass name → logical resource name. Without
    `lookup_claim`, a shared claim is refused as Kueue refuses it.
    `charged_claims` holds the shared claims earlier pod sets of the same
    Workload were charged for; the ones charged here are added to it.
    `covered` tells the resources the Workload's ClusterQueue has quota for
    (firstAvailable prefers those). `capacities`: the device capacities each DeviceClass's
    mapping charges; `sized`: the device inventory is on, so charges the flavor decides
    (allocationMode All, capacities read from ResourceSlices) are accepted as `DeviceDemand`s.
    """
    charging = _Charging(mappings, capacities, sized)
    if lookup_claim is None and any(c.resource_claim_name for c in spec.resource_claims):
        return DraProblem(CLAIMS_NOT_SUPPORTED, requeue_message=CLAIMS_NOT_SUPPORTED_REQUEUE)
    charged = set() if charged_claims is None else charged_claims
    out = ClaimCharge()
    base = f"spec.podSets[{pod_set_index}].template.spec.resourceClaims"
    for j, pod_claim in enumerate(spec.resource_claims):
        claim_path = f"{base}[{j}]"
        if pod_claim.resource_claim_name and lookup_claim is not None:
            name = pod_claim.resource_claim_name
            if name in charged:
                continue
            claim = lookup_claim(namespace, name)
            if claim is None:
                return DraProblem(
                    _field_error(
                        f"{claim_path}.resourceClaimName",
                        "Not found",
                        name,
                        f"ResourceClaim {namespace}/{name} does not exist; create it (the pods of podset "
                        f"{pod_set_name} share it) or name an existing one",
                    ),
                    retryable=True,
                )
            shared = _charge_requests(
                claim.spec.devices.requests,
                path=f"ResourceClaim {namespace}/{name}: spec",
                prefix="",
                label=f"podset {pod_set_name}, claim {pod_claim.name} (ResourceClaim {name}, shared)",
                charging=charging,
                pod_set_name=pod_set_name,
                unmapped_path=f"{claim_path}.resourceClaimName",
                covered=covered,
            )
            if isinstance(shared, DraProblem):
                return shared
            charged.add(name)
            add_amounts(out.once, shared.amounts)
            add_amounts(out.devices_once, shared.devices)
            _count_claim(out.claims_once, shared.devices)
            out.choices.extend(shared.choices)
            out.demands_once.extend(shared.demands)
            continue
        template_name = pod_claim.resource_claim_template_name
        if not template_name:
            continue
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
        per_pod = _charge_requests(
            template.spec.spec.devices.requests,
            path=claim_path,
            prefix=f"ResourceClaimTemplate {template_name}: ",
            label=f"podset {pod_set_name}, claim {pod_claim.name}",
            charging=charging,
            pod_set_name=pod_set_name,
            unmapped_path=f"{claim_path}.resourceClaimTemplateName",
            covered=covered,
        )
        if isinstance(per_pod, DraProblem):
            return per_pod
        add_amounts(out.per_pod, per_pod.amounts)
        add_amounts(out.devices_per_pod, per_pod.devices)
        _count_claim(out.claims_per_pod, per_pod.devices)
        out.choices.extend(per_pod.choices)
        out.demands_per_pod.extend(per_pod.demands)
    return out
