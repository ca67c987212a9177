"""DRA in an explanation: which quota resource each DeviceClass is charged as, and each claim's story.

Without the controller's Configuration (`--config`), the DeviceClass mappings are
learned from what the controller charged: a pod set whose claims ask for devices
of one DeviceClass, charged (in its Workload's `status.resourceRequests` or
`status.admission`) for exactly one resource its containers do not request, shows
that class mapped to that resource.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from reconciler.api import (
    DeviceClass,
    DeviceRequest,
    PodSpecView,
    ResourceClaim,
    ResourceClaimTemplate,
    Workload,
    pod_template_view,
)
from reconciler.core.primitives.podrequests import pod_requests
from reconciler.core.primitives.quantity import QuantityError, parse_quantity, to_amount

__all__ = ["ClaimStory", "learn_mappings", "tell_claims"]

Key = tuple[str, str]


def _charged(workload: Workload) -> dict[str, dict[str, str]]:
    """Per pod set, the resources the controller charged (admitted) or asked for (pending)."""
    admission = workload.status.admission
    if admission is not None:
        return {a.name: dict(a.resource_usage) for a in admission.pod_set_assignments}
    return {r.name: dict(r.resources) for r in workload.status.resource_requests}


def _device_classes(
    spec: PodSpecView, namespace: str, templates: Mapping[Key, ResourceClaimTemplate]
) -> set[str]:
    classes: set[str] = set()
    for claim in spec.resource_claims:
        template = templates.get((namespace, claim.resource_claim_template_name or ""))
        if template is None:
            continue
        for request in template.spec.spec.devices.requests:
            if request.exactly is not None and request.exactly.device_class_name:
                classes.add(request.exactly.device_class_name)
    return classes


def learn_mappings(
    workloads: Iterable[Workload], templates: Mapping[Key, ResourceClaimTemplate]
) -> dict[str, str]:
    """DeviceClass -> resource, as the controller's charges on Workloads show it."""
    learned: dict[str, str] = {}
    for workload in workloads:
        charged = _charged(workload)
        for pod_set in workload.spec.pod_sets:
            resources = charged.get(pod_set.name)
            if not resources:
                continue
            spec = pod_template_view(pod_set.template).spec
            classes = _device_classes(spec, workload.metadata.namespace, templates)
            if len(classes) != 1:
                continue
            try:
                containers = pod_requests(spec)
                extra = [
                    r for r, q in resources.items() if to_amount(r, parse_quantity(q)) and r not in containers
                ]
            except QuantityError:
                continue
            if len(extra) == 1:
                learned.setdefault(classes.pop(), extra[0])
    return learned


@dataclass
class ClaimStory:
    lines: list[str]
    findings: list[str]


def tell_claims(
    spec: PodSpecView,
    namespace: str,
    templates: Mapping[Key, ResourceClaimTemplate],
    device_classes: Mapping[str, DeviceClass] | None,
    mappings: Mapping[str, str],
    *,
    learned: bool,
    claims: Mapping[Key, ResourceClaim] | None = None,
) -> ClaimStory:
    """One line per claim of a pod template, and the problems with their fixes.

    `device_classes` is None when the DeviceClasses could not be read, `claims` when the
    ResourceClaims of the namespace could not be."""
    story = ClaimStory([], [])
    teller = _Teller(story, device_classes, mappings, learned)
    for claim in spec.resource_claims:
        if claim.resource_claim_name:
            shared_name = claim.resource_claim_name
            shared = None if claims is None else claims.get((namespace, shared_name))
            if claims is not None and shared is None:
                story.lines.append(
                    f"claim {claim.name}: the shared ResourceClaim {namespace}/{shared_name}, "
                    "which does not exist"
                )
                story.findings.append(
                    f"ResourceClaim {namespace}/{shared_name} (claim {claim.name}) does not exist: "
                    "create it; the Workload is charged as soon as it appears"
                )
                continue
            label = f"claim {claim.name}: the shared ResourceClaim {shared_name} (charged once per Workload)"
            if shared is None:
                story.lines.append(label)
                continue
            for request in shared.spec.devices.requests:
                teller.request(label, request)
            continue
        name = claim.resource_claim_template_name
        if not name:
            continue
        template = templates.get((namespace, name))
        if template is None:
            story.lines.append(
                f"claim {claim.name}: ResourceClaimTemplate {namespace}/{name}, which does not exist"
            )
            story.findings.append(
                f"ResourceClaimTemplate {namespace}/{name} (claim {claim.name}) does not exist: create it; "
                "the Workload is charged as soon as it appears"
            )
            continue
        for request in template.spec.spec.devices.requests:
            teller.request(f"claim {claim.name}: ResourceClaimTemplate {name}", request)
    return story


@dataclass
class _Teller:
    story: ClaimStory
    device_classes: Mapping[str, DeviceClass] | None
    mappings: Mapping[str, str]
    learned: bool

    def request(self, label: str, request: DeviceRequest) -> None:
        if request.first_available is not None:
            self._first_available(label, request)
            return
        exact = request.exactly
        if exact is None or not exact.device_class_name:
            self.story.lines.append(f"{label}, request {request.name}: no DeviceClass requested")
            return
        cls = exact.device_class_name
        count = 1 if exact.count is None else exact.count
        resource = self.mappings.get(cls)
        how = f"charged as {resource}" if resource else "not charged to any quota resource"
        self.story.lines.append(f"{label} asks for {count} device(s) of DeviceClass {cls}, {how}")
        self._check_class(cls)

    def _first_available(self, label: str, request: DeviceRequest) -> None:
        classes = [str(sub.get("deviceClassName") or "") for sub in request.first_available or []]
        mapped = [c for c in classes if c in self.mappings]
        self.story.lines.append(
            f"{label}, request {request.name}: firstAvailable over DeviceClasses {', '.join(classes)}; "
            "charged as the first one mapped to a resource its ClusterQueue has quota for (the "
            "Workload's annotation dra-quota-reconciler/first-available names it)"
        )
        if not mapped and not self.learned:
            self.story.findings.append(
                f"none of the DeviceClasses of request {request.name} ({', '.join(classes)}) is mapped in "
                "the controller's Configuration: add one to resources.deviceClassMappings"
            )

    def _check_class(self, cls: str) -> None:
        findings = self.story.findings
        if self.device_classes is not None and cls not in self.device_classes:
            findings.append(
                f"DeviceClass {cls} does not exist in the cluster: no DRA driver publishes it, so the "
                "scheduler cannot allocate the claim; install the driver or fix deviceClassName"
            )
        if cls in self.mappings:
            return
        if not self.learned:
            findings.append(
                f"DeviceClass {cls} is not mapped in the controller's Configuration: add it to "
                "resources.deviceClassMappings (e.g. name: nvidia.com/gpu, deviceClassNames: "
                f"[{cls}])"
            )
        else:
            findings.append(
                f"no Workload shows how DeviceClass {cls} is charged; if the controller says it is not "
                "mapped, add it to resources.deviceClassMappings; pass --config FILE (the controller's "
                "Configuration) to check"
            )
