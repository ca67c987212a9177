"""What the integrations of serving pod groups share (a StatefulSet's pods, a LeaderWorkerSet
group's pods): the group is its pods, held at the admission gate until admitted.

A group is suspended while one of its pods is gated or ended; stopping deletes its running pods
(described by `suspend_patch` as a JSON list of their names); nothing is restored (the pods are
made again by their controller); it is active while a pod runs and ready when every pod it
should have is there and Ready. The group serves: its Workload never finishes from its pods, and
no pod's quota is reclaimed. Its pods are known by their set, never by a controller reference to
the group, so it owns nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Generic, Protocol, TypeVar

import msgspec

from reconciler.api import PodSet
from reconciler.api.pods import ManagedPod
from reconciler.core.model.jobs import PODSET_LABEL, TERMINATED_PHASES

from ..base import Outcome, Patch
from .pod import ADMISSION_GATE

__all__ = ["ServingGroup", "ServingGroupRules", "ended", "gated", "ready"]


def gated(pod: ManagedPod) -> bool:
    """Held at Kueue's admission gate."""
    return any(g.name == ADMISSION_GATE for g in pod.spec_view().scheduling_gates)


def ended(pod: ManagedPod) -> bool:
    return pod.status.phase in TERMINATED_PHASES


def ready(pod: ManagedPod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions)


class ServingGroup(Protocol):
    @property
    def pods(self) -> tuple[ManagedPod, ...]: ...


G = TypeVar("G", bound=ServingGroup)


class ServingGroupRules(Generic[G]):
    """The protocol's answers that are the same for every serving group; a kind says how many
    pods its group should have (`group_size`) and adds the rest."""

    def group_size(self, obj: G) -> int:
        raise NotImplementedError

    def suspend_patch(self, obj: G) -> bytes:
        running = [
            p.metadata.name
            for p in obj.pods
            if not gated(p) and not ended(p) and p.metadata.deletion_timestamp is None
        ]
        return msgspec.json.encode(running)

    def restore_pending(self, obj: G) -> bool:
        return any(PODSET_LABEL in p.metadata.labels for p in obj.pods)

    def restore_patch(self, obj: G, recorded: Sequence[PodSet]) -> Patch | None:
        return None  # pods are deleted, never restored

    def is_active(self, obj: G) -> bool:
        return any(p.status.phase == "Running" for p in obj.pods)

    def pods_ready(self, obj: G) -> bool:
        return len(obj.pods) >= self.group_size(obj) and all(ready(p) for p in obj.pods)

    def pods_ready_count(self, obj: G) -> int:
        return sum(1 for p in obj.pods if ready(p))

    def finished(self, obj: G) -> Outcome | None:
        return None  # a serving group: its Workload goes with its set, never finished by its pods

    def reclaimable_pods(self, obj: G) -> Mapping[str, int]:
        return {}

    def owns(self, obj: G, owner_kind: str, owner_api_version: str, owner_name: str) -> bool:
        return False  # the group's pods are known by their set, not by a controller reference
