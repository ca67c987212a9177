"""What the controller does to batch/v1 Jobs, as plain data.

Which Jobs are managed, and the merge patches that
suspend a Job or start it on its flavors' nodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from reconciler.api import Job, PodTemplateView, Toleration

from .workloads import QUEUE_NAME_LABEL

__all__ = [
    "PODSET_LABEL",
    "is_managed",
    "restore_patch",
    "start_patch",
    "suspend_patch",
]


def is_managed(job: Job, *, manage_without_queue_name: bool = False) -> bool:
    """A Job is ours when it names a queue (or, if configured, always)."""
    return QUEUE_NAME_LABEL in job.metadata.labels or manage_without_queue_name


PODSET_LABEL = "kueue.x-k8s.io/podset"


def suspend_patch() -> bytes:
    return b'{"spec":{"suspend":true}}'


def start_patch(
    node_selector: Mapping[str, str],
    pod_labels: Mapping[str, str],
    tolerations: Sequence[Toleration] = (),
    current_tolerations: Sequence[Toleration] = (),
    pod_annotations: Mapping[str, str] | None = None,
) -> bytes:
    """Unsuspend, with the flavors' nodeLabels merged into the pod template's nodeSelector and
    their tolerations appended to the template's own (a merge patch replaces the whole list)."""
    template: dict[str, object] = {}
    spec_patch: dict[str, object] = {}
    if node_selector:
        spec_patch["nodeSelector"] = dict(node_selector)
    added = [t for t in tolerations if t not in current_tolerations]
    if added:
        spec_patch["tolerations"] = msgspec.to_builtins([*current_tolerations, *added])
    if spec_patch:
        template["spec"] = spec_patch
    metadata: dict[str, object] = {}
    if pod_labels:
        metadata["labels"] = dict(pod_labels)
    if pod_annotations:
        metadata["annotations"] = dict(pod_annotations)
    if metadata:
        template["metadata"] = metadata
    spec: dict[str, object] = {"suspend": False}
    if template:
        spec["template"] = template
    return msgspec.json.encode({"spec": spec})


def restore_patch(current: PodTemplateView, original: PodTemplateView) -> bytes | None:
    """Undo what starting changed in a Job's pod template (nodeSelector, tolerations, the pod set label).

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
    template: dict[str, object] = {}
    spec_patch: dict[str, object] = {}
    if selector:
        spec_patch["nodeSelector"] = selector
    if current.spec.tolerations != original.spec.tolerations:
        spec_patch["tolerations"] = msgspec.to_builtins(original.spec.tolerations)
    if spec_patch:
        template["spec"] = spec_patch
    if labels:
        template["metadata"] = {"labels": labels}
    if not template:
        return None
    return msgspec.json.encode({"spec": {"template": template}})
