"""What a webhook asks the API: whether a namespace has a LocalQueue named ``default``.

Answers are kept for a few seconds (a burst of Jobs in one namespace asks once); every lookup
is bounded by ``timeout`` seconds, well inside the API server's webhook timeout, and an answer
that cannot be had raises (the webhook then refuses the request rather than guess).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from reconciler.api.resources import LOCAL_QUEUES
from reconciler.kube import KubeClient, NotFound

from .jobs import DEFAULT_LOCAL_QUEUE

__all__ = ["ApiLookups"]


@dataclass
class ApiLookups:
    client: KubeClient
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
