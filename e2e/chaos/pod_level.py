"""The pod-level checker: the GPUs held by pods per ClusterQueue against its nominal quota.

Every ``interval`` s one list of all pods (one consistent snapshot of the API). A pod holds its
GPUs from the moment it is bound to a node (``spec.nodeName``: Pending while its claims are
prepared, then Running) until it ends (Succeeded or Failed); each of its ``resourceClaims`` is one
GPU (the flood's template ``single-gpu``). Its ClusterQueue is that of its namespace's LocalQueue
(one per namespace in the flood). A sample in which a ClusterQueue's pods hold more GPUs than its
``nvidia.com/gpu`` nominal quota is an over-commit, kept with the pods that held them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from e2e.support.flood import GPU, TRANSIENT, QueueSetup, parse_cpu
from e2e.testbed import ApiError, KubeClient, api_path


@dataclass
class PodLevelChecker:
    queues: list[QueueSetup]
    margin: int = 0  # GPUs less than the nominal quota the pods are held to (to see the checker bite)
    interval: float = 0.5
    samples: int = 0
    errors: int = 0
    peaks: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    overcommits: list[str] = field(default_factory=list)
    _stopping: bool = False

    def quota(self, cluster_queue: str) -> int:
        nominal = next(parse_cpu(q.quota[GPU]) for q in self.queues if q.cluster_queue == cluster_queue)
        return nominal - self.margin

    @contextlib.asynccontextmanager
    async def running(self, kube: KubeClient) -> AsyncIterator[PodLevelChecker]:
        task = asyncio.get_running_loop().create_task(self._loop(kube), name="pod-level")
        try:
            yield self
            await asyncio.wait_for(self.sample(kube), timeout=30)
        finally:
            self._stopping = True
            task.cancel()
            await asyncio.wait([task], timeout=10)

    async def _loop(self, kube: KubeClient) -> None:
        while not self._stopping:
            began = time.monotonic()
            try:
                await asyncio.wait_for(self.sample(kube), timeout=15)
            except (TimeoutError, ApiError, *TRANSIENT):
                self.errors += 1
            await asyncio.sleep(max(0.0, self.interval - (time.monotonic() - began)))

    async def sample(self, kube: KubeClient) -> None:
        by_namespace = {q.namespace: q.cluster_queue for q in self.queues}
        pods = (await kube.get(api_path("v1", "pods")))["items"]
        self.samples += 1
        held: dict[str, int] = defaultdict(int)
        holders: dict[str, list[str]] = defaultdict(list)
        for pod in pods:
            cq = by_namespace.get(pod["metadata"]["namespace"])
            phase = (pod.get("status") or {}).get("phase")
            if cq is None or not pod["spec"].get("nodeName") or phase in ("Succeeded", "Failed"):
                continue
            gpus = len(pod["spec"].get("resourceClaims") or [])
            if gpus:
                held[cq] += gpus
                holders[cq].append(f"{pod['metadata']['name']}@{pod['spec']['nodeName']}:{phase}")
        for cq, count in held.items():
            self.peaks[cq] = max(self.peaks[cq], count)
            if count > self.quota(cq):
                stamp = time.strftime("%H:%M:%S", time.gmtime())
                self.overcommits.append(
                    f"{stamp}Z pods of {cq} hold {count} GPUs > quota {self.quota(cq)}: {sorted(holders[cq])}"
                )

    def summary(self) -> str:
        peaks = ", ".join(
            f"{q.cluster_queue}={self.peaks.get(q.cluster_queue, 0)}/{self.quota(q.cluster_queue)}"
            for q in self.queues
        )
        return f"samples={self.samples} errors={self.errors} peak/quota: {peaks}"
