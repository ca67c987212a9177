"""The groups of a LeaderWorkerSet, each the job one Workload stands for (Kueue v0.18.1's model).

Kueue gives every group (replica index 0..replicas-1) a Workload of its own, created from the
LeaderWorkerSet, not from the pods: named as a job named `<lws>-<index>` of kind
LeaderWorkerSet with the LeaderWorkerSet's UID, owned by the LeaderWorkerSet (not as its
controller), annotated with the group's index. The group's pods are a Kueue pod group using that
Workload (prebuilt): labelled managed, with the Workload's name as their pod group name and
prebuilt workload name, the group's size as total count and their role (`leader`, `worker`, or
`main` without a leader template) as role hash.

An `LwsGroup` is that job as this controller sees it: the LeaderWorkerSet's metadata under the
group's name, its templates, and the group's pods as the watch shows them (the LWS controller
labels each with the set's name and the group's index; a worker names its leader in an
annotation).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import msgspec

from reconciler.api import Workload
from reconciler.api.lws import LeaderWorkerSet
from reconciler.api.meta import ObjectMeta, OwnerReference
from reconciler.api.pods import ManagedPod
from reconciler.core.model.workloads import JOB_POD_SET, workload_name_for_job

from ..children import SUSPENDING_PARENT_ANNOTATION

__all__ = [
    "COMPONENT_INDEX_ANNOTATION",
    "GROUP_INDEX_LABEL",
    "GROUP_NAME_LABEL",
    "GROUP_SERVING_ANNOTATION",
    "IS_GROUP_WORKLOAD_ANNOTATION",
    "LEADER",
    "LEADER_NAME_ANNOTATION",
    "LWS_API_VERSION",
    "LWS_FRAMEWORK",
    "LWS_KIND",
    "PREBUILT_WORKLOAD_LABEL",
    "SET_NAME_LABEL",
    "SUSPENDING_PARENT_ANNOTATION",
    "WORKER",
    "LwsGroup",
    "group_name",
    "group_workload_shape",
    "groups_of",
    "groups_wanted",
    "pod_defaults",
    "pod_role",
    "template_pod_sets",
    "workload_name",
]

LWS_FRAMEWORK = "leaderworkerset.x-k8s.io/leaderworkerset"
LWS_KIND = "LeaderWorkerSet"
LWS_API_VERSION = "leaderworkerset.x-k8s.io/v1"
_LWS_GROUP = "leaderworkerset.x-k8s.io"
# What the LWS controller writes on its pods.
SET_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
LEADER_NAME_ANNOTATION = "leaderworkerset.sigs.k8s.io/leader-name"
_LWS_PREFIX = "leaderworkerset.sigs.k8s.io"
# Kueue's pod-group and workload metadata.
GROUP_SERVING_ANNOTATION = "kueue.x-k8s.io/pod-group-serving"
PREBUILT_WORKLOAD_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
COMPONENT_INDEX_ANNOTATION = "kueue.x-k8s.io/component-workload-index"
IS_GROUP_WORKLOAD_ANNOTATION = "kueue.x-k8s.io/is-group-workload"
_MANAGED_LABEL = "kueue.x-k8s.io/managed"
GROUP_NAME_LABEL = "kueue.x-k8s.io/pod-group-name"
_TOTAL_COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
_ROLE_HASH_ANNOTATION = "kueue.x-k8s.io/role-hash"
_OWNER_GVK_ANNOTATION = "kueue.x-k8s.io/job-owner-gvk"
_OWNER_NAME_ANNOTATION = "kueue.x-k8s.io/job-owner-name"
_GVK = f"{LWS_API_VERSION}, Kind={LWS_KIND}"
LEADER = "leader"
WORKER = "worker"


@dataclass(frozen=True, slots=True)
class LwsGroup:
    """One group of a LeaderWorkerSet: the job its Workload stands for.

    `metadata` is the LeaderWorkerSet's with the group's name (`<lws>-<index>`); `event_meta`
    the LeaderWorkerSet's own (Events name the set, as Kueue's)."""

    metadata: ObjectMeta
    event_meta: ObjectMeta
    index: int
    size: int
    leader_template: msgspec.Raw | None
    worker_template: msgspec.Raw
    pods: tuple[ManagedPod, ...] = ()
    kind: str = field(default=LWS_KIND)

    @property
    def lws_name(self) -> str:
        return self.event_meta.name


def group_name(lws_name: str, index: int) -> str:
    return f"{lws_name}-{index}"


def workload_name(lws_name: str, lws_uid: str, index: int) -> str:
    """Kueue's Workload name for a group: that of a LeaderWorkerSet named `<lws>-<index>`."""
    return workload_name_for_job(group_name(lws_name, index), lws_uid, LWS_KIND, _LWS_GROUP)


