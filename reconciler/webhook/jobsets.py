"""JobSets at the door: Kueue's JobSet defaulting on create.

As Kueue's JobSet webhook (jobset.x-k8s.io/jobset among integrations.frameworks): a JobSet
without a queue name gets ``kueue.x-k8s.io/queue-name: default`` when its namespace has a
LocalQueue named ``default``; a JobSet the controller manages (a queue name, or
``manageJobsWithoutQueueName``) is stored with ``spec.suspend: true``, so the JobSet controller
creates no running Job before its Workload is admitted.
"""

from __future__ import annotations

from reconciler.api.jobset import JobSet
from reconciler.core.model.workloads import QUEUE_NAME_LABEL

from .jobs import DEFAULT_LOCAL_QUEUE, JobPolicy
from .review import PatchOp, escape

__all__ = ["default_jobset", "jobset_needs_default_queue_lookup"]


def jobset_needs_default_queue_lookup(jobset: JobSet, policy: JobPolicy) -> bool:
    """Whether defaulting depends on a LocalQueue named ``default`` in the JobSet's namespace."""
    return policy.jobset_enabled and QUEUE_NAME_LABEL not in jobset.metadata.labels


def default_jobset(jobset: JobSet, policy: JobPolicy, *, default_queue_exists: bool) -> list[PatchOp]:
    """The JSON patch that defaults a JobSet being created (empty when nothing changes)."""
    if not policy.jobset_enabled:
        return []
    ops: list[PatchOp] = []
    named = QUEUE_NAME_LABEL in jobset.metadata.labels
    if not named and default_queue_exists:
        named = True
        if jobset.metadata.labels:
            path = f"/metadata/labels/{escape(QUEUE_NAME_LABEL)}"
            ops.append({"op": "add", "path": path, "value": DEFAULT_LOCAL_QUEUE})
        else:
            labels = {QUEUE_NAME_LABEL: DEFAULT_LOCAL_QUEUE}
            ops.append({"op": "add", "path": "/metadata/labels", "value": labels})
    if (named or policy.manage_without_queue_name) and not jobset.spec.suspend:
        ops.append({"op": "add", "path": "/spec/suspend", "value": True})
    return ops
