"""TrainJobs (Kueue's framework ``trainer.kubeflow.org/trainjob``, Kubeflow Trainer v2): the
integration (job.py; its JobSet built from the runtime in build.py), its webhooks and its
registration.

At the door, as Kueue's TrainJob webhook: a TrainJob without a queue name gets
``kueue.x-k8s.io/queue-name: default`` when its namespace has a LocalQueue named ``default``; one
the controller manages is stored with ``spec.suspend: true``; every TrainJob created gets Kueue's
own runtime patch (``manager: kueue.x-k8s.io/manager``, empty), which starting fills. Validation
is the queue-name rules of any job. The JobSet the trainer makes for a TrainJob is its child:
never admitted on its own, only suspended while the TrainJob is not admitted.
"""

from __future__ import annotations

from reconciler.admission.queue_rules import JobPolicy
from reconciler.admission.review import PatchOp
from reconciler.admission.suspendable import SuspendableKind
from reconciler.api.trainer import CLUSTER_TRAINING_RUNTIMES, TRAINING_RUNTIMES, TRAINJOBS, TrainJob

from ..registration import Access, Registration
from .build import KUEUE_PATCH_MANAGER
from .job import TRAINJOB, TrainJobIntegration

__all__ = ["REGISTRATION", "TRAINJOB", "TrainJobIntegration", "default_trainjob"]

_KUEUE_PATCH = {"manager": KUEUE_PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {}}}}


class _TrainJobDoor(SuspendableKind[TrainJob]):
    """Kueue's TrainJob defaulting: a suspendable kind's, and Kueue's runtime patch appended."""

    def default(self, obj: TrainJob, policy: JobPolicy, *, default_queue_exists: bool) -> list[PatchOp]:
        if not policy.on(self.framework):
            return []
        ops = super().default(obj, policy, default_queue_exists=default_queue_exists)
        if obj.spec.runtime_patches:
            ops.append({"op": "add", "path": "/spec/runtimePatches/-", "value": _KUEUE_PATCH})
        else:
            ops.append({"op": "add", "path": "/spec/runtimePatches", "value": [_KUEUE_PATCH]})
        return ops


_DOOR = _TrainJobDoor(
    TRAINJOB.framework, TrainJob, TRAINJOBS.group, TRAINJOBS.version, TRAINJOBS.plural, "trainjob"
)


def default_trainjob(job: TrainJob, policy: JobPolicy, *, default_queue_exists: bool) -> list[PatchOp]:
    """The JSON patch that defaults a TrainJob being created."""
    return _DOOR.default(job, policy, default_queue_exists=default_queue_exists)


REGISTRATION = Registration(
    TRAINJOB,
    webhooks=_DOOR.routes(
        mutate_why="Suspends a TrainJob that names a queue (and sets the default LocalQueue) and adds\n"
        "Kueue's runtime patch when it is created (integrations.frameworks: trainer.kubeflow.org/trainjob).",
        validate_why="Kueue's queue-name rules for TrainJobs\n"
        "(integrations.frameworks: trainer.kubeflow.org/trainjob).",
    ),
    access=(
        Access(
            TRAINJOBS.group,
            (TRAINJOBS.plural,),
            ("list", "watch", "patch"),
            "TrainJobs (integrations.frameworks: trainer.kubeflow.org/trainjob): suspended, and started\n"
            "and restored through Kueue's runtime patch, with a merge patch.",
        ),
        Access(
            TRAINJOBS.group,
            (f"{TRAINJOBS.plural}/finalizers",),
            ("update",),
            "Their Workloads block their deletion (OwnerReferencesPermissionEnforcement).",
        ),
        Access(
            TRAINJOBS.group,
            (TRAINING_RUNTIMES.plural, CLUSTER_TRAINING_RUNTIMES.plural),
            ("list", "watch"),
            "The runtimes TrainJobs name: their JobSet template makes the TrainJob's pod sets.",
        ),
    ),
)
