"""Pods, pod templates and batch/v1 Jobs.

Pod templates are kept as `msgspec.Raw` (the exact bytes) because a Workload
must carry the Job's template unchanged; the fields admission needs are decoded
from it on demand with `pod_template_view`.
"""

from __future__ import annotations

import msgspec

from .meta import ApiStruct, Condition, ObjectMeta, Toleration

# The label the Job controller gives each pod of an Indexed Job: its completion index (Kueue's
# podIndexLabel for a Job's pod set, by which topology-aware scheduling ranks the pods).
JOB_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"


class ResourceRequirements(ApiStruct):
    requests: dict[str, str | int] = {}
    limits: dict[str, str | int] = {}


class ContainerView(ApiStruct):
    name: str = ""
    resources: ResourceRequirements = msgspec.field(default_factory=ResourceRequirements)
    restart_policy: str | None = None


class PodResourceClaim(ApiStruct):
    name: str
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class NodeSelectorRequirement(ApiStruct):
    key: str
    operator: str
    values: list[str] = []


class NodeSelectorTerm(ApiStruct):
    match_expressions: list[NodeSelectorRequirement] = []
    match_fields: list[NodeSelectorRequirement] = []


class NodeSelector(ApiStruct):
    node_selector_terms: list[NodeSelectorTerm] = []


class NodeAffinity(ApiStruct):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None


class Affinity(ApiStruct):
    node_affinity: NodeAffinity | None = None


class SchedulingGate(ApiStruct):
    name: str


class PodSpecView(ApiStruct):
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
    scheduling_gates: list[SchedulingGate] = []


class TemplateMeta(ApiStruct):
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}


class PodTemplateView(ApiStruct):
    metadata: TemplateMeta = msgspec.field(default_factory=TemplateMeta)
    spec: PodSpecView = msgspec.field(default_factory=PodSpecView)


def pod_template_view(raw: msgspec.Raw) -> PodTemplateView:
    """Decode the admission-relevant fields of a raw pod template."""
    return msgspec.json.decode(raw, type=PodTemplateView)


class ContainerStatus(ApiStruct):
    name: str = ""
    ready: bool = False


class PodResourceClaimStatus(ApiStruct):
    name: str
    resource_claim_name: str | None = None


class PodStatus(ApiStruct):
    phase: str = ""
    message: str = ""
    conditions: list[Condition] = []
    container_statuses: list[ContainerStatus] = []
    resource_claim_statuses: list[PodResourceClaimStatus] = []


class PodSpecBrief(ApiStruct):
    """What the controller keeps of a pod's spec: its node and claims; its requests (a node's
    free capacity for topology-aware scheduling); its gates and node selector (the ungater)."""

    node_name: str = ""
    resource_claims: list[PodResourceClaim] = []
    containers: list[ContainerView] = []
    init_containers: list[ContainerView] = []
    overhead: dict[str, str | int] = {}
    resources: ResourceRequirements | None = None
    node_selector: dict[str, str] = {}
    scheduling_gates: list[SchedulingGate] = []


class Pod(ApiStruct):
    metadata: ObjectMeta
    spec: PodSpecBrief = msgspec.field(default_factory=PodSpecBrief)
    status: PodStatus = msgspec.field(default_factory=PodStatus)


class ManagedPodSpecView(ApiStruct):
    """What the plain-pod integration reads of a pod's spec (the rest stays raw)."""

    scheduling_gates: list[SchedulingGate] = []
    node_selector: dict[str, str] = {}
    tolerations: list[Toleration] = []
    node_name: str = ""


class ManagedPod(ApiStruct, kw_only=True):
    """A pod as the plain-pod integration (framework ``pod``) sees it: a job of its own. The
    spec is kept raw: its Workload records it whole, as Kueue does."""

    api_version: str = "v1"
    kind: str = "Pod"
    metadata: ObjectMeta
    spec: msgspec.Raw = msgspec.Raw(b"{}")
    status: PodStatus = msgspec.field(default_factory=PodStatus)

    def spec_view(self) -> ManagedPodSpecView:
        return msgspec.json.decode(self.spec, type=ManagedPodSpecView)

    def as_pod(self) -> Pod:
        """The pod as the pod index keeps it."""
        return Pod(self.metadata, msgspec.json.decode(self.spec, type=PodSpecBrief), self.status)


# --- batch/v1 Job --------------------------------------------------------------------------


class JobSpec(ApiStruct):
    template: msgspec.Raw
    parallelism: int | None = None
    completions: int | None = None
    suspend: bool | None = None
    completion_mode: str | None = None


class JobStatus(ApiStruct):
    conditions: list[Condition] = []
    start_time: str | None = None
    active: int = 0
    ready: int | None = None
    succeeded: int = 0
    failed: int = 0


class Job(ApiStruct, kw_only=True):
    api_version: str = "batch/v1"
    kind: str = "Job"
    metadata: ObjectMeta
    spec: JobSpec
    status: JobStatus = msgspec.field(default_factory=JobStatus)


class PriorityClass(ApiStruct, kw_only=True):
    """scheduling.k8s.io/v1 PriorityClass: a pod priority, which a Workload may take as its own."""

    api_version: str = "scheduling.k8s.io/v1"
    kind: str = "PriorityClass"
    metadata: ObjectMeta
    value: int = 0
    global_default: bool = False
