"""LeaderWorkerSets at the door: Kueue v0.18.1's LeaderWorkerSet webhooks.

Defaulting on create and update (leaderworkerset.x-k8s.io/leaderworkerset among
integrations.frameworks): a set without a queue name gets ``kueue.x-k8s.io/queue-name: default``
when its namespace has a LocalQueue named ``default``; a set the controller manages (a queue
name, or ``manageJobsWithoutQueueName``) has its leader and worker pod templates marked: the
queue name (and workload priority class) as labels, and the annotations that make the pod
webhook hold each pod at the admission gate as suspended by its parent
(``kueue.x-k8s.io/pod-suspending-parent``) and make its group a serving one
(``kueue.x-k8s.io/pod-group-serving``). The set itself is never suspended.

Validation: the queue-name rules of any job; on update the queue name cannot change once a group
is ready (``status.readyReplicas`` > 0) nor be removed, and a managed set's pod templates cannot
change what decides their pods' quota (the spec's shape Kueue's role hash reads): each part that
changed is named with its new value, as Kueue names it, e.g.
``spec.leaderWorkerTemplate.leaderTemplate.spec.containers[0].resources.requests: Invalid value:
{"cpu":"2"}: field is immutable``; a leader template added or removed shows the new one (or null).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from reconciler.admission.fielderrors import IMMUTABLE, FieldError, Path, invalid, shape_changes
from reconciler.admission.queue_rules import DEFAULT_LOCAL_QUEUE, JobPolicy, default_queue_ops, validate_job
from reconciler.admission.review import AdmissionRequest, PatchOp, Verdict, decode_object, escape
from reconciler.admission.routes import Lookups, Route, decoded, default_queue
from reconciler.admission.suspendable import elastic_job_refused
from reconciler.admission.topology_door import topology_requests_refused
from reconciler.api.lws import LeaderWorkerSet
from reconciler.api.meta import ObjectMeta
from reconciler.core.model.workloads import QUEUE_NAME_LABEL
from reconciler.core.primitives.priority import PRIORITY_CLASS_LABEL

from ..pods.pod import spec_shape
from .group import GROUP_SERVING_ANNOTATION, LWS_FRAMEWORK, SUSPENDING_PARENT_ANNOTATION

__all__ = ["ROUTES", "default_lws", "lws_needs_default_queue_lookup", "validate_lws", "validate_lws_update"]

_LABELS = Path("metadata.labels")
_TEMPLATES = Path("spec.leaderWorkerTemplate")
_PATHS = {
    "leaderTemplate": "/spec/leaderWorkerTemplate/leaderTemplate",
    "workerTemplate": "/spec/leaderWorkerTemplate/workerTemplate",
}


@dataclass(frozen=True)
class _Suspend:
    suspend: bool


@dataclass(frozen=True)
class _Queued:
    """A set as the queue-name rules of any job read it."""

    metadata: ObjectMeta
    spec: _Suspend


def _managed(labels: dict[str, str], policy: JobPolicy) -> bool:
    return bool(labels.get(QUEUE_NAME_LABEL)) or policy.manage_without_queue_name


def lws_needs_default_queue_lookup(lws: LeaderWorkerSet, policy: JobPolicy) -> bool:
    return policy.on(LWS_FRAMEWORK) and QUEUE_NAME_LABEL not in lws.metadata.labels


def _templates(lws: LeaderWorkerSet) -> list[tuple[str, Any]]:
    template = lws.spec.leader_worker_template
    found: list[tuple[str, Any]] = []
    if template.leader_template is not None:
        found.append(("leaderTemplate", msgspec.json.decode(template.leader_template)))
    found.append(("workerTemplate", msgspec.json.decode(template.worker_template)))
    return found


def _mark(path: str, template: Any, labels: dict[str, str], annotations: dict[str, str]) -> list[PatchOp]:
    """Add these labels and annotations to a pod template (the ops for those it lacks)."""
    ops: list[PatchOp] = []
    meta = template.get("metadata") if isinstance(template, dict) else None
    if not isinstance(meta, dict):
        return [
            {"op": "add", "path": f"{path}/metadata", "value": {"labels": labels, "annotations": annotations}}
        ]
    for section, wanted in (("labels", labels), ("annotations", annotations)):
        current = meta.get(section)
        if not isinstance(current, dict):
            ops.append({"op": "add", "path": f"{path}/metadata/{section}", "value": wanted})
            continue
        ops += [
            {"op": "add", "path": f"{path}/metadata/{section}/{escape(k)}", "value": v}
            for k, v in wanted.items()
            if current.get(k) != v
        ]
    return ops


def default_lws(lws: LeaderWorkerSet, policy: JobPolicy, *, default_queue_exists: bool) -> list[PatchOp]:
    """The JSON patch that defaults a LeaderWorkerSet (empty when nothing changes)."""
    if not policy.on(LWS_FRAMEWORK):
        return []
    ops: list[PatchOp] = []
    labels = dict(lws.metadata.labels)
    if QUEUE_NAME_LABEL not in labels and default_queue_exists:
        ops += default_queue_ops(lws.metadata)
        labels[QUEUE_NAME_LABEL] = DEFAULT_LOCAL_QUEUE
    if not _managed(labels, policy):
        return ops
    pod_labels = {k: labels[k] for k in (QUEUE_NAME_LABEL, PRIORITY_CLASS_LABEL) if labels.get(k)}
    pod_annotations = {SUSPENDING_PARENT_ANNOTATION: LWS_FRAMEWORK, GROUP_SERVING_ANNOTATION: "true"}
    for field_name, template in _templates(lws):
        ops += _mark(_PATHS[field_name], template, pod_labels, pod_annotations)
    return ops


def _queued(lws: LeaderWorkerSet, suspended: bool) -> _Queued:
    return _Queued(lws.metadata, _Suspend(suspended))


def validate_lws(lws: LeaderWorkerSet, policy: JobPolicy) -> list[FieldError]:
    if not policy.on(LWS_FRAMEWORK):
        return []
    return validate_job(_queued(lws, True))


def _template_changes(new: Any, old: Any, path: Path) -> list[FieldError]:
    """A managed template's spec may not change what decides its pods' quota (Kueue's SpecShape);
    one added or removed is named with its new value (null when removed), as Kueue names it."""
    if (new is None) != (old is None):
        return [invalid(path, new, IMMUTABLE)]
    if new is None:
        return []
    shapes = [spec_shape(t.get("spec") if isinstance(t, dict) else None) for t in (new, old)]
    return shape_changes(shapes[0], shapes[1], path.child("spec"))


def validate_lws_update(new: LeaderWorkerSet, old: LeaderWorkerSet, policy: JobPolicy) -> list[FieldError]:
    """Kueue's rules for an update of a set (see the module's docstring)."""
    if not policy.on(LWS_FRAMEWORK):
        return []
    errors = validate_lws(new, policy)
    new_queue = new.metadata.labels.get(QUEUE_NAME_LABEL, "")
    old_queue = old.metadata.labels.get(QUEUE_NAME_LABEL, "")
    if (old.status.ready_replicas > 0 or not new_queue) and new_queue != old_queue:
        errors.append(invalid(_LABELS.key(QUEUE_NAME_LABEL), new_queue, IMMUTABLE))
    if not _managed(new.metadata.labels, policy):
        return errors
    new_templates, old_templates = dict(_templates(new)), dict(_templates(old))
    for field_name in ("leaderTemplate", "workerTemplate"):
        path = _TEMPLATES.child(field_name)
        errors += _template_changes(new_templates.get(field_name), old_templates.get(field_name), path)
    return errors


async def _mutate(request: AdmissionRequest, policy: JobPolicy, lookups: Lookups) -> Verdict:
    lws, errors = decode_object(request.object, LeaderWorkerSet)
    if lws is None:
        return Verdict.deny(errors)
    exists = await default_queue(
        lookups,
        request.operation == "CREATE" and lws_needs_default_queue_lookup(lws, policy),
        request.namespace or lws.metadata.namespace,
    )
    if isinstance(exists, Verdict):
        return exists
    return Verdict.allow(default_lws(lws, policy, default_queue_exists=exists))


async def _validate(request: AdmissionRequest, policy: JobPolicy, lookups: Lookups) -> Verdict:
    """Kueue's LeaderWorkerSet validation: see `validate_lws_update`."""
    new, old, errors = decoded(request, LeaderWorkerSet)
    if new is None or errors:
        return Verdict.deny(errors)
    managed = policy.on(LWS_FRAMEWORK) and _managed(new.metadata.labels, policy)
    refused = topology_requests_refused(request.object) if managed else []
    refused += elastic_job_refused(new.metadata, _GVK) if managed else []
    if old is None:
        return Verdict.judge(validate_lws(new, policy) + refused)
    return Verdict.judge(validate_lws_update(new, old, policy) + refused)


