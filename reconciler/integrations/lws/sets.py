"""LeaderWorkerSet (leaderworkerset.x-k8s.io/v1) behind the integration protocol, as Kueue v0.18.1's
`leaderworkerset.x-k8s.io/leaderworkerset` framework treats it.

The job here is one group of the set (`lwsgroup.LwsGroup`): Kueue gives each group its own
Workload, with a `leader` pod set of one pod and a `worker` pod set of size - 1 (one `main` pod
set of size pods without a leader template). The set's webhook marks both pod templates as
suspended by their parent, and the pod webhook holds every pod of the set at the scheduling
gate `kueue.x-k8s.io/admission` (no finalizer: the parent is Kueue's). A group is suspended
while one of its pods is gated or ended, as a Kueue pod group; starting removes the gate from
each gated pod with its role's flavor node labels, tolerations and pod set label, one write per
pod. A running group cannot be suspended: stopping deletes its running pods (the LWS controller
then recreates the group, gated again). The group serves: its Workload never finishes from its
pods (Kueue's serving pod groups); it goes when the set scales down or is deleted. PodsReady is
every pod of the group there and Ready.

`start_patch` and `suspend_patch` describe per-pod writes (the runtime's LeaderWorkerSet jobs
perform them): a JSON object of pod name -> merge patch, and a JSON list of pod names to delete.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

import msgspec

from reconciler.api import PodSet, Workload
from reconciler.api.lws import LeaderWorkerSet
from reconciler.api.pods import ManagedPod
from reconciler.api.resources import LEADERWORKERSETS, Resource
from reconciler.core.model.workloads import JOB_POD_SET

from ..base import Patch, PodSetStart
from ..pods.pod import POD
from ..pods.serving import ServingGroupRules, ended, gated
from .group import (
    GROUP_NAME_LABEL,
    LWS_API_VERSION,
    LWS_FRAMEWORK,
    LWS_KIND,
    SET_NAME_LABEL,
    LwsGroup,
    group_workload_shape,
    groups_of,
    pod_defaults,
    pod_role,
    template_pod_sets,
    workload_name,
)

__all__ = ["LEADER_WORKER_SET", "LeaderWorkerSetIntegration", "group_pods_to_stop", "group_start_patches"]


def group_start_patches(body: bytes) -> dict[str, bytes]:
    """The per-pod merge patches a `start_patch` describes, by pod name."""
    decoded: dict[str, Any] = msgspec.json.decode(body)
    return {name: msgspec.json.encode(patch) for name, patch in decoded.items()}


def group_pods_to_stop(body: bytes) -> list[str]:
    """The pods a `suspend_patch` names for deletion."""
    names: list[str] = msgspec.json.decode(body, type=list[str])
    return names


class LeaderWorkerSetIntegration(ServingGroupRules[LwsGroup]):
    """Kueue's `leaderworkerset.x-k8s.io/leaderworkerset` framework, one group at a time."""

    framework: str = LWS_FRAMEWORK
    kind: str = LWS_KIND
    api_version: str = LWS_API_VERSION
    resource: Resource = LEADERWORKERSETS
    # What is watched (the jobs themselves are the groups, made from it and its pods).
    projection: type[Any] = LeaderWorkerSet
    stop_deletes: bool = True
    top_level: bool = True
    jobs_from_pods: bool = True
    topology_placement: None = None

    def set_of_pod(self, pod: ManagedPod) -> str | None:
        return pod.metadata.labels.get(SET_NAME_LABEL) or None

    def groups_of(self, obj: LeaderWorkerSet, pods: Iterable[ManagedPod]) -> list[LwsGroup]:
        return groups_of(obj, pods)

    def group_workload_name(self, group: LwsGroup) -> str:
        return workload_name(group.lws_name, group.metadata.uid, group.index)

    def in_group(self, pod: ManagedPod, workload_name: str) -> bool:
        return pod.metadata.labels.get(GROUP_NAME_LABEL) == workload_name

    def pod_defaults(self, group: LwsGroup, pod: ManagedPod) -> bytes | None:
        return pod_defaults(group, pod)

    def group_workload_shape(self, group: LwsGroup, workload: Workload) -> Workload:
        return group_workload_shape(group, workload)

    def release_patch(self, obj: LwsGroup) -> Patch | None:
        return None  # the pods of a set carry no finalizer of Kueue's

    def pod_sets(self, obj: LwsGroup) -> list[PodSet]:
        return [
            PodSet(name=name, template=template, count=count)
            for name, template, count in template_pod_sets(obj.leader_template, obj.worker_template, obj.size)
        ]

    def is_suspended(self, obj: LwsGroup) -> bool:
        return any(gated(p) or ended(p) for p in obj.pods)

    def group_size(self, obj: LwsGroup) -> int:
        return obj.size

    def start_patch(self, obj: LwsGroup, starts: Sequence[PodSetStart]) -> bytes:
        by_name = {s.name: s for s in starts}
        leader = obj.leader_template is not None
        patches: dict[str, Any] = {}
        for pod in obj.pods:
            if not gated(pod):
                continue
            role = pod_role(pod, leader)
            start = replace(by_name.get(role, PodSetStart(role)), name=JOB_POD_SET)
            patches[pod.metadata.name] = msgspec.json.decode(POD.start_patch(pod, [start]))
        return msgspec.json.encode(patches)


LEADER_WORKER_SET = LeaderWorkerSetIntegration()
