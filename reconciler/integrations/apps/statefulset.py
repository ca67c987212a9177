"""StatefulSets (apps/v1) behind the integration protocol, as Kueue v0.18.1's `statefulset`
framework treats them: the set's pods are one serving pod group.

Kueue makes the group's Workload from the set, not from its pods (a prebuilt Workload): named as
a job named after the set of kind StatefulSet with the set's UID, one pod set `main` of
`spec.replicas` pods whose template is the set's pod spec, owned (not controlled) by the set,
marked a group Workload with the set's kind and name. The set's webhook marks its pod template
as suspended by its parent (``kueue.x-k8s.io/pod-suspending-parent: statefulset``), so the pod
webhook holds each pod at the admission gate; each pod then gets Kueue's pod-group metadata
(managed, queue name, the Workload's name as group and prebuilt workload name, the replicas as
total count, fast admission, serving, the pod index label, role `main`) and becomes an owner of
the Workload.

A `StsGroup` is that one job: the set's metadata, its template and its pods. It is suspended
while one of its pods is gated or ended; starting ungates each gated pod with the flavor's node
labels and tolerations, one write per pod (a pod the StatefulSet controller makes later, or
remakes after a deletion or failure, is ungated under the same admitted Workload, which keeps
its quota meanwhile). Stopping deletes the running pods. The group serves: its Workload never
finishes from its pods; it goes when the set is scaled to zero or deleted.

`start_patch` and `suspend_patch` describe per-pod writes, as a LeaderWorkerSet group's do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from reconciler.api import PodSet, Workload
from reconciler.api.apps import StatefulSet
from reconciler.api.meta import ObjectMeta, OwnerReference
from reconciler.api.pods import ManagedPod
from reconciler.api.resources import STATEFULSETS, Resource
from reconciler.core.model.workloads import JOB_POD_SET, QUEUE_NAME_LABEL, workload_name_for_job
from reconciler.core.primitives.priority import PRIORITY_CLASS_LABEL

from ..base import Patch, PodSetStart
from ..children import SUSPENDING_PARENT_ANNOTATION
from ..pods.pod import (
    FAST_ADMISSION_ANNOTATION,
    GROUP_NAME_LABEL,
    GROUP_TOTAL_COUNT_ANNOTATION,
    POD,
    POD_INDEX_LABEL_ANNOTATION,
    ROLE_HASH_ANNOTATION,
    SERVING_ANNOTATION,
)
from ..pods.serving import ServingGroupRules, ended, gated

__all__ = ["STATEFUL_SET", "STS_FRAMEWORK", "STS_KIND", "StatefulSetIntegration", "StsGroup"]

STS_FRAMEWORK = "statefulset"
STS_KIND = "StatefulSet"
STS_API_VERSION = "apps/v1"
_GVK = "apps/v1, Kind=StatefulSet"
_MANAGED_LABEL = "kueue.x-k8s.io/managed"
PREBUILT_WORKLOAD_ANNOTATION = "kueue.x-k8s.io/prebuilt-workload-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
IS_GROUP_WORKLOAD_ANNOTATION = "kueue.x-k8s.io/is-group-workload"
_OWNER_GVK_ANNOTATION = "kueue.x-k8s.io/job-owner-gvk"
_OWNER_NAME_ANNOTATION = "kueue.x-k8s.io/job-owner-name"


@dataclass(frozen=True, slots=True)
class StsGroup:
    """A StatefulSet's pods as the one job its Workload stands for; `metadata` is the set's
    (without owners), `event_meta` the set's own."""

    metadata: ObjectMeta
    event_meta: ObjectMeta
    replicas: int
    template: msgspec.Raw
    pods: tuple[ManagedPod, ...] = ()
    kind: str = field(default=STS_KIND)

    @property
    def set_name(self) -> str:
        return self.event_meta.name


def _spec_only(template: msgspec.Raw) -> msgspec.Raw:
    """The pod set's template as Kueue records it: the set's pod spec, without its metadata."""
    decoded = msgspec.json.decode(template)
    spec = decoded.get("spec") if isinstance(decoded, dict) else None
    return msgspec.Raw(msgspec.json.encode({"spec": spec or {}}))


