"""Kueue v0.18.1's own rules for a RayCluster or RayJob it manages (a queue name, or
``manageJobsWithoutQueueName``), on create and update, besides the queue-name rules of any job.

For a cluster spec (a RayCluster's, or a RayJob's ``rayClusterSpec``): no in-tree autoscaling
(Kueue allows it only for an elastic job, which this controller does not run), at most 9 worker
groups (Kueue's 10 pod sets less the head's), and no worker group named ``head``. For a RayJob:
no ``clusterSelector`` together with a ``rayClusterSpec``, a ``rayClusterSpec`` when there is no
``clusterSelector``, and ``shutdownAfterJobFinishes: true`` (its cluster would keep the quota).

Kueue reads one annotation more: ``kueue.x-k8s.io/elastic-job: "true"`` makes a RayCluster or
RayJob an elastic job (workload slices, with autoscaling); this controller refuses it by name.
"""

from __future__ import annotations

from reconciler.admission.fielderrors import FieldError, Path, forbidden, invalid, required, too_many
from reconciler.api import ObjectMeta
from reconciler.api.ray import RayCluster, RayClusterSpec, RayJob, worker_group

from .templates import HEAD

__all__ = ["ELASTIC_JOB_ANNOTATION", "MAX_WORKER_GROUPS", "raycluster_rules", "rayjob_rules"]

ELASTIC_JOB_ANNOTATION = "kueue.x-k8s.io/elastic-job"
# Kueue's MaxPodSets (10), less the head's pod set.
MAX_WORKER_GROUPS = 9

_CLUSTER_AUTOSCALING = (
    "a kueue managed job can use autoscaling only when the ElasticJobsViaWorkloadSlices feature gate "
    "is on and the job is an elastic job"
)
_JOB_AUTOSCALING = "a kueue managed job should only use autoscaling when workload slicing is enabled"


def _elastic(meta: ObjectMeta) -> list[FieldError]:
    value = meta.annotations.get(ELASTIC_JOB_ANNOTATION)
    if value != "true":
        return []
    path = Path("metadata.annotations").key(ELASTIC_JOB_ANNOTATION)
    return [
        invalid(
            path,
            value,
            "elastic jobs (workload slices) are not supported by this controller: remove the annotation "
            "(and spec enableInTreeAutoscaling) to run the job at its declared size",
        )
    ]


def _cluster_spec(spec: RayClusterSpec, path: Path, autoscaling: str) -> list[FieldError]:
    errors: list[FieldError] = []
    if spec.enable_in_tree_autoscaling:
        errors.append(invalid(path.child("enableInTreeAutoscaling"), True, autoscaling))
    groups = path.child("workerGroupSpecs")
    if len(spec.worker_group_specs) > MAX_WORKER_GROUPS:
        errors.append(too_many(groups, len(spec.worker_group_specs), MAX_WORKER_GROUPS))
    for i, raw in enumerate(spec.worker_group_specs):
        if worker_group(raw).group_name == HEAD:
            where = groups.item(i).child("groupName")
            errors.append(forbidden(where, f'"{HEAD}" is reserved for the head group'))
    return errors


def raycluster_rules(obj: RayCluster) -> list[FieldError]:
    """Kueue's rules for a managed RayCluster (and the elastic-job annotation refused)."""
    return _elastic(obj.metadata) + _cluster_spec(obj.spec, Path("spec"), _CLUSTER_AUTOSCALING)


def rayjob_rules(obj: RayJob) -> list[FieldError]:
    """Kueue's rules for a managed RayJob (and the elastic-job annotation refused)."""
    spec, path = obj.spec, Path("spec")
    errors = _elastic(obj.metadata)
    cluster = spec.ray_cluster_spec
    if spec.cluster_selector:
        if cluster is not None:
            detail = "a kueue managed job should not use an existing cluster"
            errors.append(invalid(path.child("clusterSelector"), spec.cluster_selector, detail))
        return errors  # a RayJob on an existing cluster is not Kueue's to manage
    if cluster is None:
        detail = "rayClusterSpec is required for Kueue-managed jobs that don't use clusterSelector"
        return [*errors, required(path.child("rayClusterSpec"), detail)]
    if not spec.shutdown_after_job_finishes:
        detail = "a kueue managed job should delete the cluster after finishing"
        errors.append(invalid(path.child("shutdownAfterJobFinishes"), False, detail))
    return errors + _cluster_spec(cluster, path.child("rayClusterSpec"), _JOB_AUTOSCALING)
