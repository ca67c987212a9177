"""RayCluster and RayJob bodies for the ray integrations' tests: a head (CPU) and worker groups
whose pods may ask for GPUs through a ResourceClaimTemplate (named per group)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from reconciler.api.ray import RayCluster, RayJob

__all__ = ["GROUPS", "WG", "raycluster_body", "raycluster_of", "rayjob_body", "rayjob_of"]

# (group name, replicas or None, claim template or None)
WG = tuple[str, int | None, str | None]
# A GPU worker group of two pods, each with one GPU from the template gpu-b.
GROUPS: list[WG] = [("gpu-workers", 2, "gpu-b")]


def _pod(claim: str | None, image: str = "rayproject/ray:2.46.0") -> dict[str, Any]:
    pod: dict[str, Any] = {
        "containers": [{"name": "ray", "image": image, "resources": {"requests": {"cpu": "1"}}}]
    }
    if claim is not None:
        pod["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": claim}]
        pod["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return {"spec": pod}


def cluster_spec(groups: Sequence[WG], head_claim: str | None = None) -> dict[str, Any]:
    workers = []
    for name, replicas, claim in groups:
        group: dict[str, Any] = {
            "groupName": name,
            "rayStartParams": {},
            "minReplicas": 0,
            "maxReplicas": 4,
            "template": _pod(claim),
        }
        if replicas is not None:
            group["replicas"] = replicas
        workers.append(group)
    return {
        "headGroupSpec": {"rayStartParams": {"dashboard-host": "0.0.0.0"}, "template": _pod(head_claim)},
        "workerGroupSpecs": workers,
    }


def _meta(name: str, queue: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "labels": {}}
    if queue is not None:
        meta["labels"]["kueue.x-k8s.io/queue-name"] = queue
    return meta


def raycluster_body(
    name: str, groups: Sequence[WG] = GROUPS, *, queue: str | None = "lq", suspend: bool | None = True
) -> dict[str, Any]:
    spec = cluster_spec(groups)
    if suspend is not None:
        spec["suspend"] = suspend
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": _meta(name, queue), "spec": spec}


def rayjob_body(
    name: str,
    groups: Sequence[WG] = GROUPS,
    *,
    queue: str | None = "lq",
    suspend: bool = True,
    mode: str = "K8sJobMode",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "entrypoint": "python -c 'print(1)'",
        "shutdownAfterJobFinishes": True,
        "submissionMode": mode,
        "suspend": suspend,
        "rayClusterSpec": cluster_spec(groups),
    }
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": _meta(name, queue), "spec": spec}


def raycluster_of(body: dict[str, Any]) -> RayCluster:
    decoded: RayCluster = msgspec.json.decode(msgspec.json.encode(body), type=RayCluster)
    return decoded


def rayjob_of(body: dict[str, Any]) -> RayJob:
    decoded: RayJob = msgspec.json.decode(msgspec.json.encode(body), type=RayJob)
    return decoded
