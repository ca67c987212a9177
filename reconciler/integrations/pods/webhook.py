"""Plain pods at the door (framework ``pod``): Kueue v0.18.1's pod webhook, single pods.

Defaulting on create, in Kueue's order: a pod in a namespace the controller does not manage
(``managedJobsNamespaceSelector``, by default any but kube-system and the controller's own) is
left alone, and so is a pod whose controlling ancestor is a job the controller manages (a Job's
or a JobSet's pod: its job holds the quota). Otherwise a pod without a queue name gets
``kueue.x-k8s.io/queue-name: default`` when the namespace has that LocalQueue, and a pod that
names a queue (or any, with ``manageJobsWithoutQueueName``) is marked managed
(``kueue.x-k8s.io/managed: "true"``), gets Kueue's finalizer and is held by the scheduling gate
``kueue.x-k8s.io/admission`` until its Workload is admitted, followed by Kueue's topology gate
``kueue.x-k8s.io/topology`` (Kueue's webhook adds it while its TopologyAwareScheduling feature
gate is on, the default; starting the pod removes both); it also gets Kueue's role hash
(``kueue.x-k8s.io/role-hash``).

A pod of a group (``kueue.x-k8s.io/pod-group-name``) is defaulted the same way: its group's
Workload is made once all its pods exist, and each pod waits at the gate until then.

Validation, as Kueue's: the queue-name rules of any job (suspended here means gated or ended),
the managed label's only value ``true``, the pod-group metadata (a group name needs a total
count and the other way round, the name a DNS subdomain, the count a positive integer, the
name immutable, and a group marked not retriable stays so). The group name is read from the
annotation first, then the label, as Kueue v0.18.1 reads it (WorkloadIdentifierAnnotations).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import msgspec

from reconciler.admission.fielderrors import IMMUTABLE, FieldError, Path, forbidden, invalid, required
from reconciler.admission.names import dns1123_subdomain_problems
from reconciler.admission.queue_rules import DEFAULT_LOCAL_QUEUE, JobPolicy, validate_job, validate_job_update
from reconciler.admission.review import AdmissionRequest, PatchOp, Verdict, decode_object, escape
from reconciler.admission.routes import Lookups, Route, decoded, default_queue
from reconciler.admission.suspendable import elastic_job_refused
from reconciler.api.meta import ObjectMeta
from reconciler.api.pods import ManagedPod
from reconciler.core.model.workloads import QUEUE_NAME_LABEL, TOPOLOGY_REFUSAL
from reconciler.core.primitives.selectors import label_selector_matches
from reconciler.core.topology.requests import topology_annotations

from ..children import SUSPENDING_PARENT_ANNOTATION
from .group import RETRIABLE_IN_GROUP_ANNOTATION
from .pod import (
    ADMISSION_GATE,
    FAST_ADMISSION_ANNOTATION,
    GROUP_NAME_LABEL,
    GROUP_TOTAL_COUNT_ANNOTATION,
    MANAGED_LABEL,
    MANAGED_VALUE,
    POD,
    POD_FINALIZER,
    POD_INDEX_LABEL_ANNOTATION,
    ROLE_HASH_ANNOTATION,
    SERVING_ANNOTATION,
    TOPOLOGY_GATE,
    group_name,
    role_hash,
)

__all__ = [
    "ROUTES",
    "QueuedPod",
    "default_pod",
    "namespace_managed",
    "pod_is_managed",
    "pod_warnings",
    "validate_pod",
    "validate_pod_update",
]

_SYSTEM_NAMESPACE = "kube-system"
_LABELS = Path("metadata.labels")
_ANNOTATIONS = Path("metadata.annotations")


@dataclass(frozen=True)
class _Suspended:
    suspend: bool


@dataclass(frozen=True)
class QueuedPod:
    """A pod as the queue-name rules of any job read it: suspended while gated or ended."""

    metadata: ObjectMeta
    spec: _Suspended

    @classmethod
    def of(cls, pod: ManagedPod) -> QueuedPod:
        gated = any(g.name == ADMISSION_GATE for g in pod.spec_view().scheduling_gates)
        return cls(pod.metadata, _Suspended(gated or pod.status.phase in ("Succeeded", "Failed")))


def namespace_managed(namespace: str, labels: Mapping[str, str] | None, policy: JobPolicy) -> bool:
    """Whether the controller manages pods in this namespace (`labels`: the Namespace's, needed
    only with a managedJobsNamespaceSelector)."""
    if policy.namespace_selector is not None:
        return label_selector_matches(policy.namespace_selector, labels or {})
    return namespace not in (_SYSTEM_NAMESPACE, policy.own_namespace)


def pod_is_managed(meta: ObjectMeta, manage_without_queue_name: bool) -> bool:
    return bool(meta.labels.get(QUEUE_NAME_LABEL)) or manage_without_queue_name


def default_pod(
    pod: ManagedPod, rules: JobPolicy, *, default_queue_exists: bool, managed_ancestor: bool
) -> list[PatchOp]:
    """The JSON patch that defaults a pod being created in a managed namespace."""
    if _held_for_parent(pod, rules):
        return _held(pod)  # a serving parent's pod: held for its group's Workload, no finalizer
    if not rules.on(POD.framework) or managed_ancestor:
        return []
    meta = pod.metadata
    ops: list[PatchOp] = []
    labels = dict(meta.labels)
    if not labels.get(QUEUE_NAME_LABEL) and default_queue_exists:
        labels[QUEUE_NAME_LABEL] = DEFAULT_LOCAL_QUEUE
    if pod_is_managed(ObjectMeta(labels=labels), rules.manage_without_queue_name):
        labels[MANAGED_LABEL] = MANAGED_VALUE
    if labels != meta.labels:
        if meta.labels:
            ops += [
                {"op": "add", "path": f"/metadata/labels/{escape(k)}", "value": v}
                for k, v in labels.items()
                if meta.labels.get(k) != v
            ]
        else:
            ops.append({"op": "add", "path": "/metadata/labels", "value": labels})
    if labels.get(MANAGED_LABEL) != MANAGED_VALUE:
        return ops
    if POD_FINALIZER not in meta.finalizers:
        if meta.finalizers:
            ops.append({"op": "add", "path": "/metadata/finalizers/-", "value": POD_FINALIZER})
        else:
            ops.append({"op": "add", "path": "/metadata/finalizers", "value": [POD_FINALIZER]})
    return ops + _held(pod)


def _held_for_parent(pod: ManagedPod, rules: JobPolicy) -> bool:
    """Whether the pod is a serving parent's (a LeaderWorkerSet's), held for its group's Workload
    while that parent's framework (or the pod framework) is on."""
    parent = pod.metadata.annotations.get(SUSPENDING_PARENT_ANNOTATION)
    return parent is not None and (rules.on(POD.framework) or rules.on(parent))


