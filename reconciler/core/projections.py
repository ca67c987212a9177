"""Slim typed views of the Kubernetes objects the controller reads.

Each struct keeps only the fields the controller uses and is decoded straight
from API JSON with msgspec, which is both faster and far smaller in memory than
a generic client model. Pod templates are kept as `msgspec.Raw` (the exact
bytes) because a Workload must carry the Job's template unchanged; the fields
admission needs are decoded from it on demand with `pod_template_view`.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

__all__ = [
    "ClusterQueue",
    "Condition",
    "DeviceClass",
    "Job",
    "LocalQueue",
    "Namespace",
    "ObjectMeta",
    "Pod",
    "PodTemplateView",
    "ResourceClaim",
    "ResourceClaimTemplate",
    "ResourceFlavor",
    "Workload",
    "decode",
    "pod_template_view",
]


class _Struct(msgspec.Struct, rename="camel", omit_defaults=True):
    """Base: camelCase on the wire, unknown fields ignored, defaults omitted."""


class OwnerReference(_Struct):
    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(_Struct):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    owner_references: list[OwnerReference] = []
    finalizers: list[str] = []


class Condition(msgspec.Struct, rename="camel"):
    """Reason and message are always written: the API requires them on Workloads."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None
    observed_generation: int | None = None


# --- label selectors, taints, tolerations -------------------------------------------------


class LabelSelectorRequirement(_Struct):
    key: str
    operator: str
    values: list[str] = []


class LabelSelector(_Struct):
    match_labels: dict[str, str] = {}
    match_expressions: list[LabelSelectorRequirement] = []


class Taint(_Struct):
    key: str
    effect: str
    value: str = ""


class Toleration(_Struct):
    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None


# --- pods and templates --------------------------------------------------------------------


class ResourceRequirements(_Struct):
    requests: dict[str, str | int] = {}
    limits: dict[str, str | int] = {}


class ContainerView(_Struct):
    name: str = ""
    resources: ResourceRequirements = msgspec.field(default_factory=ResourceRequirements)
    restart_policy: str | None = None


class PodResourceClaim(_Struct):
    name: str
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class NodeSelectorRequirement(_Struct):
    key: str
    operator: str
    values: list[str] = []


class NodeSelectorTerm(_Struct):
    match_expressions: list[NodeSelectorRequirement] = []
    match_fields: list[NodeSelectorRequirement] = []


class NodeSelector(_Struct):
    node_selector_terms: list[NodeSelectorTerm] = []


class NodeAffinity(_Struct):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None


class Affinity(_Struct):
    node_affinity: NodeAffinity | None = None


class PodSpecView(_Struct):
    containers: list[ContainerView] = []
    init_containers: list[ContainerView] = []
    overhead: dict[str, str | int] = {}
    resources: ResourceRequirements | None = None
    resource_claims: list[PodResourceClaim] = []
    node_selector: dict[str, str] = {}
    affinity: Affinity | None = None
    tolerations: list[Toleration] = []
    priority_class_name: str | None = None
    priority: int | None = None


class TemplateMeta(_Struct):
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}


class PodTemplateView(_Struct):
    metadata: TemplateMeta = msgspec.field(default_factory=TemplateMeta)
    spec: PodSpecView = msgspec.field(default_factory=PodSpecView)


def pod_template_view(raw: msgspec.Raw) -> PodTemplateView:
    """Decode the admission-relevant fields of a raw pod template."""
    return msgspec.json.decode(raw, type=PodTemplateView)


class ContainerStatus(_Struct):
    name: str = ""
    ready: bool = False


class PodResourceClaimStatus(_Struct):
    name: str
    resource_claim_name: str | None = None


class PodStatus(_Struct):
    phase: str = ""
    conditions: list[Condition] = []
    container_statuses: list[ContainerStatus] = []
    resource_claim_statuses: list[PodResourceClaimStatus] = []


class PodSpecBrief(_Struct):
    node_name: str = ""
    resource_claims: list[PodResourceClaim] = []


