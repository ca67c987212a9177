"""What every kind of job shares: which jobs are managed, and the label a started job's pods
carry with their pod set's name."""

from __future__ import annotations

from typing import Protocol

from reconciler.api import ObjectMeta

from .workloads import QUEUE_NAME_LABEL

__all__ = ["PODSET_LABEL", "TERMINATED_PHASES", "is_managed"]


class _Object(Protocol):
    @property
    def metadata(self) -> ObjectMeta: ...


def is_managed(job: _Object, *, manage_without_queue_name: bool = False) -> bool:
    """A job is ours when it names a queue (or, if configured, always)."""
    return QUEUE_NAME_LABEL in job.metadata.labels or manage_without_queue_name


PODSET_LABEL = "kueue.x-k8s.io/podset"
# A pod's phases once it has ended.
TERMINATED_PHASES = ("Succeeded", "Failed")
