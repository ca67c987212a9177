"""List-then-watch with a local cache, robust to broken streams and 410 Gone.

One ``Informer`` follows one collection: it lists (paged), then watches from
the list's resourceVersion, re-watches from the last seen version when a
stream ends, and relists on 410 or an ERROR event. A relist reports the
difference to the cache as ADDED / MODIFIED / DELETED events, so handlers
never miss a deletion that happened while the stream was down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from e2e.testbed.kubeclient import ApiError, KubeClient, Obj

Handler = Callable[[str, Obj], Awaitable[None]]
log = logging.getLogger(__name__)


class _GoneError(Exception):
    pass


def object_key(obj: Obj) -> str:
    meta: dict[str, Any] = obj.get("metadata", {})
    ns = meta.get("namespace")
    return f"{ns}/{meta['name']}" if ns else str(meta["name"])


class Informer:
    def __init__(
        self,
        kube: KubeClient,
        path: str,
        handler: Handler,
        *,
        params: dict[str, str] | None = None,
        name: str = "",
        watch_timeout: int = 240,
    ) -> None:
        self._kube = kube
        self._path = path
        self._handler = handler
        self._params = dict(params or {})
        self.name = name or path
        self._watch_timeout = watch_timeout
        self.cache: dict[str, Obj] = {}
        self.synced = asyncio.Event()

    async def run(self) -> None:
        """Run until cancelled."""
        resource_version: str | None = None
        failures = 0
        while True:
            try:
                if resource_version is None:
                    resource_version = await self._relist()
                resource_version = await self._watch_once(resource_version)
                failures = 0
            except _GoneError:
                log.info("%s: resourceVersion too old, relisting", self.name)
                resource_version = None
            except (aiohttp.ClientError, OSError, TimeoutError, ApiError, ValueError) as err:
                failures += 1
                delay = min(5.0, 0.2 * 2 ** min(failures, 5)) * random.uniform(0.8, 1.2)
                log.warning("%s: %s; retrying in %.1fs", self.name, err, delay)
                if isinstance(err, ApiError) and err.status == 410:
                    resource_version = None
                await asyncio.sleep(delay)

    async def _relist(self) -> str:
        items, resource_version = await self._kube.list_all(self._path, self._params)
        fresh = {object_key(item): item for item in items}
        stale = [key for key in self.cache if key not in fresh]
        for key in stale:
            await self._deliver("DELETED", self.cache.pop(key))
        for key, item in fresh.items():
            old = self.cache.get(key)
            self.cache[key] = item
            if old is None:
                await self._deliver("ADDED", item)
            elif old["metadata"].get("resourceVersion") != item["metadata"].get("resourceVersion"):
                await self._deliver("MODIFIED", item)
        self.synced.set()
        return resource_version

    async def _watch_once(self, resource_version: str) -> str:
        params = dict(self._params, resourceVersion=resource_version)
        timeout = self._watch_timeout + random.randint(0, 30)
        stream = self._kube.watch(self._path, params, timeout_seconds=timeout)
        async with contextlib.aclosing(stream):
            async for event in stream:
                kind = event.get("type")
                obj: Obj = event.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        raise _GoneError
                    raise ApiError(int(obj.get("code") or 500), obj, "WATCH", self._path)
                new_version = obj.get("metadata", {}).get("resourceVersion")
                if new_version:
                    resource_version = new_version
                if kind == "BOOKMARK":
                    continue
                key = object_key(obj)
                if kind == "DELETED":
                    self.cache.pop(key, None)
                else:
                    self.cache[key] = obj
                await self._deliver(str(kind), obj)
        return resource_version

    async def _deliver(self, kind: str, obj: Obj) -> None:
        try:
            await self._handler(kind, obj)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s: handler failed for %s %s", self.name, kind, object_key(obj))