class Pod(_Struct):
    metadata: ObjectMeta
    spec: PodSpecBrief = msgspec.field(default_factory=PodSpecBrief)
    status: PodStatus = msgspec.field(default_factory=PodStatus)


# --- batch/v1 Job --------------------------------------------------------------------------


class JobSpec(_Struct):
    template: msgspec.Raw
    parallelism: int | None = None
    completions: int | None = None
    suspend: bool | None = None


class JobStatus(_Struct):
    conditions: list[Condition] = []
    start_time: str | None = None
    active: int = 0
    ready: int | None = None
    succeeded: int = 0
    failed: int = 0


class Job(_Struct, kw_only=True):
    api_version: str = "batch/v1"
    kind: str = "Job"
    metadata: ObjectMeta
    spec: JobSpec
    status: JobStatus = msgspec.field(default_factory=JobStatus)


# --- Kueue ---------------------------------------------------------------------------------


class ResourceFlavorSpec(_Struct):
    node_labels: dict[str, str] = {}
    node_taints: list[Taint] = []
    tolerations: list[Toleration] = []


class ResourceFlavor(_Struct, kw_only=True):
    api_version: str = "kueue.x-k8s.io/v1beta2"
    kind: str = "ResourceFlavor"
    metadata: ObjectMeta
    spec: ResourceFlavorSpec = msgspec.field(default_factory=ResourceFlavorSpec)


class ResourceQuota(_Struct):
    name: str
    nominal_quota: str | int
    borrowing_limit: str | int | None = None
    lending_limit: str | int | None = None


class FlavorQuotas(_Struct):
    name: str
    resources: list[ResourceQuota] = []


class ResourceGroup(_Struct):
    covered_resources: list[str] = []
    flavors: list[FlavorQuotas] = []


class ClusterQueueSpec(_Struct):
    resource_groups: list[ResourceGroup] = []
    namespace_selector: LabelSelector | None = None
    queueing_strategy: str = "BestEffortFIFO"
    cohort_name: str | None = None
    stop_policy: str | None = None


class ResourceUsage(msgspec.Struct, rename="camel"):
    name: str
    total: str = "0"
    borrowed: str = "0"


class FlavorUsage(_Struct):
    name: str
    resources: list[ResourceUsage] = []


class ClusterQueueStatus(msgspec.Struct, rename="camel"):
    """Counts are always shown, as in Kueue's API (no omitempty)."""

    conditions: list[Condition] = []
    flavors_reservation: list[FlavorUsage] = []
    flavors_usage: list[FlavorUsage] = []
    pending_workloads: int = 0
    reserving_workloads: int = 0
    admitted_workloads: int = 0


class ClusterQueue(_Struct, kw_only=True):
    api_version: str = "kueue.x-k8s.io/v1beta2"
    kind: str = "ClusterQueue"
    metadata: ObjectMeta
    spec: ClusterQueueSpec = msgspec.field(default_factory=ClusterQueueSpec)
    status: ClusterQueueStatus = msgspec.field(default_factory=ClusterQueueStatus)


class LocalQueueSpec(_Struct):
    cluster_queue: str = ""
    stop_policy: str | None = None


class LocalQueueResourceUsage(msgspec.Struct, rename="camel"):
    name: str
    total: str = "0"


class LocalQueueFlavorUsage(msgspec.Struct, rename="camel"):
    name: str
    resources: list[LocalQueueResourceUsage] = []


class LocalQueueStatus(msgspec.Struct, rename="camel"):
    """Counts are always shown, as in Kueue's API (no omitempty)."""

    conditions: list[Condition] = []
    flavors_reservation: list[LocalQueueFlavorUsage] = []
    flavors_usage: list[LocalQueueFlavorUsage] = []
    pending_workloads: int = 0
    reserving_workloads: int = 0
    admitted_workloads: int = 0


class LocalQueue(_Struct, kw_only=True):
    api_version: str = "kueue.x-k8s.io/v1beta2"
    kind: str = "LocalQueue"
    metadata: ObjectMeta
    spec: LocalQueueSpec = msgspec.field(default_factory=LocalQueueSpec)
    status: LocalQueueStatus = msgspec.field(default_factory=LocalQueueStatus)


