"""RayJob (ray.io/v1) behind the integration protocol, as Kueue v0.18.1's `ray.io/rayjob`
framework treats it.

Pod sets: those of its ``rayClusterSpec`` (``head``, one per worker group), then, when
``submissionMode`` is ``K8sJobMode`` (KubeRay's default), ``submitter`` (one pod: the
``submitterPodTemplate``, or KubeRay's default submitter: the head's image, requests of 500m CPU
and 200Mi memory). Starting sets ``spec.suspend: false`` and merges each pod set's start into its
template (the submitter's only when the RayJob has a ``submitterPodTemplate``, as in Kueue);
stopping sets ``spec.suspend: true`` (KubeRay then deletes the cluster and the submitter);
restoring gives the templates back what the Workload recorded. As Kueue reads a RayJob: it is
active unless its ``jobDeploymentStatus`` is ``Suspended`` or new; its pods are ready when its
cluster's state is ``ready``; it has finished when its ``jobDeploymentStatus`` is ``Complete`` or
``Failed`` (succeeded when its ``jobStatus`` is ``SUCCEEDED``, with its status message). A RayJob
with a ``clusterSelector`` runs on a cluster that exists already: Kueue skips it, and so does
this controller. The RayCluster KubeRay makes for a RayJob is the RayJob's child.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from reconciler.api import PodSet
from reconciler.api.ray import RAYJOBS, RayJob, head_template
from reconciler.api.resources import Resource
from reconciler.core.model.jobs import PODSET_LABEL

from ..base import Outcome, Patch, PodSetStart, SuspendableJob
from .raycluster import READY, cluster_spec_dict, templates_carry_start
from .templates import (
    by_name_injecting,
    by_name_restoring,
    cluster_pod_sets,
    inject,
    merge_diff,
    restore,
    rewrite_cluster_spec,
)

__all__ = ["RAYJOB", "SUBMITTER", "RayJobIntegration", "submitter_template"]

SUBMITTER = "submitter"
K8S_JOB_MODE = "K8sJobMode"
_INACTIVE = ("Suspended", "")  # KubeRay's Suspended and New job deployment states
_FINISHED = ("Complete", "Failed")
_SUCCEEDED = "SUCCEEDED"
_PODSET_LABEL_BYTES = PODSET_LABEL.encode()


def _head_image(obj: RayJob) -> str:
    cluster = obj.spec.ray_cluster_spec
    if cluster is None or bytes(cluster.head_group_spec) in (b"", b"null"):
        return ""
    template: dict[str, Any] = msgspec.json.decode(head_template(cluster.head_group_spec))
    containers = (template.get("spec") or {}).get("containers") or [{}]
    return str(containers[0].get("image", ""))


def submitter_template(obj: RayJob) -> msgspec.Raw:
    """The submitter's pod template: the RayJob's own, or KubeRay's default submitter."""
    own = obj.spec.submitter_pod_template
    if own is not None:
        return own
    container = {
        "name": "ray-job-submitter",
        "image": _head_image(obj),
        "resources": {
            "limits": {"cpu": "1", "memory": "1Gi"},
            "requests": {"cpu": "500m", "memory": "200Mi"},
        },
    }
    return msgspec.Raw(msgspec.json.encode({"spec": {"containers": [container], "restartPolicy": "Never"}}))


def _spec_dict(obj: RayJob) -> dict[str, Any]:
    """The parts of a RayJob's spec that hold pod templates, decoded as read."""
    out: dict[str, Any] = {}
    cluster = obj.spec.ray_cluster_spec
    if cluster is not None:
        out["rayClusterSpec"] = cluster_spec_dict(cluster)
    own = obj.spec.submitter_pod_template
    if own is not None:
        out["submitterPodTemplate"] = msgspec.json.decode(own)
    return out


class RayJobIntegration(SuspendableJob):
    """Kueue's `ray.io/rayjob` framework."""

    framework: str = "ray.io/rayjob"
    kind: str = "RayJob"
    api_version: str = "ray.io/v1"
    resource: Resource = RAYJOBS
    projection: type[Any] = RayJob

    def skip(self, obj: RayJob) -> bool:
        """A RayJob on an existing cluster (``clusterSelector``) is not managed (Kueue's Skip)."""
        return bool(obj.spec.cluster_selector)

    def pod_sets(self, obj: RayJob) -> list[PodSet]:
        cluster = obj.spec.ray_cluster_spec
        sets = [] if cluster is None else cluster_pod_sets(cluster)
        if obj.spec.submission_mode == K8S_JOB_MODE:
            sets.append(PodSet(name=SUBMITTER, template=submitter_template(obj), count=1))
        return sets

    def is_suspended(self, obj: RayJob) -> bool:
        return obj.spec.suspend

    def _rewritten(self, obj: RayJob, change: Any, submitter: Any) -> Any:
        old = _spec_dict(obj)
        new = msgspec.json.decode(msgspec.json.encode(old))
        if "rayClusterSpec" in new:
            rewrite_cluster_spec(new["rayClusterSpec"], change)
        if "submitterPodTemplate" in new and obj.spec.submission_mode == K8S_JOB_MODE:
            submitter(new["submitterPodTemplate"])
        return merge_diff(old, new)

    def start_patch(self, obj: RayJob, starts: Sequence[PodSetStart]) -> bytes:
        found = next((s for s in starts if s.name == SUBMITTER), None)
        diff = self._rewritten(obj, by_name_injecting(starts), inject(found))
        return msgspec.json.encode({"spec": {"suspend": False, **(diff or {})}})

    def suspend_patch(self, obj: RayJob) -> bytes:
        return b'{"spec":{"suspend":true}}'

    def restore_pending(self, obj: RayJob) -> bool:
        cluster = obj.spec.ray_cluster_spec
        if cluster is not None and templates_carry_start(cluster):
            return True
        return bytes(obj.spec.submitter_pod_template_raw).find(_PODSET_LABEL_BYTES) >= 0

    def restore_patch(self, obj: RayJob, recorded: Sequence[PodSet]) -> Patch | None:
        found = next((ps.template for ps in recorded if ps.name == SUBMITTER), None)
        diff = self._rewritten(obj, by_name_restoring(recorded), restore(found))
        return None if diff is None else Patch(msgspec.json.encode({"spec": diff}))

    def is_active(self, obj: RayJob) -> bool:
        return obj.status.job_deployment_status not in _INACTIVE

    def pods_ready(self, obj: RayJob) -> bool:
        return obj.status.ray_cluster_status.state == READY

    def pods_ready_count(self, obj: RayJob) -> int:
        """Every pod of the job once its cluster's state is ``ready`` (Kueue's PodsReady), else 0."""
        return sum(ps.count or 0 for ps in self.pod_sets(obj)) if self.pods_ready(obj) else 0

    def finished(self, obj: RayJob) -> Outcome | None:
        status = obj.status
        if status.job_deployment_status not in _FINISHED:
            return None
        return Outcome(status.job_status == _SUCCEEDED, status.message)

    def reclaimable_pods(self, obj: RayJob) -> Mapping[str, int]:
        return {}

    def owns(self, obj: RayJob, owner_kind: str, owner_api_version: str, owner_name: str) -> bool:
        return (owner_kind, owner_api_version, owner_name) == (self.kind, self.api_version, obj.metadata.name)


RAYJOB = RayJobIntegration()
