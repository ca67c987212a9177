"""The API resources the controller reads and writes, and their URL paths."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

__all__ = [
    "CLUSTER_QUEUES",
    "COHORTS",
    "CUSTOM_RESOURCE_DEFINITIONS",
    "DEVICE_CLASSES",
    "EVENTS",
    "JOBS",
    "JOBSETS",
    "LEADERWORKERSETS",
    "LEASES",
    "LOCAL_QUEUES",
    "MUTATING_WEBHOOK_CONFIGURATIONS",
    "NAMESPACES",
    "NODES",
    "PODS",
    "PRIORITY_CLASSES",
    "RESOURCE_CLAIMS",
    "RESOURCE_CLAIM_TEMPLATES",
    "RESOURCE_FLAVORS",
    "RESOURCE_SLICES",
    "SECRETS",
    "STATEFULSETS",
    "SUBJECT_ACCESS_REVIEWS",
    "TOKEN_REVIEWS",
    "TOPOLOGIES",
    "VALIDATING_WEBHOOK_CONFIGURATIONS",
    "WORKLOADS",
    "WORKLOAD_PRIORITY_CLASSES",
    "Resource",
]


def _seg(value: str) -> str:
    if not value or "/" in value:
        raise ValueError(f"not a valid path segment: {value!r}")
    return quote(value, safe="")


@dataclass(frozen=True, slots=True)
class Resource:
    """One API resource (a kind at one group/version); the core group is ``""``."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def _prefix(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def list_path(self, namespace: str | None = None) -> str:
        """The collection: all namespaces when ``namespace`` is None (or cluster-scoped)."""
        if namespace is None:
            return f"{self._prefix()}/{self.plural}"
        if not self.namespaced:
            raise ValueError(f"{self.kind} is cluster-scoped: no namespace {namespace!r}")
        return f"{self._prefix()}/namespaces/{_seg(namespace)}/{self.plural}"

    def item_path(self, namespace: str | None, name: str, subresource: str | None = None) -> str:
        """One object, or one of its subresources (``status``)."""
        if self.namespaced and not namespace:
            raise ValueError(f"{self.kind} is namespaced: a namespace is needed for {name!r}")
        path = f"{self.list_path(namespace if self.namespaced else None)}/{_seg(name)}"
        return f"{path}/{_seg(subresource)}" if subresource else path


JOBS = Resource("batch", "v1", "jobs", "Job", namespaced=True)
JOBSETS = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", namespaced=True)
LEADERWORKERSETS = Resource(
    "leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet", namespaced=True
)
PODS = Resource("", "v1", "pods", "Pod", namespaced=True)
STATEFULSETS = Resource("apps", "v1", "statefulsets", "StatefulSet", namespaced=True)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
EVENTS = Resource("", "v1", "events", "Event", namespaced=True)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
RESOURCE_CLAIMS = Resource("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", namespaced=True)
RESOURCE_CLAIM_TEMPLATES = Resource(
    "resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", namespaced=True
)
DEVICE_CLASSES = Resource("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", namespaced=False)
RESOURCE_SLICES = Resource("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", namespaced=False)
WORKLOADS = Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload", namespaced=True)
CLUSTER_QUEUES = Resource("kueue.x-k8s.io", "v1beta2", "clusterqueues", "ClusterQueue", namespaced=False)
COHORTS = Resource("kueue.x-k8s.io", "v1beta2", "cohorts", "Cohort", namespaced=False)
LOCAL_QUEUES = Resource("kueue.x-k8s.io", "v1beta2", "localqueues", "LocalQueue", namespaced=True)
WORKLOAD_PRIORITY_CLASSES = Resource(
    "kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses", "WorkloadPriorityClass", namespaced=False
)
PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False)
TOPOLOGIES = Resource("kueue.x-k8s.io", "v1beta2", "topologies", "Topology", namespaced=False)
RESOURCE_FLAVORS = Resource(
    "kueue.x-k8s.io", "v1beta2", "resourceflavors", "ResourceFlavor", namespaced=False
)
SECRETS = Resource("", "v1", "secrets", "Secret", namespaced=True)
# Created only: the metrics server's delegated authentication and authorization.
TOKEN_REVIEWS = Resource("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", namespaced=False)
SUBJECT_ACCESS_REVIEWS = Resource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", namespaced=False
)
# Read and patched by name only: the conversion webhook's CA bundle in Kueue's converted CRDs.
CUSTOM_RESOURCE_DEFINITIONS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", namespaced=False
)
MUTATING_WEBHOOK_CONFIGURATIONS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    namespaced=False,
)
VALIDATING_WEBHOOK_CONFIGURATIONS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    namespaced=False,
)