def _held(pod: ManagedPod) -> list[PatchOp]:
    """The admission gate, then the topology gate (Kueue v0.18.1 adds it while its
    TopologyAwareScheduling gate is on, by default; a start removes both), and Kueue's role
    hash, for those the pod lacks."""
    meta = pod.metadata
    ops: list[PatchOp] = []
    gates = pod.spec_view().scheduling_gates
    missing = [{"name": n} for n in (ADMISSION_GATE, TOPOLOGY_GATE) if not any(g.name == n for g in gates)]
    if missing and gates:
        ops += [{"op": "add", "path": "/spec/schedulingGates/-", "value": gate} for gate in missing]
    elif missing:
        ops.append({"op": "add", "path": "/spec/schedulingGates", "value": missing})
    if ROLE_HASH_ANNOTATION not in meta.annotations:
        value = role_hash(pod.spec)
        if meta.annotations:
            path = f"/metadata/annotations/{escape(ROLE_HASH_ANNOTATION)}"
            ops.append({"op": "add", "path": path, "value": value})
        else:
            ops.append({"op": "add", "path": "/metadata/annotations", "value": {ROLE_HASH_ANNOTATION: value}})
    return ops


def _group_name_path(meta: ObjectMeta) -> str:
    """Where the group name is read from: the annotation when it is set, else the label."""
    if meta.annotations.get(GROUP_NAME_LABEL):
        return _ANNOTATIONS.key(GROUP_NAME_LABEL)
    return _LABELS.key(GROUP_NAME_LABEL)


def _group_errors(meta: ObjectMeta) -> list[FieldError]:
    """Kueue's pod-group metadata rules."""
    group = group_name(meta.labels, meta.annotations)
    count = meta.annotations.get(GROUP_TOTAL_COUNT_ANNOTATION)
    by_annotation = bool(meta.annotations.get(GROUP_NAME_LABEL))
    name_part = f"the '{GROUP_NAME_LABEL}' {'annotation' if by_annotation else 'label'}"
    both = f"both the '{GROUP_TOTAL_COUNT_ANNOTATION}' annotation and {name_part} should be set"
    if not group:
        return [required(_group_name_path(meta), both)] if count is not None else []
    errors: list[FieldError] = []
    problems = dns1123_subdomain_problems(group)
    if problems:
        errors.append(invalid(_group_name_path(meta), group, ",".join(problems)))
    path = _ANNOTATIONS.key(GROUP_TOTAL_COUNT_ANNOTATION)
    if count is None:
        return [*errors, required(path, both)]
    if not count.strip().lstrip("+-").isdigit():
        errors.append(invalid(path, count, f'strconv.Atoi: parsing "{count}": invalid syntax'))
    elif int(count) < 1:
        detail = (
            f"incorrect annotation value '{GROUP_TOTAL_COUNT_ANNOTATION}={count}': "
            "group total count should be greater than zero"
        )
        errors.append(invalid(path, count, detail))
    return errors


