"""RayCluster (ray.io/v1) behind the integration protocol, as Kueue v0.18.1's
`ray.io/raycluster` framework treats it.

Pod sets: ``head`` and one per worker group (`templates`). Starting sets ``spec.suspend: false``
and merges each pod set's start into its template in the same write; stopping sets
``spec.suspend: true`` (KubeRay then deletes the cluster's pods); restoring gives the templates
back what the Workload recorded. As Kueue reads a RayCluster: it is active, and its pods ready,
when its ``status.state`` is ``ready``; it never finishes (a cluster serves until it is deleted).
A RayCluster controlled by a managed RayJob is that RayJob's child: never admitted on its own.

At the door (`ray.webhooks`): the default LocalQueue, ``spec.suspend: true`` for a managed
cluster (not for one whose controller is a managed job), the queue-name rules and Kueue's own
(`rules.raycluster_rules`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from reconciler.api import PodSet
from reconciler.api.ray import RAYCLUSTERS, RayCluster, RayClusterSpec
from reconciler.api.resources import Resource
from reconciler.core.model.jobs import PODSET_LABEL

from ..base import Outcome, Patch, PodSetStart, SuspendableJob
from .templates import (
    by_name_injecting,
    by_name_restoring,
    cluster_pod_sets,
    merge_diff,
    rewrite_cluster_spec,
)

__all__ = ["RAYCLUSTER", "RayClusterIntegration", "cluster_spec_dict", "templates_carry_start"]

_PODSET_LABEL_BYTES = PODSET_LABEL.encode()
READY = "ready"


def cluster_spec_dict(spec: RayClusterSpec) -> dict[str, Any]:
    """The parts of a cluster spec that hold pod templates, decoded as read."""
    out: dict[str, Any] = {"workerGroupSpecs": [msgspec.json.decode(r) for r in spec.worker_group_specs]}
    if bytes(spec.head_group_spec) not in (b"", b"null"):
        out["headGroupSpec"] = msgspec.json.decode(spec.head_group_spec)
    return out


def templates_carry_start(spec: RayClusterSpec) -> bool:
    """Whether a pod template of the cluster spec carries what starting injected."""
    return bytes(spec.head_group_spec).find(_PODSET_LABEL_BYTES) >= 0 or any(
        bytes(r).find(_PODSET_LABEL_BYTES) >= 0 for r in spec.worker_group_specs
    )


class RayClusterIntegration(SuspendableJob):
    """Kueue's `ray.io/raycluster` framework."""

    framework: str = "ray.io/raycluster"
    kind: str = "RayCluster"
    api_version: str = "ray.io/v1"
    resource: Resource = RAYCLUSTERS
    projection: type[Any] = RayCluster

    def pod_sets(self, obj: RayCluster) -> list[PodSet]:
        return cluster_pod_sets(obj.spec)

    def is_suspended(self, obj: RayCluster) -> bool:
        return bool(obj.spec.suspend)

    def start_patch(self, obj: RayCluster, starts: Sequence[PodSetStart]) -> bytes:
        old = cluster_spec_dict(obj.spec)
        new = msgspec.json.decode(msgspec.json.encode(old))
        rewrite_cluster_spec(new, by_name_injecting(starts))
        return msgspec.json.encode({"spec": {"suspend": False, **(merge_diff(old, new) or {})}})

    def suspend_patch(self, obj: RayCluster) -> bytes:
        return b'{"spec":{"suspend":true}}'

    def restore_pending(self, obj: RayCluster) -> bool:
        return templates_carry_start(obj.spec)

    def restore_patch(self, obj: RayCluster, recorded: Sequence[PodSet]) -> Patch | None:
        old = cluster_spec_dict(obj.spec)
        new = msgspec.json.decode(msgspec.json.encode(old))
        rewrite_cluster_spec(new, by_name_restoring(recorded))
        diff = merge_diff(old, new)
        return None if diff is None else Patch(msgspec.json.encode({"spec": diff}))

    def is_active(self, obj: RayCluster) -> bool:
        return obj.status.state == READY

    def pods_ready(self, obj: RayCluster) -> bool:
        return obj.status.state == READY

    def pods_ready_count(self, obj: RayCluster) -> int:
        """Every pod of the cluster once its state is ``ready`` (Kueue's PodsReady), else 0."""
        return sum(ps.count or 0 for ps in self.pod_sets(obj)) if self.pods_ready(obj) else 0

    def finished(self, obj: RayCluster) -> Outcome | None:
        return None  # Kueue never finishes a RayCluster's Workload from the cluster

    def reclaimable_pods(self, obj: RayCluster) -> Mapping[str, int]:
        return {}

    def owns(self, obj: RayCluster, owner_kind: str, owner_api_version: str, owner_name: str) -> bool:
        return (owner_kind, owner_api_version, owner_name) == (self.kind, self.api_version, obj.metadata.name)


RAYCLUSTER = RayClusterIntegration()
