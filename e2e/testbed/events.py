"""Pod Events as a kubelet records them (core/v1 Events, source ``kubelet``).

A repeated Event (same pod, reason and message) is not created again: its
``count`` and ``lastTimestamp`` are bumped, as the kubelet's event correlator
does, so ``kubectl describe pod`` shows ``(x5 over 20s)``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import aiohttp

from e2e.testbed.kubeclient import MERGE_PATCH, ApiError, KubeClient, Obj, api_path
from e2e.testbed.timeutil import rfc3339

log = logging.getLogger(__name__)


@dataclass
class _Recorded:
    name: str
    count: int


class EventRecorder:
    def __init__(self, kube: KubeClient, component: str = "kubelet") -> None:
        self._kube = kube
        self._component = component
        self._recorded: dict[tuple[str, str, str], _Recorded] = {}

    async def record(self, pod: Obj, node: str, event_type: str, reason: str, message: str) -> None:
        """Create (or bump) an Event about ``pod``; API failures are logged, never raised."""
        meta = pod["metadata"]
        key = (meta["uid"], reason, message)
        stamp = rfc3339()
        try:
            known = self._recorded.get(key)
            if known is not None:
                known.count += 1
                await self._kube.patch(
                    api_path("v1", "events", meta["namespace"], known.name),
                    {"count": known.count, "lastTimestamp": stamp},
                    MERGE_PATCH,
                )
                return
            name = f"{meta['name']}.{time.time_ns():x}"
            body: Obj = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": meta["namespace"]},
                "involvedObject": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "namespace": meta["namespace"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                },
                "type": event_type,
                "reason": reason,
                "message": message,
                "source": {"component": self._component, "host": node},
                "reportingComponent": self._component,
                "reportingInstance": node,
                "firstTimestamp": stamp,
                "lastTimestamp": stamp,
                "eventTime": None,
                "count": 1,
            }
            await self._kube.create(api_path("v1", "events", meta["namespace"]), body)
            self._recorded[key] = _Recorded(name, 1)
        except (ApiError, aiohttp.ClientError, OSError, TimeoutError) as err:
            log.warning(
                "recording event %s for pod %s/%s failed: %s", reason, meta["namespace"], meta["name"], err
            )
            if isinstance(err, ApiError) and err.status == 404:
                self._recorded.pop(key, None)  # the Event expired or went with its namespace

    def forget(self, pod_uid: str) -> None:
        """Drop what was recorded for a pod that is gone."""
        for key in [k for k in self._recorded if k[0] == pod_uid]:
            del self._recorded[key]
