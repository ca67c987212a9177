"""Plain pod groups (core/v1 Pods), as Kueue v0.18.1's `pod` framework treats a group.

Pods naming one group (`kueue.x-k8s.io/pod-group-name`, the annotation read before the label as
Kueue's default WorkloadIdentifierAnnotations does) and its size
(`kueue.x-k8s.io/pod-group-total-count`) in one namespace are one job: a `PodGroup`. Its
Workload is named after the group, carries `kueue.x-k8s.io/is-group-workload: "true"` and is
owned (not controlled) by every pod it counts. It has one pod set per pod role: the role hash
the pod webhook wrote (`kueue.x-k8s.io/role-hash`, Kueue's hash of the spec's shape, resource
claims included) names the pod set, whose template is the spec of that role's first pod and
whose count is the role's pods, the pod sets sorted by name.

Everything here is pure; `podgroup_plan` decides the steps, the runtime performs them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from reconciler.api import ObjectMeta, OwnerReference, PodSet, Workload, WorkloadSpec
from reconciler.api.pods import ManagedPod
from reconciler.api.resources import PODS, Resource
from reconciler.core.model.jobs import PODSET_LABEL, TERMINATED_PHASES
from reconciler.core.model.workloads import QUEUE_NAME_LABEL, RESOURCE_IN_USE_FINALIZER, max_exec_seconds
from reconciler.core.primitives.priority import ResolvedPriority

from ..base import Outcome, Patch, PodSetStart
from .pod import ADMISSION_GATE, GROUP_TOTAL_COUNT_ANNOTATION, POD_FINALIZER, ROLE_HASH_ANNOTATION, role_hash

__all__ = [
    "GROUP_KIND",
    "IS_GROUP_WORKLOAD_ANNOTATION",
    "MAX_ROLES",
    "POD_GROUP",
    "RETRIABLE_IN_GROUP_ANNOTATION",
    "TERMINATION_TARGET",
    "PodGroup",
    "PodGroupIntegration",
    "group_finished",
    "group_pod_sets",
    "group_ready",
    "group_workload",
    "has_finalizer",
    "is_gated",
    "make_group",
    "owner_reference",
    "role_of",
    "runnable_or_succeeded",
    "suspended",
    "termination_patch",
    "total_count",
]

# The store's kind for groups (never an API kind: a group's Events name its first pod).
GROUP_KIND = "PodGroup"
IS_GROUP_WORKLOAD_ANNOTATION = "kueue.x-k8s.io/is-group-workload"
RETRIABLE_IN_GROUP_ANNOTATION = "kueue.x-k8s.io/retriable-in-group"
# The pod condition Kueue sets on a pod it stops, before deleting it.
TERMINATION_TARGET = "TerminationTarget"
# Kueue's limit on a Workload's pod sets (jobframework.MaxPodSets).
MAX_ROLES = 10
# The only annotations a group's Workload takes from its pod (Kueue's provisioning-request ones).
_PROVREQ_PREFIX = "provreq.kueue.x-k8s.io/"


def total_count(annotations: Mapping[str, str]) -> int | None:
    """The group's size as Kueue reads it (Go's Atoi: an optional sign, then digits); None when
    it is missing, unreadable or below 1."""
    raw = annotations.get(GROUP_TOTAL_COUNT_ANNOTATION)
    if raw is None:
        return None
    digits = raw[1:] if raw[:1] in ("+", "-") else raw
    if not digits.isascii() or not digits.isdigit():
        return None
    value = int(raw)
    return value if value >= 1 else None


def role_of(pod: ManagedPod) -> str:
    """The pod's role: the hash the webhook recorded, else Kueue's hash of its spec now."""
    return pod.metadata.annotations.get(ROLE_HASH_ANNOTATION) or role_hash(pod.spec)


def is_gated(pod: ManagedPod) -> bool:
    return any(g.name == ADMISSION_GATE for g in pod.spec_view().scheduling_gates)


def suspended(pod: ManagedPod) -> bool:
    """Kueue's suspended pod: terminated or still gated."""
    return pod.status.phase in TERMINATED_PHASES or is_gated(pod)


def has_finalizer(pod: ManagedPod) -> bool:
    return POD_FINALIZER in pod.metadata.finalizers


