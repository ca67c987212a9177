"""The queue-name rules of any job at the door, and what the Configuration says about jobs.

Kueue applies the same rules to every kind it manages: the queue name must be a LocalQueue name
and cannot change while the job runs, nor be removed in a namespace with a LocalQueue named
``default``; ``kueue.x-k8s.io/max-exec-time-seconds`` must be a positive whole number and cannot
change unless the job is and was suspended. Each integration's webhook applies them to its
objects (read through ``QueuedObject``) and adds its own defaulting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from reconciler.api import ObjectMeta
from reconciler.api.meta import LabelSelector
from reconciler.config_sections.frameworks import DEFAULT_FRAMEWORKS
from reconciler.core.model.workloads import QUEUE_NAME_LABEL

from .fielderrors import IMMUTABLE, FieldError, Path, invalid
from .names import dns1123_subdomain
from .review import PatchOp, escape

__all__ = [
    "DEFAULT_LOCAL_QUEUE",
    "MAX_EXEC_TIME_LABEL",
    "JobPolicy",
    "QueuedObject",
    "default_queue_ops",
    "needs_default_queue_lookup_on_update",
    "queue_name",
    "validate_job",
    "validate_job_update",
]

DEFAULT_LOCAL_QUEUE = "default"
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
_LABELS = Path("metadata.labels")


@dataclass(frozen=True)
class JobPolicy:
    """What the Configuration says about jobs at the door."""

    # integrations.frameworks: the webhooks of the others let their objects pass unchanged.
    frameworks: frozenset[str] = frozenset(DEFAULT_FRAMEWORKS)
    manage_without_queue_name: bool = False
    own_namespace: str = "kueue-system"
    namespace_selector: LabelSelector | None = None  # managedJobsNamespaceSelector
    # The job kinds of the enabled integrations that can be another's child, (apiVersion, kind):
    # a pod they control (through any chain of controllers) is theirs, not a job of its own.
    job_kinds: frozenset[tuple[str, str]] = frozenset()

    def on(self, framework: str) -> bool:
        return framework in self.frameworks


class _Suspendable(Protocol):
    @property
    def suspend(self) -> bool | None: ...


class QueuedObject(Protocol):
    """A job of any kind, as the queue-name rules read it."""

    @property
    def metadata(self) -> ObjectMeta: ...

    @property
    def spec(self) -> _Suspendable: ...


def queue_name(job: QueuedObject) -> str:
    return job.metadata.labels.get(QUEUE_NAME_LABEL, "")


def default_queue_ops(meta: ObjectMeta) -> list[PatchOp]:
    """The JSON patch that gives an object without a queue name the LocalQueue ``default``."""
    if meta.labels:
        return [
            {
                "op": "add",
                "path": f"/metadata/labels/{escape(QUEUE_NAME_LABEL)}",
                "value": DEFAULT_LOCAL_QUEUE,
            }
        ]
    return [{"op": "add", "path": "/metadata/labels", "value": {QUEUE_NAME_LABEL: DEFAULT_LOCAL_QUEUE}}]


def validate_job(job: QueuedObject) -> list[FieldError]:
    """The queue name and maximum execution time of a job being created or updated."""
    errors: list[FieldError] = []
    if QUEUE_NAME_LABEL in job.metadata.labels:
        errors += dns1123_subdomain(_LABELS.key(QUEUE_NAME_LABEL), queue_name(job))
    if MAX_EXEC_TIME_LABEL in job.metadata.labels:
        text = job.metadata.labels[MAX_EXEC_TIME_LABEL]
        path = _LABELS.key(MAX_EXEC_TIME_LABEL)
        if not text.strip().lstrip("+-").isdigit():
            errors.append(invalid(path, text, f'strconv.Atoi: parsing "{text}": invalid syntax'))
        elif int(text) <= 0:
            errors.append(invalid(path, int(text), "should be greater than 0"))
    return errors


def needs_default_queue_lookup_on_update(new: QueuedObject, old: QueuedObject) -> bool:
    """Whether validating an update depends on a LocalQueue named ``default``: the queue name
    is being removed."""
    return not queue_name(new) and bool(queue_name(old))


def validate_job_update(
    new: QueuedObject, old: QueuedObject, *, default_queue_exists: bool = False
) -> list[FieldError]:
    """Kueue's rules for an update: the queue name cannot change while the job runs, nor be
    removed in a namespace with a default LocalQueue; the max-exec-time label cannot change
    unless the job is and was suspended. Everything else (parallelism, completions, the
    template) may change: the controller replaces a Workload the job no longer matches."""
    errors = validate_job(new)
    if not new.spec.suspend and queue_name(new) != queue_name(old):
        errors.append(invalid(_LABELS.key(QUEUE_NAME_LABEL), queue_name(new), IMMUTABLE))
    if default_queue_exists and not queue_name(new) and queue_name(old):
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
