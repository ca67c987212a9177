"""batch/v1 Jobs at the door: Kueue's defaulting (suspend, default LocalQueue) and validation.

Defaulting, as Kueue's Job webhook does on create: a Job without a queue name gets
``kueue.x-k8s.io/queue-name: default`` when its namespace has a LocalQueue named ``default``; a Job
the controller manages (a queue name, or ``manageJobsWithoutQueueName``) is stored with
``spec.suspend: true``, so the job controller never creates a pod before the Workload is
admitted. Validation: the queue name must be a LocalQueue name and cannot change while the Job
runs; ``kueue.x-k8s.io/max-exec-time-seconds`` must be a positive whole number.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from reconciler.api import Job, ObjectMeta
from reconciler.api.meta import LabelSelector
from reconciler.core.model.jobs import is_managed
from reconciler.core.model.workloads import QUEUE_NAME_LABEL

from .fielderrors import IMMUTABLE, FieldError, Path, invalid
from .names import dns1123_subdomain
from .review import PatchOp, escape

__all__ = [
    "DEFAULT_LOCAL_QUEUE",
    "MAX_EXEC_TIME_LABEL",
    "JobPolicy",
    "PodPolicy",
    "QueuedObject",
    "default_job",
    "needs_default_queue_lookup",
    "needs_default_queue_lookup_on_update",
    "validate_job",
    "validate_job_update",
]

DEFAULT_LOCAL_QUEUE = "default"
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
_LABELS = Path("metadata.labels")


@dataclass(frozen=True)
class PodPolicy:
    """What the Configuration says about plain pods."""

    enabled: bool = False  # `pod` is among integrations.frameworks
    own_namespace: str = "kueue-system"
    namespace_selector: LabelSelector | None = None  # managedJobsNamespaceSelector
    # The job kinds of the other enabled integrations, (apiVersion, kind): a pod they control
    # (through any chain of controllers) and that names a queue is theirs, not a job of its own.
    job_kinds: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True)
class JobPolicy:
    """What the Configuration says about Jobs."""

    enabled: bool = True  # batch/job is among integrations.frameworks
    manage_without_queue_name: bool = False
    jobset_enabled: bool = False  # jobset.x-k8s.io/jobset is among integrations.frameworks
    lws_enabled: bool = False  # leaderworkerset.x-k8s.io/leaderworkerset is among integrations.frameworks
    pods: PodPolicy = field(default_factory=PodPolicy)


class _Suspendable(Protocol):
    @property
    def suspend(self) -> bool | None: ...


class QueuedObject(Protocol):
    """A job of any kind, as the queue-name rules read it (a batch/v1 Job, a JobSet)."""

    @property
    def metadata(self) -> ObjectMeta: ...

    @property
    def spec(self) -> _Suspendable: ...


def _queue_name(job: QueuedObject) -> str:
    return job.metadata.labels.get(QUEUE_NAME_LABEL, "")


def needs_default_queue_lookup(job: Job, policy: JobPolicy) -> bool:
    """Whether defaulting depends on a LocalQueue named ``default`` existing in the Job's namespace."""
    return policy.enabled and not _queue_name(job)


def default_job(job: Job, policy: JobPolicy, *, default_queue_exists: bool) -> list[PatchOp]:
    """The JSON patch that defaults a Job being created (empty when nothing changes)."""
    if not policy.enabled:
        return []
    ops: list[PatchOp] = []
    labels = dict(job.metadata.labels)
    if not _queue_name(job) and default_queue_exists:
        labels[QUEUE_NAME_LABEL] = DEFAULT_LOCAL_QUEUE
        if job.metadata.labels:
            ops.append(
                {"op": "add", "path": f"/metadata/labels/{escape(QUEUE_NAME_LABEL)}", "value": "default"}
            )
        else:
            ops.append({"op": "add", "path": "/metadata/labels", "value": {QUEUE_NAME_LABEL: "default"}})
    defaulted = Job(metadata=ObjectMeta(labels=labels), spec=job.spec)
    if (
        is_managed(defaulted, manage_without_queue_name=policy.manage_without_queue_name)
        and not job.spec.suspend
    ):
        ops.append({"op": "add", "path": "/spec/suspend", "value": True})
    return ops


def validate_job(job: QueuedObject, policy: JobPolicy) -> list[FieldError]:
    if not policy.enabled:
        return []
    errors: list[FieldError] = []
    if QUEUE_NAME_LABEL in job.metadata.labels:
        errors += dns1123_subdomain(_LABELS.key(QUEUE_NAME_LABEL), _queue_name(job))
    if MAX_EXEC_TIME_LABEL in job.metadata.labels:
        text = job.metadata.labels[MAX_EXEC_TIME_LABEL]
        path = _LABELS.key(MAX_EXEC_TIME_LABEL)
        if not text.strip().lstrip("+-").isdigit():
            errors.append(invalid(path, text, f'strconv.Atoi: parsing "{text}": invalid syntax'))
        elif int(text) <= 0:
            errors.append(invalid(path, int(text), "should be greater than 0"))
    return errors


def needs_default_queue_lookup_on_update(new: QueuedObject, old: QueuedObject, policy: JobPolicy) -> bool:
    """Whether validating an update depends on a LocalQueue named ``default``: the queue name
    is being removed."""
    return policy.enabled and not _queue_name(new) and bool(_queue_name(old))


def validate_job_update(
    new: QueuedObject, old: QueuedObject, policy: JobPolicy, *, default_queue_exists: bool = False
) -> list[FieldError]:
    """Kueue's rules for an update: the queue name cannot change while the Job runs, nor be
    removed in a namespace with a default LocalQueue; the max-exec-time label cannot change
    unless the Job is and was suspended. Everything else (parallelism, completions, the
    template) may change: the controller replaces a Workload the Job no longer matches."""
    if not policy.enabled:
        return []
    errors = validate_job(new, policy)
    if not new.spec.suspend and _queue_name(new) != _queue_name(old):
        errors.append(invalid(_LABELS.key(QUEUE_NAME_LABEL), _queue_name(new), IMMUTABLE))
    if default_queue_exists and not _queue_name(new) and _queue_name(old):
        message = "queue-name must not be empty in namespace with default queue"
        errors.append(invalid(_LABELS.key(QUEUE_NAME_LABEL), "", message))
    if (not new.spec.suspend or not old.spec.suspend) and new.metadata.labels.get(
        MAX_EXEC_TIME_LABEL
    ) != old.metadata.labels.get(MAX_EXEC_TIME_LABEL):
        errors.append(
            invalid(
                _LABELS.key(MAX_EXEC_TIME_LABEL), new.metadata.labels.get(MAX_EXEC_TIME_LABEL, ""), IMMUTABLE
            )
        )
    return errors
