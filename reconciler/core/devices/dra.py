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

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from reconciler.api import DeviceClaim, PodResourceClaim, PodSpecView, ResourceClaim, ResourceClaimTemplate

from ..primitives.podrequests import Amounts, add_amounts
from .dra_devices import (
    Capacities,
    Charging,
    DeviceAsk,
    DeviceDemand,
    MatchConstraint,
    Requests,
    charge_device,
    tolerations_of,
)
from .dra_first_available import Covered, first_available
from .dra_problems import (
    CLAIMS_NOT_SUPPORTED,
    CLAIMS_NOT_SUPPORTED_REQUEUE,
    INVENTORY_FIX,
    DraProblem,
    field_error,
    mode_problem,
    unmapped,
)

__all__ = [
    "CLAIMS_NOT_SUPPORTED",
    "CLAIMS_NOT_SUPPORTED_REQUEUE",
    "INVENTORY_FIX",
    "Capacities",
    "ClaimCharge",
    "ClaimLookup",
    "Covered",
    "DeviceAsk",
    "DeviceDemand",
    "DraProblem",
    "MatchConstraint",
    "TemplateLookup",
    "add_per_pod",
    "claim_charges",
    "uses_dra",
]

ClaimLookup = Callable[[str, str], ResourceClaim | None]
_NO_CAPACITIES: Capacities = {}
TemplateLookup = Callable[[str, str], ResourceClaimTemplate | None]


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
    # What one pod needs from the devices (per-pod claims; shared ones are allocated once) and the
    # claims' matchAttribute constraints, for the device inventory's checks.
    asks: list[DeviceAsk] = field(default_factory=list)
    constraints: list[MatchConstraint] = field(default_factory=list)


def uses_dra(spec: PodSpecView) -> bool:
    return bool(spec.resource_claims)


def _charge_requests(
    claim: DeviceClaim,
    *,
    path: str,
    prefix: str,
    label: str,
    charging: Charging,
    pod_set_name: str,
    unmapped_path: str,
    covered: Covered | None,
) -> Requests | DraProblem:
    out = Requests()
    mappings = charging.mappings
    for k, request in enumerate(claim.requests):
        req_path = f"{path}.devices.requests[{k}]"
        if request.first_available is not None:
            problem = first_available(
                request.first_available,
                path=req_path,
                prefix=prefix,
                what=f"{label}, request {request.name or k}",
                request=request.name or str(k),
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
                field_error(
                    req_path, "Invalid value", None, prefix + "Exactly must be set if FirstAvailable is nil"
                )
            )
        if exact.admin_access:
            continue
        mode = exact.allocation_mode or "ExactCount"
        problem = mode_problem(f"{req_path}.exactly.allocationMode", mode, prefix, charging.sized)
        if problem is not None:
            return problem
        if not exact.device_class_name:
            continue
        logical = mappings.get(exact.device_class_name)
        if logical is None:
            return unmapped(unmapped_path, exact.device_class_name, pod_set_name)
        problem = charge_device(
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
            ask=(request.name or str(k), "", tolerations_of(exact.tolerations)),
        )
        if problem is not None:
            return problem
    _constraints(claim, label, out)
    return out


def _constraints(claim: DeviceClaim, label: str, out: Requests) -> None:
    """The claim's matchAttribute constraints over the requests it charged (a request asking for
    admin access is not charged, so it is not checked either)."""
    for constraint in claim.constraints:
        if not constraint.match_attribute:
            continue
        named = set(constraint.requests)
        asks = tuple(
            a for a in out.asks if not named or a.request in named or f"{a.request}/{a.subrequest}" in named
        )
        if len(asks) > 1 or any(a.count is None or a.count > 1 for a in asks):
            out.constraints.append(MatchConstraint(label, constraint.match_attribute, asks))


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
    charging = Charging(mappings, capacities, sized)
    if lookup_claim is None and any(c.resource_claim_name for c in spec.resource_claims):
        return DraProblem(CLAIMS_NOT_SUPPORTED, requeue_message=CLAIMS_NOT_SUPPORTED_REQUEUE)
    charged = set() if charged_claims is None else charged_claims
    pod_set = _PodSet(pod_set_name, namespace, charging, covered)
    out = ClaimCharge()
    base = f"spec.podSets[{pod_set_index}].template.spec.resourceClaims"
    for j, pod_claim in enumerate(spec.resource_claims):
        claim_path = f"{base}[{j}]"
        if pod_claim.resource_claim_name and lookup_claim is not None:
            name = pod_claim.resource_claim_name
            if name in charged:
                continue
            shared = _shared_claim(pod_set, pod_claim, claim_path, lookup_claim)
            if isinstance(shared, DraProblem):
                return shared
            charged.add(name)
            _add_once(out, shared)
            continue
        per_pod = _template_claim(pod_set, pod_claim, claim_path, lookup_template)
        if isinstance(per_pod, DraProblem):
            return per_pod
        if per_pod is not None:
            add_per_pod(out, per_pod)
    return out


