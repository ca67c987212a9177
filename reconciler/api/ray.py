"""KubeRay (ray.io/v1): the fields the RayCluster and RayJob integrations read.

A cluster spec's head group and worker groups are kept raw: each pod template becomes a pod
set's template as it came, and starting and restoring rewrite the templates in place, so every
field KubeRay reads (rayStartParams, scaleStrategy, suspend of a group...) goes back as it came.
`worker_group` decodes the part of a worker group the integrations read.
"""

from __future__ import annotations

import msgspec

from .meta import ApiStruct, ObjectMeta
from .resources import Resource

__all__ = [
    "RAYCLUSTERS",
    "RAYJOBS",
    "RayCluster",
    "RayClusterSpec",
    "RayClusterStatus",
    "RayJob",
    "RayJobSpec",
    "RayJobStatus",
    "WorkerGroup",
    "worker_group",
]

RAYCLUSTERS = Resource("ray.io", "v1", "rayclusters", "RayCluster", namespaced=True)
RAYJOBS = Resource("ray.io", "v1", "rayjobs", "RayJob", namespaced=True)

_NO_RAW = msgspec.Raw(b"")


def _present(raw: msgspec.Raw) -> bool:
    return bytes(raw) not in (b"", b"null")


class _GroupTemplate(ApiStruct):
    template: msgspec.Raw = msgspec.Raw(b"{}")


class WorkerGroup(ApiStruct):
    """One worker group: `replicas` pods (times `numOfHosts`) from one pod template."""

    group_name: str = ""
    replicas: int | None = None
    num_of_hosts: int = 1
    template: msgspec.Raw = msgspec.Raw(b"{}")


def worker_group(raw: msgspec.Raw) -> WorkerGroup:
    return msgspec.json.decode(raw, type=WorkerGroup)


def head_template(raw: msgspec.Raw) -> msgspec.Raw:
    """The pod template of a raw headGroupSpec."""
    return msgspec.json.decode(raw, type=_GroupTemplate).template


class RayClusterSpec(ApiStruct):
    # Raw (msgspec decodes no optional Raw): empty when the spec has no head group.
    head_group_spec: msgspec.Raw = _NO_RAW
    worker_group_specs: list[msgspec.Raw] = []
    suspend: bool | None = None
    enable_in_tree_autoscaling: bool | None = None

    @property
    def head_template(self) -> msgspec.Raw:
        return head_template(self.head_group_spec) if _present(self.head_group_spec) else msgspec.Raw(b"{}")


class RayClusterStatus(ApiStruct):
    state: str = ""
    reason: str = ""


class RayCluster(ApiStruct, kw_only=True):
    api_version: str = "ray.io/v1"
    kind: str = "RayCluster"
    metadata: ObjectMeta
    spec: RayClusterSpec = msgspec.field(default_factory=RayClusterSpec)
    status: RayClusterStatus = msgspec.field(default_factory=RayClusterStatus)


class RayJobSpec(ApiStruct):
    suspend: bool = False
    shutdown_after_job_finishes: bool = False
    cluster_selector: dict[str, str] = {}
    submission_mode: str = ""
    # Raw, empty when absent (see RayClusterSpec.head_group_spec).
    ray_cluster_spec_raw: msgspec.Raw = msgspec.field(default=_NO_RAW, name="rayClusterSpec")
    submitter_pod_template_raw: msgspec.Raw = msgspec.field(default=_NO_RAW, name="submitterPodTemplate")

    @property
    def ray_cluster_spec(self) -> RayClusterSpec | None:
        if not _present(self.ray_cluster_spec_raw):
            return None
        return msgspec.json.decode(self.ray_cluster_spec_raw, type=RayClusterSpec)

    @property
    def submitter_pod_template(self) -> msgspec.Raw | None:
        return self.submitter_pod_template_raw if _present(self.submitter_pod_template_raw) else None


class _ClusterState(ApiStruct):
    state: str = ""


class RayJobStatus(ApiStruct):
    job_deployment_status: str = ""
    job_status: str = ""
    message: str = ""
    ray_cluster_name: str = ""
    ray_cluster_status: _ClusterState = msgspec.field(default_factory=_ClusterState)


class RayJob(ApiStruct, kw_only=True):
    api_version: str = "ray.io/v1"
    kind: str = "RayJob"
    metadata: ObjectMeta
    spec: RayJobSpec = msgspec.field(default_factory=RayJobSpec)
    status: RayJobStatus = msgspec.field(default_factory=RayJobStatus)
