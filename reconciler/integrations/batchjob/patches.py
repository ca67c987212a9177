"""The merge patches that suspend a batch/v1 Job, start it on its flavors' nodes and give its pod
template back what its Workload recorded, and the Workload a Job asks for."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from reconciler.api import Job, PodSet, PodTemplateView, Toleration, Workload
from reconciler.core.model.jobs import PODSET_LABEL
from reconciler.core.model.workloads import JOB_POD_SET, workload_for_object, workload_name_for_job
from reconciler.core.primitives.priority import ResolvedPriority
from reconciler.core.topology.requests import UNCONSTRAINED
from reconciler.core.topology.ungate import WORKLOAD_ANNOTATION

from .partial import job_pod_count, min_pod_count

__all__ = [
    "job_pod_count",
    "job_workload_name",
    "restore_patch",
    "start_patch",
    "suspend_patch",
    "workload_for_job",
    "workload_template",
]

# Labels the Job controller adds to a template; a Workload's template omits them.
_JOB_CONTROLLER_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid", "job-name")


def workload_template(raw: msgspec.Raw) -> msgspec.Raw:
    """A Job's pod template as its Workload records it: without the job controller's labels."""
    # (find, not `in`: `bytes in bytes` first tries the needle as an int, raising and clearing an error)
    data = bytes(raw)
    if data.find(b"\\") < 0 and data.find(b"controller-uid") < 0 and data.find(b"job-name") < 0:
        return raw  # no escapes, so no label key can be one of those: nothing to take out
    template = msgspec.json.decode(raw)
    if not isinstance(template, dict):
        return raw
    labels = template.get("metadata", {}).get("labels")
    if isinstance(labels, dict) and any(k in labels for k in _JOB_CONTROLLER_LABELS):
        for key in _JOB_CONTROLLER_LABELS:
            labels.pop(key, None)
        return msgspec.Raw(msgspec.json.encode(template))
    return raw


def job_workload_name(job_name: str, job_uid: str) -> str:
    """The name of a Job's Workload (`job-<name>-<hash>`)."""
    return workload_name_for_job(job_name, job_uid, "Job", "batch")


def workload_for_job(job: Job, priority: ResolvedPriority | None = None) -> Workload:
    """The Workload Kueue creates for a queue-labelled batch/v1 Job (with its resolved priority)."""
    template, count = workload_template(job.spec.template), job_pod_count(job)
    pod_set = PodSet(name=JOB_POD_SET, template=template, count=count, min_count=min_pod_count(job))
    return workload_for_object(job.metadata, "batch/v1", "Job", [pod_set], priority)


def suspend_patch() -> bytes:
    return b'{"spec":{"suspend":true}}'


def start_patch(
    node_selector: Mapping[str, str],
    pod_labels: Mapping[str, str],
    tolerations: Sequence[Toleration] = (),
    current_tolerations: Sequence[Toleration] = (),
    pod_annotations: Mapping[str, str] | None = None,
    sizes: Mapping[str, int] | None = None,
    gates: Sequence[str] = (),
    current_gates: Sequence[str] = (),
) -> bytes:
    """Unsuspend, with the flavors' nodeLabels merged into the pod template's nodeSelector and
    their tolerations appended to the template's own (a merge patch replaces the whole list), and
    `gates` (the topology gate) added to the template's scheduling gates (`current_gates`)."""
    template: dict[str, object] = {}
    spec_patch: dict[str, object] = {}
    if node_selector:
        spec_patch["nodeSelector"] = dict(node_selector)
    added = [t for t in tolerations if t not in current_tolerations]
    if added:
        spec_patch["tolerations"] = msgspec.to_builtins([*current_tolerations, *added])
    new_gates = [g for g in gates if g not in current_gates]
    if new_gates:
        spec_patch["schedulingGates"] = [{"name": g} for g in (*current_gates, *new_gates)]
    if spec_patch:
        template["spec"] = spec_patch
    metadata: dict[str, object] = {}
    if pod_labels:
        metadata["labels"] = dict(pod_labels)
    if pod_annotations:
        metadata["annotations"] = dict(pod_annotations)
    if metadata:
        template["metadata"] = metadata
    spec: dict[str, object] = {"suspend": False, **(sizes or {})}
    if template:
        spec["template"] = template
    return msgspec.json.encode({"spec": spec})


def restore_patch(
    current: PodTemplateView, original: PodTemplateView, sizes: Mapping[str, int] | None = None
) -> bytes | None:
    """Undo what starting changed in a Job's pod template (nodeSelector, tolerations, scheduling
    gates, the pod set label and the topology annotations) and, for a partially admitted Job, its
    parallelism (`sizes`: the recorded ones).

    Returns None when the template is already as the Workload recorded it.
    """
    selector: dict[str, str | None] = {}
    for key, value in current.spec.node_selector.items():
        wanted = original.spec.node_selector.get(key)
        if wanted != value:
            selector[key] = wanted
    for key, value in original.spec.node_selector.items():
        if key not in current.spec.node_selector:
            selector[key] = value
    # Only the label starting adds: the Workload's copy lacks the job controller's own labels.
    labels: dict[str, str | None] = {
        key: None
        for key in (PODSET_LABEL,)
        if key in current.metadata.labels and key not in original.metadata.labels
    }
    # And the annotations a start in topology domains adds.
    annotations: dict[str, str | None] = {
        key: None
        for key in (WORKLOAD_ANNOTATION, UNCONSTRAINED)
        if key in current.metadata.annotations and key not in original.metadata.annotations
    }
    template: dict[str, object] = {}
    spec_patch: dict[str, object] = {}
    if selector:
        spec_patch["nodeSelector"] = selector
    if current.spec.tolerations != original.spec.tolerations:
        spec_patch["tolerations"] = msgspec.to_builtins(original.spec.tolerations)
    if current.spec.scheduling_gates != original.spec.scheduling_gates:
        spec_patch["schedulingGates"] = msgspec.to_builtins(original.spec.scheduling_gates)
    if spec_patch:
        template["spec"] = spec_patch
    metadata: dict[str, object] = {}
    if labels:
        metadata["labels"] = labels
    if annotations:
        metadata["annotations"] = annotations
    if metadata:
        template["metadata"] = metadata
    if not template and not sizes:
        return None
    spec: dict[str, object] = dict(sizes or {})
    if template:
        spec["template"] = template
    return msgspec.json.encode({"spec": spec})
