"""batch/v1 Job behind the integration protocol: one pod set, named "main" as Kueue names it.

At the door, as Kueue's Job webhook on create: a Job without a queue name gets
``kueue.x-k8s.io/queue-name: default`` when its namespace has a LocalQueue named ``default``; a Job
the controller manages (a queue name, or ``manageJobsWithoutQueueName``) is stored with
``spec.suspend: true``, so the job controller never creates a pod before the Workload is
admitted. Validation is the queue-name rules of any job (`admission.queue_rules`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reconciler.admission.queue_rules import JobPolicy
from reconciler.admission.review import PatchOp
from reconciler.admission.suspendable import SuspendableKind
from reconciler.api import Job, PodSet, pod_template_view
from reconciler.api.pods import JOB_INDEX_LABEL
from reconciler.api.resources import JOBS, Resource
from reconciler.core.model.jobs import PODSET_LABEL
from reconciler.core.model.workloads import JOB_POD_SET

from ..base import Outcome, Patch, PodSetStart, SuspendableJob, TopologyPlacement
from ..registration import Access, Registration
from .partial import job_pod_count, job_rules, job_update_rules, min_pod_count, parallelism_patch
from .patches import restore_patch, start_patch, suspend_patch, workload_template

__all__ = ["BATCH_JOB", "REGISTRATION", "BatchJob", "default_job"]

_PODSET_LABEL_BYTES = PODSET_LABEL.encode()
_CLEAR_START = Patch(b'{"status":{"startTime":null}}', "status")


class BatchJob(SuspendableJob):
    """Kueue's `batch/job` framework."""

    framework: str = "batch/job"
    kind: str = "Job"
    api_version: str = "batch/v1"
    resource: Resource = JOBS
    projection: type[Any] = Job
    # Its pods are placed in topology domains, released by their completion index (the ungater).
    topology_placement: TopologyPlacement | None = TopologyPlacement(JOB_INDEX_LABEL)

    def pod_sets(self, obj: Job) -> list[PodSet]:
        template = workload_template(obj.spec.template)
        count, least = job_pod_count(obj), min_pod_count(obj)
        return [PodSet(name=JOB_POD_SET, template=template, count=count, min_count=least)]

    def is_suspended(self, obj: Job) -> bool:
        return bool(obj.spec.suspend)

    def start_patch(self, obj: Job, starts: Sequence[PodSetStart]) -> bytes:
        start = _main_start(starts)
        view = pod_template_view(obj.spec.template) if start.tolerations or start.scheduling_gates else None
        current = view.spec.tolerations if view is not None else []
        gates = [g.name for g in view.spec.scheduling_gates] if view is not None else []
        sizes = parallelism_patch(obj, start.count) if start.count is not None else {}
        return start_patch(
            start.node_selector,
            start.labels,
            start.tolerations,
            current,
            start.annotations,
            sizes,
            start.scheduling_gates,
            gates,
        )

    def suspend_patch(self, obj: Job) -> bytes:
        return suspend_patch()

    def restore_pending(self, obj: Job) -> bool:
        return bytes(obj.spec.template).find(_PODSET_LABEL_BYTES) >= 0  # (find: cheaper than `in` on bytes)

    def restore_patch(self, obj: Job, recorded: Sequence[PodSet]) -> Patch | None:
        original = next((ps for ps in recorded if ps.name == JOB_POD_SET), None)
        if original is None:
            return None
        if obj.status.start_time:
            # The API allows template changes only to a suspended Job that has not started.
            return _CLEAR_START if obj.status.active == 0 else None
        sizes = parallelism_patch(obj, original.count or 1)
        if sizes.get("parallelism") == obj.spec.parallelism:
            sizes = {}
        current = pod_template_view(obj.spec.template)
        patch = restore_patch(current, pod_template_view(original.template), sizes)
        return None if patch is None else Patch(patch)

    def is_active(self, obj: Job) -> bool:
        return obj.status.active > 0

    def pods_ready(self, obj: Job) -> bool:
        return obj.status.succeeded + (obj.status.ready or 0) >= job_pod_count(obj)

    def pods_ready_count(self, obj: Job) -> int:
        return obj.status.succeeded + (obj.status.ready or 0)

    def finished(self, obj: Job) -> Outcome | None:
        """The Job's Complete or Failed condition, if it has finished."""
        for condition in obj.status.conditions:
            if condition.type in ("Complete", "Failed") and condition.status == "True":
                return Outcome(condition.type == "Complete", condition.message)
        return None

    def reclaimable_pods(self, obj: Job) -> Mapping[str, int]:
        """As Kueue's Job: once fewer completions remain than the parallelism, the pods beyond
        them are reclaimable (none for a parallelism of 1, or before any pod succeeded)."""
        parallelism = 1 if obj.spec.parallelism is None else obj.spec.parallelism
        succeeded = obj.status.succeeded
        if parallelism == 1 or succeeded == 0:
            return {}
        completions = parallelism if obj.spec.completions is None else obj.spec.completions
        remaining = completions - succeeded
        if remaining >= parallelism:
            return {}
        return {JOB_POD_SET: parallelism - remaining}

    def owns(self, obj: Job, owner_kind: str, owner_api_version: str, owner_name: str) -> bool:
        return owner_kind == "Job" and owner_api_version == "batch/v1" and owner_name == obj.metadata.name


def _main_start(starts: Sequence[PodSetStart]) -> PodSetStart:
    for start in starts:
        if start.name == JOB_POD_SET:
            return start
    return PodSetStart(JOB_POD_SET)


BATCH_JOB = BatchJob()


_DOOR = SuspendableKind(
    "batch/job",
    Job,
    JOBS.group,
    JOBS.version,
    JOBS.plural,
    "job",
    job_rules,
    job_update_rules,
    size=job_pod_count,
    size_field="spec.parallelism",
    elastic_job_kind=True,
    topology=True,
)


def default_job(job: Job, policy: JobPolicy, *, default_queue_exists: bool) -> list[PatchOp]:
    """The JSON patch that defaults a Job being created (empty when nothing changes)."""
    return _DOOR.default(job, policy, default_queue_exists=default_queue_exists)


REGISTRATION = Registration(
    BATCH_JOB,
    webhooks=_DOOR.routes(
        mutate_why="Suspends a Job that names a queue (and sets the default LocalQueue) when it is created."
    ),
    access=(
        Access(
            "batch",
            ("jobs",),
            ("get", "list", "watch", "patch"),
            "Jobs: suspended, started and their pod template restored with a merge patch; read by the\n"
            "pod webhook when they control a pod (its pods are the Job's, not jobs of their own).",
        ),
        Access(
            "batch",
            ("jobs/status",),
            ("patch",),
            "After an eviction, status.startTime is cleared (as Kueue does).",
        ),
        Access(
            "batch",
            ("jobs/finalizers",),
            ("update",),
            "A Workload is created for each Job with an owner reference that blocks the Job's deletion,\n"
            "which needs update on jobs/finalizers where OwnerReferencesPermissionEnforcement is on.",
        ),
        Access(
            "",
            ("pods",),
            ("patch",),
            "The pods of a Job placed in topology domains: the scheduling gate kueue.x-k8s.io/topology\n"
            "removed and the node selector of the pod's domain added with a merge patch.",
        ),
    ),
)
