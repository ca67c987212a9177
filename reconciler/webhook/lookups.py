"""What a webhook asks the API: whether a namespace has a LocalQueue named ``default``; for the
pod webhook also a Namespace's labels and the metadata of a pod's controlling job; for a managed
job's child, whether its parent's Workload is admitted.

Answers are kept for a few seconds (a burst of Jobs in one namespace asks once); every lookup
is bounded by ``timeout`` seconds, well inside the API server's webhook timeout, and an answer
that cannot be had raises (the webhook then refuses the request rather than guess).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import msgspec

from reconciler.admission.queue_rules import DEFAULT_LOCAL_QUEUE
from reconciler.api.meta import ObjectMeta
from reconciler.api.resources import LOCAL_QUEUES, NAMESPACES, WORKLOADS, Resource
from reconciler.kube import KubeClient, NotFound

__all__ = ["ApiLookups"]


class _Object(msgspec.Struct):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)


class _Condition(msgspec.Struct):
    type: str = ""
    status: str = ""


class _WorkloadStatus(msgspec.Struct):
    conditions: list[_Condition] = msgspec.field(default_factory=list)


class _Workload(msgspec.Struct):
    status: _WorkloadStatus = msgspec.field(default_factory=_WorkloadStatus)


@dataclass
class ApiLookups:
    client: KubeClient
    # The enabled kinds whose objects may control a pod the pod webhook looks at.
    job_resources: tuple[Resource, ...] = ()
    ttl: float = 5.0
    timeout: float = 3.0
    monotonic: Callable[[], float] = time.monotonic
    _known: dict[str, tuple[float, bool]] = field(default_factory=dict)

    async def default_local_queue_exists(self, namespace: str) -> bool:
        now = self.monotonic()
        cached = self._known.get(namespace)
        if cached is not None and now - cached[0] < self.ttl:
            return cached[1]
        path = LOCAL_QUEUES.item_path(namespace, DEFAULT_LOCAL_QUEUE)
        try:
            async with asyncio.timeout(self.timeout):
                await self.client.request("GET", path, timeout=self.timeout)
            exists = True
        except NotFound:
            exists = False
        except TimeoutError:
            raise TimeoutError(f"no answer from the API server within {self.timeout:.0f}s") from None
        if len(self._known) > 10_000:
            self._known.clear()
        self._known[namespace] = (now, exists)
        return exists

    async def _get(self, path: str) -> bytes | None:
        try:
            async with asyncio.timeout(self.timeout):
                return await self.client.request("GET", path, timeout=self.timeout)
        except NotFound:
            return None
        except TimeoutError:
            raise TimeoutError(f"no answer from the API server within {self.timeout:.0f}s") from None

    async def namespace_labels(self, namespace: str) -> dict[str, str]:
        path = NAMESPACES.item_path(None, namespace)
        body = await self._get(path)
        return {} if body is None else msgspec.json.decode(body, type=_Object).metadata.labels

    async def object_meta(self, api_version: str, kind: str, namespace: str, name: str) -> ObjectMeta | None:
        for resource in self.job_resources:
            if (resource.api_version, resource.kind) == (api_version, kind):
                path = resource.item_path(namespace, name)
                body = await self._get(path)
                return None if body is None else msgspec.json.decode(body, type=_Object).metadata
        return None

    async def workload_admitted(self, namespace: str, name: str) -> bool:
        body = await self._get(WORKLOADS.item_path(namespace, name))
        if body is None:
            return False
        conditions = msgspec.json.decode(body, type=_Workload).status.conditions
        return any(c.type in ("QuotaReserved", "Admitted") and c.status == "True" for c in conditions)