class PodSet(_Struct):
    name: str
    template: msgspec.Raw
    # None only when a hand-written Workload omits it; the API defaults it to 1.
    count: int | None = None
    min_count: int | None = None


class WorkloadSpec(_Struct):
    pod_sets: list[PodSet] = []
    queue_name: str = ""
    priority: int | None = None
    active: bool = True


class PodSetAssignment(_Struct):
    name: str
    flavors: dict[str, str] = {}
    resource_usage: dict[str, str] = {}
    count: int | None = None


class Admission(_Struct):
    cluster_queue: str
    pod_set_assignments: list[PodSetAssignment] = []


class RequeueState(_Struct):
    count: int | None = None
    requeue_at: str | None = None


class PodSetRequest(_Struct):
    name: str
    resources: dict[str, str] = {}


class WorkloadStatus(_Struct):
    conditions: list[Condition] = []
    admission: Admission | None = None
    requeue_state: RequeueState | None = None
    resource_requests: list[PodSetRequest] = []


class Workload(_Struct, kw_only=True):
    api_version: str = "kueue.x-k8s.io/v1beta2"
    kind: str = "Workload"
    metadata: ObjectMeta
    spec: WorkloadSpec = msgspec.field(default_factory=WorkloadSpec)
    status: WorkloadStatus = msgspec.field(default_factory=WorkloadStatus)


# --- DRA (resource.k8s.io/v1) ---------------------------------------------------------------


class ExactDeviceRequest(_Struct):
    device_class_name: str = ""
    allocation_mode: str | None = None
    count: int | None = None
    admin_access: bool | None = None
    selectors: list[dict[str, Any]] = []


class DeviceRequest(_Struct):
    name: str = ""
    exactly: ExactDeviceRequest | None = None
    first_available: list[dict[str, Any]] | None = None


class DeviceClaim(_Struct):
    requests: list[DeviceRequest] = []


class ResourceClaimSpec(_Struct):
    devices: DeviceClaim = msgspec.field(default_factory=DeviceClaim)


class ResourceClaimTemplateSpec(_Struct):
    spec: ResourceClaimSpec = msgspec.field(default_factory=ResourceClaimSpec)


class ResourceClaimTemplate(_Struct, kw_only=True):
    api_version: str = "resource.k8s.io/v1"
    kind: str = "ResourceClaimTemplate"
    metadata: ObjectMeta
    spec: ResourceClaimTemplateSpec = msgspec.field(default_factory=ResourceClaimTemplateSpec)


class ConsumerReference(_Struct):
    resource: str = ""
    name: str = ""
    uid: str = ""
    api_group: str = ""


class ResourceClaimStatus(_Struct):
    allocation: dict[str, Any] | None = None
    reserved_for: list[ConsumerReference] = []


class ResourceClaim(_Struct, kw_only=True):
    api_version: str = "resource.k8s.io/v1"
    kind: str = "ResourceClaim"
    metadata: ObjectMeta
    spec: ResourceClaimSpec = msgspec.field(default_factory=ResourceClaimSpec)
    status: ResourceClaimStatus = msgspec.field(default_factory=ResourceClaimStatus)


class DeviceClassSpec(_Struct):
    selectors: list[dict[str, Any]] = []
    extended_resource_name: str | None = None


class DeviceClass(_Struct, kw_only=True):
    api_version: str = "resource.k8s.io/v1"
    kind: str = "DeviceClass"
    metadata: ObjectMeta
    spec: DeviceClassSpec = msgspec.field(default_factory=DeviceClassSpec)


class Namespace(_Struct, kw_only=True):
    api_version: str = "v1"
    kind: str = "Namespace"
    metadata: ObjectMeta


T = TypeVar("T")


def decode(data: bytes, kind: type[T]) -> T:
    """Decode API JSON into a projection; raises msgspec.ValidationError naming the field."""
    return msgspec.json.decode(data, type=kind)