def runnable_or_succeeded(pod: ManagedPod) -> bool:
    """Whether the pod can still run, runs or succeeded: not failed, and not being deleted
    before a node was assigned (Kueue's isPodRunnableOrSucceeded)."""
    if pod.metadata.deletion_timestamp and not pod.spec_view().node_name:
        return False
    return pod.status.phase != "Failed"


@dataclass(frozen=True, slots=True)
class PodGroup:
    """The pods of one group (never empty), oldest first; the first is the one its Events name,
    as Kueue records a group's Events on one of its pods."""

    namespace: str
    name: str
    pods: tuple[ManagedPod, ...]

    @property
    def metadata(self) -> ObjectMeta:
        return self.pods[0].metadata

    @property
    def total(self) -> int | None:
        """The size its first pod declares (Kueue reads the pod it reconciles for)."""
        return total_count(self.metadata.annotations)

    def with_pods(self, pods: Iterable[ManagedPod]) -> PodGroup:
        kept = tuple(pods)
        return PodGroup(self.namespace, self.name, kept or self.pods[:1])


def _age(pod: ManagedPod) -> tuple[str, str]:
    return (pod.metadata.creation_timestamp or "", pod.metadata.name)


def make_group(namespace: str, name: str, pods: Iterable[ManagedPod]) -> PodGroup | None:
    ordered = tuple(sorted(pods, key=_age))
    return PodGroup(namespace, name, ordered) if ordered else None


def group_pod_sets(pods: Iterable[ManagedPod]) -> list[PodSet]:
    """One pod set per role among the pods that can run or succeeded, named by the role hash,
    counting its pods, its template the first such pod's spec; sorted by name."""
    first: dict[str, ManagedPod] = {}
    counts: dict[str, int] = {}
    for pod in pods:
        if not runnable_or_succeeded(pod):
            continue
        role = role_of(pod)
        first.setdefault(role, pod)
        counts[role] = counts.get(role, 0) + 1
    return [
        PodSet(
            name=role, template=msgspec.Raw(b'{"spec":' + bytes(first[role].spec) + b"}"), count=counts[role]
        )
        for role in sorted(first)
    ]


def group_finished(pods: Sequence[ManagedPod], total: int) -> Outcome | None:
    """Kueue's end of a group: every pod it counts succeeded, or none runs any more and one pod
    says the group may not be retried (`kueue.x-k8s.io/retriable-in-group: "false"`). Either way
    its Workload finishes as succeeded, with how many pods did."""
    succeeded = sum(1 for p in pods if p.status.phase == "Succeeded")
    active = any(p.status.phase not in TERMINATED_PHASES for p in pods)
    unretriable = any(p.metadata.annotations.get(RETRIABLE_IN_GROUP_ANNOTATION) == "false" for p in pods)
    if succeeded == total or (not active and unretriable):
        return Outcome(True, f"Pods succeeded: {succeeded}/{total}.")
    return None


def _ready(pod: ManagedPod) -> bool:
    ready = next((c for c in pod.status.conditions if c.type == "Ready"), None)
    return ready is not None and ready.status == "True"


def group_ready(pods: Sequence[ManagedPod], total: int) -> bool:
    """Kueue's PodsReady for a group: all its pods there and every one Ready."""
    return len(pods) >= total and all(_ready(p) for p in pods)


def owner_reference(pod: ManagedPod) -> OwnerReference:
    """What a group's Workload records of each pod: an owner, not its controller."""
    return OwnerReference(api_version="v1", kind="Pod", name=pod.metadata.name, uid=pod.metadata.uid)


def group_workload(
    group: PodGroup, kept: Sequence[ManagedPod], pod_sets: list[PodSet], priority: ResolvedPriority | None
) -> Workload:
    """The Workload Kueue creates for a complete group: named after it, owned by its pods."""
    meta = group.metadata
    annotations = {k: v for k, v in meta.annotations.items() if k.startswith(_PROVREQ_PREFIX)}
    annotations[IS_GROUP_WORKLOAD_ANNOTATION] = "true"
    newest = max((p.metadata.creation_timestamp or "" for p in kept), default="")
    return Workload(
        metadata=ObjectMeta(
            name=group.name,
            namespace=group.namespace,
            annotations=annotations,
            finalizers=[RESOURCE_IN_USE_FINALIZER],
            owner_references=[owner_reference(p) for p in kept],
            creation_timestamp=newest or None,
        ),
        spec=WorkloadSpec(
            pod_sets=pod_sets,
            queue_name=meta.labels.get(QUEUE_NAME_LABEL, ""),
            priority=priority.value if priority is not None else None,
            priority_class_ref=priority.ref if priority is not None else None,
            maximum_execution_time_seconds=max_exec_seconds(meta.labels),
        ),
    )