class StatefulSetIntegration(ServingGroupRules[StsGroup]):
    """Kueue's `statefulset` framework: the set's pods as one serving group."""

    framework: str = STS_FRAMEWORK
    kind: str = STS_KIND
    api_version: str = STS_API_VERSION
    resource: Resource = STATEFULSETS
    projection: type[Any] = StatefulSet
    stop_deletes: bool = True
    top_level: bool = True
    jobs_from_pods: bool = True
    topology_placement: None = None

    # --- the set's groups, for the runtime of kinds whose jobs are made from their pods --------

    def set_of_pod(self, pod: ManagedPod) -> str | None:
        """The StatefulSet a pod is one of: its controller, when its template was marked."""
        if pod.metadata.annotations.get(SUSPENDING_PARENT_ANNOTATION) != STS_FRAMEWORK:
            return None
        ref = next((r for r in pod.metadata.owner_references if r.controller), None)
        if ref is None or (ref.kind, ref.api_version) != (STS_KIND, STS_API_VERSION):
            return None
        return ref.name

    def groups_of(self, sts: StatefulSet, pods: Iterable[ManagedPod]) -> list[StsGroup]:
        """The set's one group while it wants pods (none when scaled to zero)."""
        if sts.replicas <= 0:
            return []
        meta = msgspec.structs.replace(sts.metadata, owner_references=[])
        members = tuple(sorted(pods, key=lambda p: p.metadata.name))
        return [StsGroup(meta, sts.metadata, sts.replicas, sts.spec.template, members)]

    def group_workload_name(self, group: StsGroup) -> str:
        return workload_name_for_job(group.set_name, group.event_meta.uid, STS_KIND, "apps")

    def in_group(self, pod: ManagedPod, workload_name: str) -> bool:
        return pod.metadata.annotations.get(GROUP_NAME_LABEL) == workload_name

    def pod_defaults(self, group: StsGroup, pod: ManagedPod) -> bytes | None:
        """Kueue's pod-group metadata for a set's pod (see the module's docstring), or only its
        queue name when the set's changed; None when it has them."""
        name = self.group_workload_name(group)
        queue = group.event_meta.labels.get(QUEUE_NAME_LABEL, "")
        if self.in_group(pod, name):
            if queue and pod.metadata.labels.get(QUEUE_NAME_LABEL) != queue:
                return msgspec.json.encode({"metadata": {"labels": {QUEUE_NAME_LABEL: queue}}})
            return None
        labels = {_MANAGED_LABEL: "true"}
        labels |= {
            k: v for k in (QUEUE_NAME_LABEL, PRIORITY_CLASS_LABEL) if (v := group.event_meta.labels.get(k))
        }
        annotations: Mapping[str, str] = {
            PREBUILT_WORKLOAD_ANNOTATION: name,
            GROUP_NAME_LABEL: name,
            GROUP_TOTAL_COUNT_ANNOTATION: str(group.replicas),
            FAST_ADMISSION_ANNOTATION: "true",
            SERVING_ANNOTATION: "true",
            POD_INDEX_LABEL_ANNOTATION: POD_INDEX_LABEL,
            ROLE_HASH_ANNOTATION: JOB_POD_SET,
        }
        return msgspec.json.encode({"metadata": {"labels": labels, "annotations": annotations}})

    def group_workload_shape(self, group: StsGroup, workload: Workload) -> Workload:
        """Kueue's Workload for the set: owned by it (not as its controller), marked a group
        Workload with the set's kind and name."""
        meta = group.event_meta
        owner = OwnerReference(api_version=STS_API_VERSION, kind=STS_KIND, name=meta.name, uid=meta.uid)
        annotations = {
            **workload.metadata.annotations,
            IS_GROUP_WORKLOAD_ANNOTATION: "true",
            _OWNER_GVK_ANNOTATION: _GVK,
            _OWNER_NAME_ANNOTATION: meta.name,
        }
        new_meta = msgspec.structs.replace(
            workload.metadata, owner_references=[owner], annotations=annotations
        )
        return msgspec.structs.replace(workload, metadata=new_meta)

    # --- the integration protocol --------------------------------------------------------------

    def release_patch(self, obj: StsGroup) -> Patch | None:
        return None  # the set's pods carry no finalizer of Kueue's

    def pod_sets(self, obj: StsGroup) -> list[PodSet]:
        return [PodSet(name=JOB_POD_SET, template=_spec_only(obj.template), count=obj.replicas)]

    def is_suspended(self, obj: StsGroup) -> bool:
        return not obj.pods or any(gated(p) or ended(p) for p in obj.pods)

    def group_size(self, obj: StsGroup) -> int:
        return obj.replicas

    def start_patch(self, obj: StsGroup, starts: Sequence[PodSetStart]) -> bytes:
        start = next((s for s in starts if s.name == JOB_POD_SET), PodSetStart(JOB_POD_SET))
        patches = {
            p.metadata.name: msgspec.json.decode(POD.start_patch(p, [start])) for p in obj.pods if gated(p)
        }
        return msgspec.json.encode(patches)


STATEFUL_SET = StatefulSetIntegration()