def _common(pod: ManagedPod, rules: JobPolicy) -> list[FieldError]:
    meta = pod.metadata
    errors: list[FieldError] = []
    value = meta.labels.get(MANAGED_LABEL)
    if value is not None and value != MANAGED_VALUE:
        detail = f"managed label value can only be '{MANAGED_VALUE}'"
        errors.append(forbidden(_LABELS.key(MANAGED_LABEL), detail))
    return errors + _group_errors(meta) + _group_annotations_refused(pod)


def validate_pod(pod: ManagedPod, rules: JobPolicy) -> list[FieldError]:
    if not rules.on(POD.framework):
        return []
    return validate_job(QueuedPod.of(pod)) + _common(pod, rules) + _topology_refused(pod)


# Pod-group annotations Kueue v0.18.1 reads on a plain pod group that this controller does not act
# on there (it writes them itself on a StatefulSet's or LeaderWorkerSet's pods, which it handles):
# refused by name on a managed pod of no parent rather than accepted and ignored.
_GROUP_UNSUPPORTED = {
    FAST_ADMISSION_ANNOTATION: "a plain pod group's Workload is made once all its pods exist; remove it",
    SERVING_ANNOTATION: "a plain pod group is a batch group here (serving groups come from a "
    "StatefulSet or LeaderWorkerSet); remove it",
    POD_INDEX_LABEL_ANNOTATION: "it serves topology-aware scheduling, which this controller does not "
    "do yet; remove it",
}


def _group_annotations_refused(pod: ManagedPod) -> list[FieldError]:
    """A managed pod not held for a parent carrying a pod-group annotation not acted on, or
    Kueue's elastic-job annotation (refused by Kueue's pod webhook too): refused by name."""
    meta = pod.metadata
    if meta.labels.get(MANAGED_LABEL) != MANAGED_VALUE or SUSPENDING_PARENT_ANNOTATION in meta.annotations:
        return []
    return elastic_job_refused(meta, "/v1, Kind=Pod") + [
        forbidden(_ANNOTATIONS.key(name), f"not supported by this controller for a plain pod: {why}")
        for name, why in _GROUP_UNSUPPORTED.items()
        if name in meta.annotations
    ]


def _topology_refused(pod: ManagedPod) -> list[FieldError]:
    """A managed pod asking for topology-aware scheduling is refused by name (not done yet)."""
    meta = pod.metadata
    if meta.labels.get(MANAGED_LABEL) != MANAGED_VALUE:
        return []
    names = topology_annotations(meta.annotations)
    return [forbidden(_ANNOTATIONS.key(name), TOPOLOGY_REFUSAL) for name in names]


def pod_warnings(pod: ManagedPod, rules: JobPolicy) -> list[str]:
    """Kueue's warning for a pod marked managed whose controller is a job kind it manages."""
    if not rules.on(POD.framework) or pod.metadata.labels.get(MANAGED_LABEL) != MANAGED_VALUE:
        return []
    owner = next((r for r in pod.metadata.owner_references if r.controller), None)
    if owner is None or (owner.api_version, owner.kind) not in rules.job_kinds:
        return []
    label = f"{MANAGED_LABEL}={MANAGED_VALUE}"
    return [f"pod owner is managed by kueue, label '{label}' might lead to unexpected behaviour"]


def validate_pod_update(
    new: ManagedPod, old: ManagedPod, rules: JobPolicy, *, default_queue_exists: bool = False
) -> list[FieldError]:
    """Kueue's rules for an update of a pod: the queue-name rules of any job, the common
    rules, a group name that cannot change, and a group not retriable that stays so."""
    if not rules.on(POD.framework):
        return []
    errors = validate_job_update(
        QueuedPod.of(new), QueuedPod.of(old), default_queue_exists=default_queue_exists
    )
    errors += _common(new, rules)
    new_group = group_name(new.metadata.labels, new.metadata.annotations)
    old_group = group_name(old.metadata.labels, old.metadata.annotations)
    if new_group and _unretriable(old.metadata) and not _unretriable(new.metadata):
        path = _ANNOTATIONS.key(RETRIABLE_IN_GROUP_ANNOTATION)
        errors.append(forbidden(path, "unretriable pod group can't be converted to retriable"))
    if old_group and new_group != old_group:
        errors.append(invalid(_group_name_path(new.metadata), new_group, IMMUTABLE))
    return errors


