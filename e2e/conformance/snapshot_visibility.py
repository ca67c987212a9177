"""The visibility API's part of a checkpoint (scenarios with `visibility: true`): each ClusterQueue's
and each LocalQueue's pending workloads as `visibility.kueue.x-k8s.io/v1beta2` lists them through
the API server (the manager's server behind the aggregation layer), in their order.

Each entry is one line: its positions in the ClusterQueue and in its LocalQueue, its LocalQueue, its
priority and its owner (`Job/NAME`; Workload names carry a hash that differs in every run). A
server that does not answer yet (the APIService not Available, 503) is asked again.
"""

from __future__ import annotations

import asyncio
from typing import Any

from e2e.testbed import KubeClient, api_path
from e2e.testbed.kubeclient import ApiError

__all__ = ["take_visibility_snapshot"]

Obj = dict[str, Any]
_API = "/apis/visibility.kueue.x-k8s.io/v1beta2"
_KUEUE = "kueue.x-k8s.io/v1beta2"


def _line(item: Obj) -> str:
    refs = item["metadata"].get("ownerReferences") or []
    owner = f"{refs[0]['kind']}/{refs[0]['name']}" if refs else "Workload"
    return (
        f"{item.get('positionInClusterQueue')}/{item.get('positionInLocalQueue')} "
        f"{item.get('localQueueName')} priority={item.get('priority')} {owner}"
    )


async def _pending(kube: KubeClient, path: str, within: float = 60.0) -> list[str]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        try:
            answer = await kube.get(path)
            return [_line(item) for item in answer.get("items") or []]
        except ApiError as err:
            if err.status not in (404, 429, 503) or loop.time() > deadline:
                raise
        await asyncio.sleep(0.5)


async def take_visibility_snapshot(kube: KubeClient, namespaces: tuple[str, ...]) -> dict[str, Any]:
    """`Visibility[ClusterQueue/NAME]` and `Visibility[LocalQueue/NS/NAME]`: their pending lists."""
    out: dict[str, Any] = {}
    cluster_queues = (await kube.get(api_path(_KUEUE, "clusterqueues")))["items"]
    for cq in sorted(c["metadata"]["name"] for c in cluster_queues):
        out[f"Visibility[ClusterQueue/{cq}]"] = await _pending(
            kube, f"{_API}/clusterqueues/{cq}/pendingworkloads"
        )
    for namespace in namespaces:
        local_queues = (await kube.get(api_path(_KUEUE, "localqueues", namespace)))["items"]
        for lq in sorted(q["metadata"]["name"] for q in local_queues):
            path = f"{_API}/namespaces/{namespace}/localqueues/{lq}/pendingworkloads"
            out[f"Visibility[LocalQueue/{namespace}/{lq}]"] = await _pending(kube, path)
    return out
