"""The webhooks of the replica-spec kinds, as Kueue v0.18.1's base job webhook treats them.

On create, a job without a queue name gets ``kueue.x-k8s.io/queue-name: default`` when its
namespace has a LocalQueue named ``default``; a managed one is stored with
``spec.runPolicy.suspend: true`` (``spec.runPolicy`` made when missing), so its operator creates
no pod before its Workload is admitted. Validation: the queue-name rules of any job.

Kueue takes such a job's priority from ``spec.runPolicy.schedulingPolicy.priorityClass`` before
its pod templates' ``priorityClassName``; this controller reads the templates only, so a managed
job whose scheduling policy names a class the templates would not give is refused, naming the
field and the fix (the same class on the first replica's template, or a
``kueue.x-k8s.io/priority-class`` label, which both take first).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reconciler.admission.fielderrors import FieldError, Path, invalid
from reconciler.admission.queue_rules import JobPolicy, queue_name
from reconciler.admission.review import AdmissionRequest, PatchOp, Verdict, decode_object
from reconciler.admission.routes import Lookups
from reconciler.admission.suspendable import SuspendableKind
from reconciler.api import pod_template_view
from reconciler.api.kubeflow import ReplicaJob
from reconciler.core.primitives.priority import PRIORITY_CLASS_LABEL

from .replicas import ordered_replicas

__all__ = ["ReplicaJobDoor", "run_policy_suspend_ops"]

_PRIORITY_PATH = Path("spec.runPolicy.schedulingPolicy.priorityClass")


def run_policy_suspend_ops(obj: ReplicaJob) -> list[PatchOp]:
    """The JSON patch that sets ``spec.runPolicy.suspend: true``."""
    if obj.spec.run_policy is None:
        return [{"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}}]
    return [{"op": "add", "path": "/spec/runPolicy/suspend", "value": True}]


def template_priority_class(obj: ReplicaJob, order: tuple[str, ...]) -> str:
    """The first ``priorityClassName`` of the job's templates, in its pod sets' order."""
    for _, spec in ordered_replicas(obj, order):
        name = pod_template_view(spec.template).spec.priority_class_name or ""
        if name:
            return name
    return ""


@dataclass(frozen=True)
class ReplicaJobDoor(SuspendableKind[Any]):
    """`SuspendableKind` with the run policy's suspend flag and the priority-class refusal."""

    order: tuple[str, ...] = ()

    def priority_errors(self, obj: ReplicaJob, policy: JobPolicy) -> list[FieldError]:
        policy_class = obj.spec.run_policy.scheduling_policy if obj.spec.run_policy else None
        wanted = policy_class.priority_class if policy_class is not None else ""
        managed = bool(queue_name(obj)) or policy.manage_without_queue_name
        if not wanted or not managed or PRIORITY_CLASS_LABEL in obj.metadata.labels:
            return []
        if template_priority_class(obj, self.order) == wanted:
            return []
        return [
            invalid(
                _PRIORITY_PATH,
                wanted,
                "not supported by this controller (it takes a job's priority from its pod templates): "
                f"set priorityClassName: {wanted} on the first replica's pod template, or the label "
                f"{PRIORITY_CLASS_LABEL}",
            )
        ]

    async def validate(self, request: AdmissionRequest, policy: JobPolicy, lookups: Lookups) -> Verdict:
        verdict = await super().validate(request, policy, lookups)
        if not verdict.allowed or not policy.on(self.framework):
            return verdict
        obj, errors = decode_object(request.object, self.projection)
        if obj is None:
            return Verdict.deny(errors)
        return Verdict.judge(self.priority_errors(obj, policy))
