"""What Kueue v0.18.1's Deployment and StatefulSet webhooks share: whether a set is managed, the
labels and annotations its pod template gets, and the rules of an update (queue name and
workload priority class, judged by whether any replica is ready).

Neither kind is ever suspended: Kueue marks its pod template so the pod webhook holds each pod
it makes at the admission gate (``kueue.x-k8s.io/pod-suspending-parent``), and the pods are the
`pod` integration's jobs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from reconciler.admission.fielderrors import IMMUTABLE, FieldError, Path, forbidden, invalid
from reconciler.admission.names import dns1123_subdomain
from reconciler.admission.queue_rules import DEFAULT_LOCAL_QUEUE, JobPolicy, default_queue_ops
from reconciler.admission.review import PatchOp, escape
from reconciler.admission.routes import Lookups
from reconciler.api.meta import ObjectMeta
from reconciler.core.model.workloads import QUEUE_NAME_LABEL
from reconciler.core.primitives.priority import PRIORITY_CLASS_LABEL

from ..pods.webhook import namespace_managed

__all__ = [
    "ELASTIC_JOB_ANNOTATION",
    "TEMPLATE_PATH",
    "common_create_errors",
    "common_update_errors",
    "mark_template",
    "queue_defaulted",
    "should_hold",
]

ELASTIC_JOB_ANNOTATION = "kueue.x-k8s.io/elastic-job"
TEMPLATE_PATH = "/spec/template"
_LABELS = Path("metadata.labels")
_ANNOTATIONS = Path("metadata.annotations")


def queue_defaulted(meta: ObjectMeta, *, default_queue_exists: bool) -> tuple[dict[str, str], list[PatchOp]]:
    """The set's labels after Kueue's default LocalQueue, and the ops that add it."""
    labels = dict(meta.labels)
    if labels.get(QUEUE_NAME_LABEL) or not default_queue_exists:
        return labels, []
    labels[QUEUE_NAME_LABEL] = DEFAULT_LOCAL_QUEUE
    return labels, default_queue_ops(meta)


async def should_hold(labels: Mapping[str, str], namespace: str, policy: JobPolicy, lookups: Lookups) -> bool:
    """Kueue's WorkloadShouldBeSuspended for a set: a queue name, or `manageJobsWithoutQueueName`
    in a namespace the controller manages."""
    if labels.get(QUEUE_NAME_LABEL):
        return True
    if not policy.manage_without_queue_name:
        return False
    ns_labels = None if policy.namespace_selector is None else await lookups.namespace_labels(namespace)
    return namespace_managed(namespace, ns_labels, policy)


def mark_template(
    template: msgspec.Raw, labels: Mapping[str, str], annotations: Mapping[str, str]
) -> list[PatchOp]:
    """The ops that give the pod template these labels and annotations (those it lacks)."""
    decoded: Any = msgspec.json.decode(template)
    meta = decoded.get("metadata") if isinstance(decoded, dict) else None
    if not isinstance(meta, dict):
        value = {k: dict(v) for k, v in (("labels", labels), ("annotations", annotations)) if v}
        return [{"op": "add", "path": f"{TEMPLATE_PATH}/metadata", "value": value}] if value else []
    ops: list[PatchOp] = []
    for section, wanted in (("labels", labels), ("annotations", annotations)):
        if not wanted:
            continue
        current = meta.get(section)
        if not isinstance(current, dict):
            ops.append({"op": "add", "path": f"{TEMPLATE_PATH}/metadata/{section}", "value": dict(wanted)})
            continue
        ops += [
            {"op": "add", "path": f"{TEMPLATE_PATH}/metadata/{section}/{escape(k)}", "value": v}
            for k, v in wanted.items()
            if current.get(k) != v
        ]
    return ops


def common_create_errors(meta: ObjectMeta, gvk: str) -> list[FieldError]:
    """Kueue's create rules for a set: a queue name that is a DNS subdomain, and no elastic-job
    annotation (workload slices are only for the kinds Kueue lists, not these)."""
    errors: list[FieldError] = []
    if QUEUE_NAME_LABEL in meta.labels:
        errors += dns1123_subdomain(_LABELS.key(QUEUE_NAME_LABEL), meta.labels[QUEUE_NAME_LABEL])
    if meta.annotations.get(ELASTIC_JOB_ANNOTATION) == "true":
        path = _ANNOTATIONS.key(ELASTIC_JOB_ANNOTATION)
        errors.append(forbidden(path, f'elastic job is not supported for "{gvk}"'))
    return errors


def common_update_errors(
    new: ObjectMeta, old: ObjectMeta, *, old_ready_replicas: int, gvk: str
) -> list[FieldError]:
    """Kueue's update rules for a set: the create rules; once a replica is ready (or when it is
    being removed) the queue name cannot change; a workload priority class cannot be added
    once a replica is ready, nor ever removed."""
    errors = common_create_errors(new, gvk)
    suspended = old_ready_replicas == 0
    new_queue, old_queue = new.labels.get(QUEUE_NAME_LABEL, ""), old.labels.get(QUEUE_NAME_LABEL, "")
    if (not suspended or not new_queue) and new_queue != old_queue:
        errors.append(invalid(_LABELS.key(QUEUE_NAME_LABEL), new_queue, IMMUTABLE))
    new_class, old_class = new.labels.get(PRIORITY_CLASS_LABEL, ""), old.labels.get(PRIORITY_CLASS_LABEL, "")
    path = _LABELS.key(PRIORITY_CLASS_LABEL)
    if not suspended and not old_class and new_class:
        errors.append(
            invalid(path, new_class, "WorkloadPriorityClass cannot be added to a non-suspended workload")
        )
    elif not new_class and old_class:
        errors.append(invalid(path, "", "WorkloadPriorityClass cannot be removed from a workload"))
    return errors
