"""StatefulSets at the door: Kueue v0.18.1's StatefulSet webhooks (framework ``statefulset``).

A set whose pod template another framework marked as its own (a LeaderWorkerSet's sets) is left
alone. Defaulting, on create and update: a set without a queue name gets
``kueue.x-k8s.io/queue-name: default`` when its namespace has that LocalQueue; a managed one (a
queue name, or ``manageJobsWithoutQueueName`` in a managed namespace) has its pod template
marked ``kueue.x-k8s.io/pod-suspending-parent: statefulset``, so the pod webhook holds each of
its pods at the admission gate (the controller gives them their group's metadata).

Validation: the queue name a DNS subdomain, no elastic-job annotation; on update the queue name
cannot change once a replica is ready nor be removed, the workload priority class cannot be added
once a replica is ready nor ever removed; a managed set's pod spec cannot change what decides its
pods' quota (each changed part named with its new value, as Kueue), and its replicas can only go
to zero or up from zero, the latter not while pods of the scale-down remain
(``status.replicas`` > 0: "scaling down is still in progress").
"""

from __future__ import annotations

from typing import Any

import msgspec

from reconciler.admission.fielderrors import IMMUTABLE, FieldError, Path, forbidden, invalid, shape_changes
from reconciler.admission.queue_rules import JobPolicy
from reconciler.admission.review import AdmissionRequest, Verdict, decode_object
from reconciler.admission.routes import Lookups, Route, decoded, default_queue
from reconciler.api.apps import StatefulSet
from reconciler.core.model.workloads import QUEUE_NAME_LABEL

from ..children import SUSPENDING_PARENT_ANNOTATION
from ..pods.pod import spec_shape
from .common import common_create_errors, common_update_errors, mark_template, queue_defaulted, should_hold
from .statefulset import STS_FRAMEWORK

__all__ = ["ROUTES", "validate_statefulset_update"]

_GVK = "apps/v1, Kind=StatefulSet"
_SPEC = Path("spec")


def _template_annotations(sts: StatefulSet) -> dict[str, Any]:
    decoded = msgspec.json.decode(sts.spec.template)
    meta = decoded.get("metadata") if isinstance(decoded, dict) else None
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    return annotations if isinstance(annotations, dict) else {}


def another_framework(sts: StatefulSet) -> bool:
    """Whether another framework marked the set's pod template as its own (Kueue leaves it)."""
    marked = _template_annotations(sts).get(SUSPENDING_PARENT_ANNOTATION)
    return marked is not None and marked != STS_FRAMEWORK


def _pod_spec(sts: StatefulSet) -> Any:
    decoded = msgspec.json.decode(sts.spec.template)
    return decoded.get("spec") if isinstance(decoded, dict) else None


def _replica_errors(new: StatefulSet, old: StatefulSet) -> list[FieldError]:
    """Only a scale to zero or up from zero, the latter once the scale-down's pods are gone."""
    path = _SPEC.child("replicas")
    if new.replicas != 0 and old.replicas != 0 and new.replicas != old.replicas:
        return [invalid(path, new.replicas, IMMUTABLE)]
    if old.replicas == 0 and new.replicas > 0 and new.status.replicas > 0:
        return [forbidden(path, "scaling down is still in progress")]
    return []


def validate_statefulset_update(new: StatefulSet, old: StatefulSet, *, managed: bool) -> list[FieldError]:
    """Kueue's rules for an update of a set (see the module's docstring)."""
    errors = common_update_errors(
        new.metadata, old.metadata, old_ready_replicas=old.status.ready_replicas, gvk=_GVK
    )
    if not managed:
        return errors
    shapes = spec_shape(_pod_spec(new)), spec_shape(_pod_spec(old))
    errors += shape_changes(shapes[0], shapes[1], _SPEC.child("template", "spec"))
    return errors + _replica_errors(new, old)


async def _mutate(request: AdmissionRequest, policy: JobPolicy, lookups: Lookups) -> Verdict:
    if not policy.on(STS_FRAMEWORK):
        return Verdict.allow()
    sts, errors = decode_object(request.object, StatefulSet)
    if sts is None:
        return Verdict.deny(errors)
    if another_framework(sts):
        return Verdict.allow()
    namespace = request.namespace or sts.metadata.namespace
    exists = await default_queue(lookups, not sts.metadata.labels.get(QUEUE_NAME_LABEL), namespace)
    if isinstance(exists, Verdict):
        return exists
    labels, ops = queue_defaulted(sts.metadata, default_queue_exists=exists)
    try:
        hold = await should_hold(labels, namespace, policy, lookups)
    except Exception as err:
        return Verdict.fail(
            f"cannot tell whether statefulset {namespace}/{sts.metadata.name} is managed: {err}"
        )
    if hold:
        ops += mark_template(sts.spec.template, {}, {SUSPENDING_PARENT_ANNOTATION: STS_FRAMEWORK})
    return Verdict.allow(ops)


async def _validate(request: AdmissionRequest, policy: JobPolicy, lookups: Lookups) -> Verdict:
    if not policy.on(STS_FRAMEWORK):
        return Verdict.allow()
    new, old, errors = decoded(request, StatefulSet)
    if new is None or errors:
        return Verdict.deny(errors)
    if another_framework(new):
        return Verdict.allow()
    if old is None:
        return Verdict.judge(common_create_errors(new.metadata, _GVK))
    namespace = request.namespace or new.metadata.namespace
    try:
        managed = await should_hold(new.metadata.labels, namespace, policy, lookups)
    except Exception as err:
        return Verdict.fail(
            f"cannot tell whether statefulset {namespace}/{new.metadata.name} is managed: {err}"
        )
    return Verdict.judge(validate_statefulset_update(new, old, managed=managed))


_OPERATIONS = ("CREATE", "UPDATE")

ROUTES = (
    Route(
        "/mutate-apps-v1-statefulset",
        "mstatefulset.kb.io",
        "apps",
        "v1",
        "statefulsets",
        True,
        _OPERATIONS,
        _mutate,
        why="Marks a managed StatefulSet's pod template as suspended by its parent, so the pod webhook\n"
        "holds its pods for the set's one Workload (integrations.frameworks: statefulset; otherwise\n"
        "it leaves StatefulSets as they are).",
    ),
    Route(
        "/validate-apps-v1-statefulset",
        "vstatefulset.kb.io",
        "apps",
        "v1",
        "statefulsets",
        False,
        _OPERATIONS,
        _validate,
        why="Kueue's rules for StatefulSets: queue name, workload priority class, a managed set's pod\n"
        "spec shape and replicas (only to or from zero) (integrations.frameworks: statefulset).",
    ),
)