@dataclass(frozen=True, slots=True)
class _PodSet:
    """What charging the claims of one pod set depends on, besides the claims."""

    name: str
    namespace: str
    charging: Charging
    covered: Covered | None


def _shared_claim(
    pod_set: _PodSet, pod_claim: PodResourceClaim, claim_path: str, lookup_claim: ClaimLookup
) -> Requests | DraProblem:
    """The charge of a pre-created ResourceClaim the pods share (`resourceClaimName`)."""
    namespace, name = pod_set.namespace, pod_claim.resource_claim_name or ""
    claim = lookup_claim(namespace, name)
    if claim is None:
        return DraProblem(
            field_error(
                f"{claim_path}.resourceClaimName",
                "Not found",
                name,
                f"ResourceClaim {namespace}/{name} does not exist; create it (the pods of podset "
                f"{pod_set.name} share it) or name an existing one",
            ),
            retryable=True,
        )
    return _charge_requests(
        claim.spec.devices,
        path=f"ResourceClaim {namespace}/{name}: spec",
        prefix="",
        label=f"podset {pod_set.name}, claim {pod_claim.name} (ResourceClaim {name}, shared)",
        charging=pod_set.charging,
        pod_set_name=pod_set.name,
        unmapped_path=f"{claim_path}.resourceClaimName",
        covered=pod_set.covered,
    )


def _template_claim(
    pod_set: _PodSet, pod_claim: PodResourceClaim, claim_path: str, lookup_template: TemplateLookup
) -> Requests | DraProblem | None:
    """The per-pod charge of a claim made from a ResourceClaimTemplate (None: it names none)."""
    template_name = pod_claim.resource_claim_template_name
    if not template_name:
        return None
    template = lookup_template(pod_set.namespace, template_name)
    if template is None:
        return DraProblem(
            field_error(
                claim_path,
                "Internal error",
                None,
                f"failed to get claim spec for ResourceClaimTemplate {template_name} in podset "
                f'{pod_set.name}: resourceclaimtemplates.resource.k8s.io "{template_name}" not found',
            ),
            retryable=True,
        )
    return _charge_requests(
        template.spec.spec.devices,
        path=claim_path,
        prefix=f"ResourceClaimTemplate {template_name}: ",
        label=f"podset {pod_set.name}, claim {pod_claim.name}",
        charging=pod_set.charging,
        pod_set_name=pod_set.name,
        unmapped_path=f"{claim_path}.resourceClaimTemplateName",
        covered=pod_set.covered,
    )


def _add_once(out: ClaimCharge, shared: Requests) -> None:
    _add(
        out,
        shared,
        amounts=out.once,
        devices=out.devices_once,
        claims=out.claims_once,
        demands=out.demands_once,
    )


def add_per_pod(out: ClaimCharge, per_pod: Requests) -> None:
    _add(
        out,
        per_pod,
        amounts=out.per_pod,
        devices=out.devices_per_pod,
        claims=out.claims_per_pod,
        demands=out.demands_per_pod,
    )


def _add(
    out: ClaimCharge,
    found: Requests,
    *,
    amounts: Amounts,
    devices: Amounts,
    claims: Amounts,
    demands: list[DeviceDemand],
) -> None:
    """Add what a claim asks into one side of the charge (once for the Workload, or per pod):
    one place, so both sides always take the same things."""
    add_amounts(amounts, found.amounts)
    add_amounts(devices, found.devices)
    _count_claim(claims, found.devices)
    out.choices.extend(found.choices)
    demands.extend(found.demands)
    out.asks.extend(found.asks)
    out.constraints.extend(found.constraints)