def _clean(raw: msgspec.Raw) -> msgspec.Raw:
    """A template as the Workload records it: without the LWS controller's own labels and
    annotations (the set's name label stays), as Kueue drops them."""
    template = msgspec.json.decode(raw)
    if not isinstance(template, dict):
        return raw
    meta = template.get("metadata")
    if not isinstance(meta, dict):
        return raw
    changed = False
    for section in ("labels", "annotations"):
        values = meta.get(section)
        if not isinstance(values, dict):
            continue
        kept = {k: v for k, v in values.items() if not k.startswith(_LWS_PREFIX) or k == SET_NAME_LABEL}
        if len(kept) != len(values):
            meta[section] = kept
            changed = True
    return msgspec.Raw(msgspec.json.encode(template)) if changed else raw


def template_pod_sets(
    leader: msgspec.Raw | None, worker: msgspec.Raw, size: int
) -> list[tuple[str, msgspec.Raw, int]]:
    """The group's pod sets (name, template, count): `leader` (1) and `worker` (size - 1) with a
    leader template, else `main` (size), as Kueue's."""
    if leader is None:
        return [(JOB_POD_SET, _clean(worker), size)]
    return [(LEADER, _clean(leader), 1), (WORKER, _clean(worker), size - 1)]


def pod_role(pod: ManagedPod, has_leader_template: bool) -> str:
    """A pod's pod set: a worker names its leader; without a leader template every pod is `main`."""
    if not has_leader_template:
        return JOB_POD_SET
    return WORKER if LEADER_NAME_ANNOTATION in pod.metadata.annotations else LEADER


def _group_index(pod: ManagedPod) -> int | None:
    value = pod.metadata.labels.get(GROUP_INDEX_LABEL, "")
    return int(value) if value.isdigit() else None


def _max_surge(lws: LeaderWorkerSet) -> int:
    """`maxSurge` as Kueue reads it (an IntOrString's IntValue: a percentage counts as 0)."""
    config = lws.spec.rollout_strategy.rolling_update_configuration
    value = None if config is None else config.max_surge
    if isinstance(value, int):
        return value
    text = (value or "").strip()
    return int(text) if text.lstrip("-").isdigit() else 0


def groups_wanted(lws: LeaderWorkerSet) -> int:
    """The groups that get a Workload: `spec.replicas`, or during a rolling update with a
    surge (`maxSurge` > 0, fewer groups updated than wanted) the LWS controller's
    `status.replicas` when larger, so the surge groups are queued too (as Kueue's)."""
    wanted = lws.replicas
    surging = _max_surge(lws) > 0 and lws.status.updated_replicas < wanted
    return lws.status.replicas if surging and lws.status.replicas > wanted else wanted


def groups_of(lws: LeaderWorkerSet, pods: Iterable[ManagedPod]) -> list[LwsGroup]:
    """Every group the LeaderWorkerSet wants (`groups_wanted`), each with its pods."""
    by_index: dict[int, list[ManagedPod]] = {}
    for pod in pods:
        index = _group_index(pod)
        if index is not None:
            by_index.setdefault(index, []).append(pod)
    template = lws.spec.leader_worker_template
    groups = []
    for index in range(groups_wanted(lws)):
        meta = msgspec.structs.replace(
            lws.metadata, name=group_name(lws.metadata.name, index), owner_references=[]
        )
        members = tuple(sorted(by_index.get(index, ()), key=lambda p: p.metadata.name))
        groups.append(
            LwsGroup(
                metadata=meta,
                event_meta=lws.metadata,
                index=index,
                size=lws.size,
                leader_template=template.leader_template,
                worker_template=template.worker_template,
                pods=members,
            )
        )
    return groups


def pod_defaults(group: LwsGroup, pod: ManagedPod) -> bytes | None:
    """The merge patch that gives a group's pod Kueue's pod-group metadata (its Workload's name
    as group and prebuilt workload name, the group's size, its role), or None when it has it."""
    if _MANAGED_LABEL in pod.metadata.labels:
        return None
    name = workload_name(group.lws_name, group.metadata.uid, group.index)
    role = pod_role(pod, group.leader_template is not None)
    labels: Mapping[str, str] = {
        _MANAGED_LABEL: "true",
        GROUP_NAME_LABEL: name,
        PREBUILT_WORKLOAD_LABEL: name,
    }
    annotations = {_TOTAL_COUNT_ANNOTATION: str(group.size), _ROLE_HASH_ANNOTATION: role}
    return msgspec.json.encode({"metadata": {"labels": labels, "annotations": annotations}})


def group_workload_shape(group: LwsGroup, workload: Workload) -> Workload:
    """Kueue's Workload for a group, from the one made as for a job named as the group: owned
    by the set (not as its controller), with the group's index and the set's kind and name in
    its annotations."""
    meta = group.event_meta
    owner = OwnerReference(api_version=LWS_API_VERSION, kind=LWS_KIND, name=meta.name, uid=meta.uid)
    annotations = {
        **workload.metadata.annotations,
        COMPONENT_INDEX_ANNOTATION: str(group.index),
        IS_GROUP_WORKLOAD_ANNOTATION: "true",
        _OWNER_GVK_ANNOTATION: _GVK,
        _OWNER_NAME_ANNOTATION: meta.name,
    }
    new_meta = msgspec.structs.replace(workload.metadata, owner_references=[owner], annotations=annotations)
    return msgspec.structs.replace(workload, metadata=new_meta)