def _unretriable(meta: ObjectMeta) -> bool:
    return meta.annotations.get(RETRIABLE_IN_GROUP_ANNOTATION) == "false"


# How far up a pod's controllers are followed (Kueue's managedOwnersChainLimit).
_OWNER_CHAIN_LIMIT = 10


async def _managed_ancestor(meta: ObjectMeta, policy: JobPolicy, lookups: Lookups) -> bool:
    """Whether one of the pod's controllers, up the chain, is a job the controller manages
    (Kueue's FindAncestorJobManagedByKueue): its pods are its job's, not jobs of their own."""
    for _ in range(_OWNER_CHAIN_LIMIT):
        ref = next((r for r in meta.owner_references if r.controller), None)
        if ref is None or (ref.api_version, ref.kind) not in policy.job_kinds:
            return False
        owner = await lookups.object_meta(ref.api_version, ref.kind, meta.namespace, ref.name)
        if owner is None:
            return False
        if pod_is_managed(owner, policy.manage_without_queue_name):
            return True
        meta = owner
    return False


async def _mutate(request: AdmissionRequest, policy: JobPolicy, lookups: Lookups) -> Verdict:
    """Kueue's pod defaulting (framework `pod`): see `default_pod`."""
    pod, errors = decode_object(request.object, ManagedPod)
    if pod is None:
        return Verdict.deny(errors)
    if _held_for_parent(pod, policy):
        # Held for its parent's Workload whatever the namespace (Kueue's suspend-by-parent).
        return Verdict.allow(default_pod(pod, policy, default_queue_exists=False, managed_ancestor=False))
    if not policy.on(POD.framework):
        return Verdict.allow()
    namespace = request.namespace or pod.metadata.namespace
    meta = msgspec.structs.replace(pod.metadata, namespace=namespace)
    try:
        labels = None if policy.namespace_selector is None else await lookups.namespace_labels(namespace)
        if not namespace_managed(namespace, labels, policy):
            return Verdict.allow()
        ancestor = await _managed_ancestor(meta, policy, lookups)
        exists = False
        if not ancestor and not meta.labels.get(QUEUE_NAME_LABEL):
            exists = await lookups.default_local_queue_exists(namespace)
    except Exception as err:
        return Verdict.fail(f"cannot tell whether pod {namespace}/{meta.name} is to be managed: {err}")
    return Verdict.allow(default_pod(pod, policy, default_queue_exists=exists, managed_ancestor=ancestor))


async def _validate(request: AdmissionRequest, policy: JobPolicy, lookups: Lookups) -> Verdict:
    """Kueue's pod validation: see `validate_pod` and `validate_pod_update`."""
    if not policy.on(POD.framework):
        return Verdict.allow()
    new, old, errors = decoded(request, ManagedPod)
    if new is None or errors:
        return Verdict.deny(errors)
    warnings = tuple(pod_warnings(new, policy))
    if old is None:
        return dataclasses.replace(Verdict.judge(validate_pod(new, policy)), warnings=warnings)
    exists = await default_queue(
        lookups,
        bool(old.metadata.labels.get(QUEUE_NAME_LABEL)) and not new.metadata.labels.get(QUEUE_NAME_LABEL),
        request.namespace or new.metadata.namespace,
    )
    if isinstance(exists, Verdict):
        return exists
    verdict = Verdict.judge(validate_pod_update(new, old, policy, default_queue_exists=exists))
    return dataclasses.replace(verdict, warnings=warnings)


ROUTES = (
    Route(
        "/mutate--v1-pod",
        "mpod.kb.io",
        "",
        "v1",
        "pods",
        True,
        ("CREATE",),
        _mutate,
        why="Holds a pod that names a queue at the scheduling gate kueue.x-k8s.io/admission, marks it\n"
        "managed and adds Kueue's finalizer (integrations.frameworks: pod; otherwise it leaves pods\n"
        "as they are). As Kueue ships it, every pod outside kube-system and the controller's\n"
        "namespace passes through it.",
    ),
    Route(
        "/validate--v1-pod",
        "vpod.kb.io",
        "",
        "v1",
        "pods",
        False,
        ("CREATE", "UPDATE"),
        _validate,
        why="Kueue's rules for plain pods (integrations.frameworks: pod): queue name, managed label,\n"
        "pod-group metadata.",
    ),
)
