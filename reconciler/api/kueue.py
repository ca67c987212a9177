"""Kueue's objects (kueue.x-k8s.io/v1beta2): ResourceFlavor, ClusterQueue, Cohort, LocalQueue, Workload."""

from __future__ import annotations

import msgspec

from .meta import ApiStruct, Condition, LabelSelector, ObjectMeta, Taint, Toleration


class ResourceFlavorSpec(ApiStruct):
    node_labels: dict[str, str] = {}
    node_taints: list[Taint] = []
    tolerations: list[Toleration] = []
    # The Topology whose levels this flavor's nodes are grouped by (topology-aware scheduling).
    topology_name: str | None = None


class TopologyLevel(ApiStruct):
    node_label: str


class TopologySpec(ApiStruct):
    levels: list[TopologyLevel] = []


class Topology(ApiStruct, kw_only=True):
    """A hierarchy of node labels, from the highest level (e.g. block) to the lowest (hostname)."""

    api_version: str = "kueue.x-k8s.io/v1beta2"
    kind: str = "Topology"
    metadata: ObjectMeta
    spec: TopologySpec = msgspec.field(default_factory=TopologySpec)


class ResourceFlavor(ApiStruct, kw_only=True):
    api_version: str = "kueue.x-k8s.io/v1beta2"
    kind: str = "ResourceFlavor"
    metadata: ObjectMeta
    spec: ResourceFlavorSpec = msgspec.field(default_factory=ResourceFlavorSpec)


class ResourceQuota(ApiStruct):
    name: str
    nominal_quota: str | int
    borrowing_limit: str | int | None = None
    lending_limit: str | int | None = None


class FlavorQuotas(ApiStruct):
    name: str
    resources: list[ResourceQuota] = []


class ResourceGroup(ApiStruct):
    covered_resources: list[str] = []
    flavors: list[FlavorQuotas] = []


class FlavorFungibility(ApiStruct):
    when_can_borrow: str = "MayStopSearch"
    when_can_preempt: str = "TryNextFlavor"
    preference: str | None = None


class BorrowWithinCohort(ApiStruct):
    policy: str = "Never"
    max_priority_threshold: int | None = None


class ClusterQueuePreemption(ApiStruct):
    reclaim_within_cohort: str = "Never"
    within_cluster_queue: str = "Never"
    borrow_within_cohort: BorrowWithinCohort | None = None


class FairSharing(ApiStruct):
    """spec.fairSharing of a ClusterQueue or Cohort: its weight (a quantity, default 1)."""

    weight: str | int | float | None = None


class FairSharingStatus(msgspec.Struct, rename="camel"):
    """status.fairSharing: the rounded weighted share (always shown, as Kueue's API requires it)."""

    weighted_share: int = 0


class AdmissionScope(ApiStruct):
    """spec.admissionScope of a ClusterQueue: UsageBasedAdmissionFairSharing or NoAdmissionFairSharing."""

    admission_mode: str = ""


class ClusterQueueSpec(ApiStruct):
    resource_groups: list[ResourceGroup] = []
    namespace_selector: LabelSelector | None = None
    queueing_strategy: str = "BestEffortFIFO"
    cohort_name: str | None = None
    stop_policy: str | None = None
    flavor_fungibility: FlavorFungibility | None = None
    preemption: ClusterQueuePreemption | None = None
    fair_sharing: FairSharing | None = None
    admission_scope: AdmissionScope | None = None


class CohortSpec(ApiStruct):
    parent_name: str | None = None
    resource_groups: list[ResourceGroup] = []
    fair_sharing: FairSharing | None = None


class CohortStatus(ApiStruct):
    fair_sharing: FairSharingStatus | None = None


class Cohort(ApiStruct, kw_only=True):
    """A node of a cohort tree: quota of its own, and a parent (hierarchical cohorts)."""

    api_version: str = "kueue.x-k8s.io/v1beta2"
    kind: str = "Cohort"
    metadata: ObjectMeta
    spec: CohortSpec = msgspec.field(default_factory=CohortSpec)
    status: CohortStatus = msgspec.field(default_factory=CohortStatus)


class ResourceUsage(msgspec.Struct, rename="camel"):
    name: str
    total: str = "0"
    borrowed: str = "0"


class FlavorUsage(ApiStruct):
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
    # Set while fair sharing is on (dropped from patches while it is None).
    fair_sharing: FairSharingStatus | None = None


class ClusterQueue(ApiStruct, kw_only=True):
    api_version: str = "kueue.x-k8s.io/v1beta2"
    kind: str = "ClusterQueue"
    metadata: ObjectMeta
    spec: ClusterQueueSpec = msgspec.field(default_factory=ClusterQueueSpec)
    status: ClusterQueueStatus = msgspec.field(default_factory=ClusterQueueStatus)


class LocalQueueSpec(ApiStruct):
    cluster_queue: str = ""
    stop_policy: str | None = None
    # Its weight in admission fair sharing (a quantity, default 1).
    fair_sharing: FairSharing | None = None


class LocalQueueResourceUsage(msgspec.Struct, rename="camel"):
    name: str
    total: str = "0"


class LocalQueueFlavorUsage(msgspec.Struct, rename="camel"):
    name: str
    resources: list[LocalQueueResourceUsage] = []