def termination_patch(pod: ManagedPod, reason: str, message: str, now: str) -> bytes:
    """The status merge patch that marks a pod Kueue is about to delete: TerminationTarget=True
    with the stop's reason and message (the other conditions written back as they are; the
    resourceVersion makes a concurrent change fail the write instead of being lost)."""
    conditions: list[dict[str, Any]] = [
        {k: v for k, v in msgspec.to_builtins(c).items() if v is not None}
        for c in pod.status.conditions
        if c.type != TERMINATION_TARGET
    ]
    conditions.append(
        {
            "type": TERMINATION_TARGET,
            "status": "True",
            "reason": reason,
            "message": message,
            "lastTransitionTime": now,
        }
    )
    body = {
        "metadata": {"resourceVersion": pod.metadata.resource_version},
        "status": {"conditions": conditions},
    }
    return msgspec.json.encode(body)


class PodGroupIntegration:
    """A pod group behind the integration protocol, for what the runtime's shared parts ask of a
    job (its pod sets, readiness, end). Its pods are started, stopped and released one by one,
    by the steps of `podgroup_plan`, never through the single-object patches."""

    framework: str = "pod"
    kind: str = GROUP_KIND
    api_version: str = "v1"
    resource: Resource = PODS
    projection: type[Any] = PodGroup
    stop_deletes: bool = False  # a group stays while any of its pods does (one pod going is not the end)
    top_level: bool = True
    jobs_from_pods: bool = False
    topology_placement: None = None

    def release_patch(self, obj: PodGroup) -> Patch | None:
        return None  # each pod's finalizer is removed on its own

    def pod_sets(self, obj: PodGroup) -> list[PodSet]:
        return group_pod_sets(obj.pods)

    def is_suspended(self, obj: PodGroup) -> bool:
        return any(suspended(p) for p in obj.pods)

    def start_patch(self, obj: PodGroup, starts: Sequence[PodSetStart]) -> bytes:
        return b"{}"  # never sent: each gated pod gets its own (`pod_start_patch`)

    def suspend_patch(self, obj: PodGroup) -> bytes:
        return b"{}"  # never sent: a group's pods are deleted

    def restore_patch(self, obj: PodGroup, recorded: Sequence[PodSet]) -> Patch | None:
        return None

    def restore_pending(self, obj: PodGroup) -> bool:
        return any(PODSET_LABEL in p.metadata.labels for p in obj.pods)

    def is_active(self, obj: PodGroup) -> bool:
        """Some pod runs (Kueue's IsActive for a group, without its grace-period exception)."""
        return any(p.status.phase == "Running" for p in obj.pods)

    def pods_ready(self, obj: PodGroup) -> bool:
        total = obj.total
        return total is not None and group_ready(obj.pods, total)

    def pods_ready_count(self, obj: PodGroup) -> int:
        """All its pods once Kueue's PodsReady holds for the group, else none: a group is ready
        as a whole (a succeeded pod is not Ready, as Kueue reads it)."""
        return len(obj.pods) if self.pods_ready(obj) else 0

    def finished(self, obj: PodGroup) -> Outcome | None:
        total = obj.total
        return None if total is None else group_finished(obj.pods, total)

    def reclaimable_pods(self, obj: PodGroup) -> Mapping[str, int]:
        """Per role, its succeeded pods (Kueue's ReclaimablePods for a group)."""
        out: dict[str, int] = {}
        for pod in obj.pods:
            if pod.status.phase == "Succeeded":
                role = role_of(pod)
                out[role] = out.get(role, 0) + 1
        return out

    def owns(self, obj: PodGroup, owner_kind: str, owner_api_version: str, owner_name: str) -> bool:
        return False


POD_GROUP = PodGroupIntegration()
