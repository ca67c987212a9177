"""DRA objects (resource.k8s.io/v1): ResourceClaimTemplate, ResourceClaim, DeviceClass."""

from __future__ import annotations

from typing import Any

import msgspec

from .meta import ApiStruct, ObjectMeta, Toleration


class ExactDeviceRequest(ApiStruct):
    device_class_name: str = ""
    allocation_mode: str | None = None
    count: int | None = None
    admin_access: bool | None = None
    selectors: list[dict[str, Any]] = []
    # DRA consumable capacity: {"requests": {"memory": "10Gi"}}.
    capacity: dict[str, Any] | None = None
    # Device taints the request tolerates (key, operator Exists|Equal, value, effect).
    tolerations: list[Toleration] = []


class DeviceRequest(ApiStruct):
    name: str = ""
    exactly: ExactDeviceRequest | None = None
    first_available: list[dict[str, Any]] | None = None


class DeviceConstraint(ApiStruct):
    """``matchAttribute``: the devices of the named requests (all, when none are named) share
    one value of the attribute (e.g. ``resource.kubernetes.io/pcieRoot``)."""

    requests: list[str] = []
    match_attribute: str | None = None


class DeviceClaim(ApiStruct):
    requests: list[DeviceRequest] = []
    constraints: list[DeviceConstraint] = []


class ResourceClaimSpec(ApiStruct):
    devices: DeviceClaim = msgspec.field(default_factory=DeviceClaim)


class ResourceClaimTemplateSpec(ApiStruct):
    spec: ResourceClaimSpec = msgspec.field(default_factory=ResourceClaimSpec)


class ResourceClaimTemplate(ApiStruct, kw_only=True):
    api_version: str = "resource.k8s.io/v1"
    kind: str = "ResourceClaimTemplate"
    metadata: ObjectMeta
    spec: ResourceClaimTemplateSpec = msgspec.field(default_factory=ResourceClaimTemplateSpec)


class ConsumerReference(ApiStruct):
    resource: str = ""
    name: str = ""
    uid: str = ""
    api_group: str = ""


class ResourceClaimStatus(ApiStruct):
    allocation: dict[str, Any] | None = None
    reserved_for: list[ConsumerReference] = []


class ResourceClaim(ApiStruct, kw_only=True):
    api_version: str = "resource.k8s.io/v1"
    kind: str = "ResourceClaim"
    metadata: ObjectMeta
    spec: ResourceClaimSpec = msgspec.field(default_factory=ResourceClaimSpec)
    status: ResourceClaimStatus = msgspec.field(default_factory=ResourceClaimStatus)


class DeviceClassSpec(ApiStruct):
    selectors: list[dict[str, Any]] = []
    extended_resource_name: str | None = None


class DeviceClass(ApiStruct, kw_only=True):
    api_version: str = "resource.k8s.io/v1"
    kind: str = "DeviceClass"
    metadata: ObjectMeta
    spec: DeviceClassSpec = msgspec.field(default_factory=DeviceClassSpec)
