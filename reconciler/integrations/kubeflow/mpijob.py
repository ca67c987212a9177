"""MPIJob (kubeflow.org/v2beta1, mpi-operator's) as Kueue v0.18.1's `kubeflow.org/mpijob`
framework: a pod set per replica type of `spec.mpiReplicaSpecs`, Launcher before Worker, with
the rules of the training-operator's kinds (replicas.py: Kueue's mpijob package repeats them).

The launcher is a batch/v1 Job mpi-operator creates, controlled by the MPIJob: a child, never
admitted on its own (children.py); its pods and the workers' count for the MPIJob's Workload.

`spec.runLauncherAsWorker` changes no pod set (the launcher stays a pod set of its own, as in
Kueue). What Kueue's MPIJob webhook does with it, with its TopologyAwareScheduling gate on (its
default), is done here at creation too: an MPIJob with exactly a Launcher and a Worker that runs
its launcher as a worker gets ``kueue.x-k8s.io/pod-index-offset: "1"`` on its Worker template,
unless its Launcher template names a pod-set group (``kueue.x-k8s.io/podset-group-name``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from reconciler.admission.queue_rules import JobPolicy
from reconciler.admission.review import PatchOp, escape
from reconciler.api.kubeflow import MPIJOBS, MPIJob

from .door import ReplicaJobDoor
from .kind import replica_job_kind

__all__ = ["MPIJOB", "POD_INDEX_OFFSET_ANNOTATION", "REGISTRATION", "MPIJobDoor"]

LAUNCHER, WORKER = "Launcher", "Worker"
POD_INDEX_OFFSET_ANNOTATION = "kueue.x-k8s.io/pod-index-offset"
POD_SET_GROUP_ANNOTATION = "kueue.x-k8s.io/podset-group-name"


def _annotations(raw: msgspec.Raw) -> dict[str, Any] | None:
    """A pod template's annotations (None: the template has no metadata)."""
    template = msgspec.json.decode(raw)
    meta = template.get("metadata") if isinstance(template, dict) else None
    if not isinstance(meta, dict):
        return None
    found = meta.get("annotations")
    return found if isinstance(found, dict) else {}


def pod_index_offset_ops(obj: MPIJob) -> list[PatchOp]:
    """The JSON patch that marks the Worker's pod indexes as starting after the launcher's."""
    specs = obj.spec.mpi_replica_specs
    if not obj.spec.run_launcher_as_worker or len(specs) != 2 or WORKER not in specs or LAUNCHER not in specs:
        return []
    launcher = _annotations(specs[LAUNCHER].template) or {}
    if POD_SET_GROUP_ANNOTATION in launcher:
        return []
    where = f"/spec/mpiReplicaSpecs/{WORKER}/template/metadata"
    worker = _annotations(specs[WORKER].template)
    if worker is None:
        return [{"op": "add", "path": where, "value": {"annotations": {POD_INDEX_OFFSET_ANNOTATION: "1"}}}]
    if not worker:
        return [{"op": "add", "path": f"{where}/annotations", "value": {POD_INDEX_OFFSET_ANNOTATION: "1"}}]
    return [{"op": "add", "path": f"{where}/annotations/{escape(POD_INDEX_OFFSET_ANNOTATION)}", "value": "1"}]


@dataclass(frozen=True)
class MPIJobDoor(ReplicaJobDoor):
    """The replica-spec webhooks with Kueue's MPIJob defaulting of runLauncherAsWorker."""

    def default(self, obj: Any, policy: JobPolicy, *, default_queue_exists: bool) -> list[PatchOp]:
        ops = super().default(obj, policy, default_queue_exists=default_queue_exists)
        return ops + pod_index_offset_ops(obj) if policy.on(self.framework) else ops


MPIJOB, DOOR, REGISTRATION = replica_job_kind(
    "kubeflow.org/mpijob", MPIJOBS, MPIJob, "mpiReplicaSpecs", (LAUNCHER, WORKER), MPIJobDoor
)
