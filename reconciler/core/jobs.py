"""What the controller does to batch/v1 Jobs, as plain data.

Which Jobs are managed, when one has finished, and the merge patches that
suspend a Job or start it on its flavors' nodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import msgspec

from .projections import Job
from .workloads import QUEUE_NAME_LABEL

__all__ = [
    "JobOutcome",
    "is_managed",
    "job_outcome",
    "start_patch",
    "suspend_patch",
]


@dataclass(frozen=True, slots=True)
class JobOutcome:
    succeeded: bool
    message: str


def is_managed(job: Job, *, manage_without_queue_name: bool = False) -> bool:
    """A Job is ours when it names a queue (or, if configured, always)."""
    return QUEUE_NAME_LABEL in job.metadata.labels or manage_without_queue_name


def job_outcome(job: Job) -> JobOutcome | None:
    """The Job's Complete or Failed condition, if it has finished."""
    for condition in job.status.conditions:
        if condition.type in ("Complete", "Failed") and condition.status == "True":
            return JobOutcome(condition.type == "Complete", condition.message)
    return None


def suspend_patch() -> bytes:
    return b'{"spec":{"suspend":true}}'


def start_patch(node_selector: Mapping[str, str], pod_labels: Mapping[str, str]) -> bytes:
    """Unsuspend, with the flavors' nodeLabels merged into the pod template's nodeSelector."""
    template: dict[str, object] = {}
    if node_selector:
        template["spec"] = {"nodeSelector": dict(node_selector)}
    if pod_labels:
        template["metadata"] = {"labels": dict(pod_labels)}
    spec: dict[str, object] = {"suspend": False}
    if template:
        spec["template"] = template
    return msgspec.json.encode({"spec": spec})