class AdmissionFairSharingStatus(msgspec.Struct, rename="camel"):
    """status.fairSharing.admissionFairSharingStatus of a LocalQueue: its decayed usage, by resource."""

    consumed_resources: dict[str, str] = {}
    last_update: str = ""


class LocalQueueFairSharingStatus(msgspec.Struct, rename="camel"):
    """status.fairSharing of a LocalQueue (weightedShare always shown, as Kueue's API requires it)."""

    weighted_share: int = 0
    admission_fair_sharing_status: AdmissionFairSharingStatus | None = None


class LocalQueueStatus(msgspec.Struct, rename="camel"):
    """Counts are always shown, as in Kueue's API (no omitempty)."""

    conditions: list[Condition] = []
    flavors_reservation: list[LocalQueueFlavorUsage] = []
    flavors_usage: list[LocalQueueFlavorUsage] = []
    pending_workloads: int = 0
    reserving_workloads: int = 0
    admitted_workloads: int = 0
    # Set while admission fair sharing is on (dropped from patches while it is None).
    fair_sharing: LocalQueueFairSharingStatus | None = None


class LocalQueue(ApiStruct, kw_only=True):
    api_version: str = "kueue.x-k8s.io/v1beta2"
    kind: str = "LocalQueue"
    metadata: ObjectMeta
    spec: LocalQueueSpec = msgspec.field(default_factory=LocalQueueSpec)
    status: LocalQueueStatus = msgspec.field(default_factory=LocalQueueStatus)


class PodSetTopologyRequest(ApiStruct):
    """spec.podSets[].topologyRequest: Kueue's copy of the pod template's topology annotations."""

    required: str | None = None
    preferred: str | None = None
    unconstrained: bool | None = None
    pod_index_label: str | None = None
    sub_group_index_label: str | None = None
    sub_group_count: int | None = None
    pod_set_group_name: str | None = None
    pod_set_slice_required_topology: str | None = None
    pod_set_slice_size: int | None = None


class PodSet(ApiStruct):
    name: str
    template: msgspec.Raw
    # None only when a hand-written Workload omits it; the API defaults it to 1.
    count: int | None = None
    min_count: int | None = None
    topology_request: PodSetTopologyRequest | None = None


class PriorityClassRef(ApiStruct):
    """Where a Workload's priority came from: a WorkloadPriorityClass or a (pod) PriorityClass."""

    group: str
    kind: str
    name: str


class WorkloadSpec(ApiStruct):
    pod_sets: list[PodSet] = []
    queue_name: str = ""
    priority: int | None = None
    priority_class_ref: PriorityClassRef | None = None
    active: bool = True
    maximum_execution_time_seconds: int | None = None


class TopologyIndividualValues(ApiStruct):
    roots: list[str] = []
    prefix: str | None = None
    suffix: str | None = None


class TopologyLevelValues(ApiStruct):
    """One level's values in a slice: one for all its domains, or one per domain."""

    universal: str | None = None
    individual: TopologyIndividualValues | None = None


class TopologyPodCounts(ApiStruct):
    """The pods per domain of a slice: the same for all, or one count per domain."""

    universal: int | None = None
    individual: list[int] | None = None


class TopologyAssignmentSlice(ApiStruct):
    domain_count: int = 0
    values_per_level: list[TopologyLevelValues] = []
    pod_counts: TopologyPodCounts = msgspec.field(default_factory=TopologyPodCounts)


class TopologyAssignment(ApiStruct):
    """podSetAssignments[].topologyAssignment (v1beta2): the levels (node labels, highest first)
    and the domains as slices, each with its values per level and pods per domain."""

    levels: list[str] = []
    slices: list[TopologyAssignmentSlice] = []


class PodSetAssignment(ApiStruct):
    name: str
    flavors: dict[str, str] = {}
    resource_usage: dict[str, str] = {}
    count: int | None = None
    topology_assignment: TopologyAssignment | None = None


class Admission(ApiStruct):
    cluster_queue: str
    pod_set_assignments: list[PodSetAssignment] = []


class RequeueState(ApiStruct):
    count: int | None = None
    requeue_at: str | None = None


class PodSetRequest(ApiStruct):
    name: str
    resources: dict[str, str] = {}


class ReclaimablePod(ApiStruct):
    """Pods of a pod set that finished and no longer need their quota (Kueue's ReclaimablePods)."""

    name: str
    count: int = 0


class WorkloadStatus(ApiStruct):
    conditions: list[Condition] = []
    admission: Admission | None = None
    requeue_state: RequeueState | None = None
    resource_requests: list[PodSetRequest] = []
    accumulated_past_execution_time_seconds: int | None = None
    reclaimable_pods: list[ReclaimablePod] = []


class Workload(ApiStruct, kw_only=True):
    api_version: str = "kueue.x-k8s.io/v1beta2"
    kind: str = "Workload"
    metadata: ObjectMeta
    spec: WorkloadSpec = msgspec.field(default_factory=WorkloadSpec)
    status: WorkloadStatus = msgspec.field(default_factory=WorkloadStatus)


class WorkloadPriorityClass(ApiStruct, kw_only=True):
    api_version: str = "kueue.x-k8s.io/v1beta2"
    kind: str = "WorkloadPriorityClass"
    metadata: ObjectMeta
    value: int = 0
    description: str = ""