_GROUP, _VERSION, _RESOURCE = "leaderworkerset.x-k8s.io", "v1", "leaderworkersets"
_GVK = f"{_GROUP}/{_VERSION}, Kind=LeaderWorkerSet"
_CREATE_UPDATE = ("CREATE", "UPDATE")

ROUTES = (
    Route(
        f"/mutate-{_GROUP.replace('.', '-')}-{_VERSION}-leaderworkerset",
        "mleaderworkerset.kb.io",
        _GROUP,
        _VERSION,
        _RESOURCE,
        True,
        _CREATE_UPDATE,
        _mutate,
        why="Marks a managed LeaderWorkerSet's pod templates (queue name; suspended by their parent,\n"
        "serving) so the pod webhook holds its pods (integrations.frameworks:\n"
        "leaderworkerset.x-k8s.io/leaderworkerset; otherwise it leaves sets as they are).",
    ),
    Route(
        f"/validate-{_GROUP.replace('.', '-')}-{_VERSION}-leaderworkerset",
        "vleaderworkerset.kb.io",
        _GROUP,
        _VERSION,
        _RESOURCE,
        False,
        _CREATE_UPDATE,
        _validate,
        why="Kueue's rules for LeaderWorkerSets: queue name, and a managed set's pod templates\n"
        "(integrations.frameworks: leaderworkerset.x-k8s.io/leaderworkerset).",
    ),
)
