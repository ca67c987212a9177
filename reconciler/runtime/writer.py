"""The writer: a bounded pool of concurrent API calls whose results come back as inbox items.

The reconciler never waits for a write: it submits an action and goes on
deciding; the outcome arrives later as a `WriteDone`. One write per slot is in
flight at a time, and a newer action for a busy slot supersedes the queued one
(its `WriteDone` says so), which keeps writes to one object in order. When every
write in flight is taken, a waiting write of an object goes before a waiting Event:
under a saturated API server, admissions are not queued behind their Events.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable

import structlog

from reconciler.api.resources import EVENTS
from reconciler.kube import ApiError, KubeClient, KubeError, TransportError
from reconciler.observability.metrics import Metrics

from .actions import Action, Create, Delete, PostEvent, Slot, WriteDone

__all__ = ["WriteDone", "Writer"]

log = structlog.get_logger(__name__)


class Writer:
    def __init__(
        self,
        client: KubeClient,
        deliver: Callable[[WriteDone], None],
        *,
        concurrency: int = 32,
        metrics: Metrics | None = None,
    ) -> None:
        self._client = client
        self._metrics = metrics
        self._deliver = deliver
        self._gate = _Gate(concurrency)
        self._busy: set[Slot] = set()
        self._waiting: dict[Slot, Action] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.closed = False

    def submit(self, action: Action) -> None:
        if self.closed:
            self._deliver(WriteDone(action, superseded=True))
            return
        slot = action.slot
        if slot is not None and slot in self._busy:
            replaced = self._waiting.get(slot)
            self._waiting[slot] = action
            if replaced is not None:
                self._deliver(WriteDone(replaced, superseded=True))
            return
        self._start(action)

    def in_flight(self) -> int:
        return len(self._tasks)

    def _start(self, action: Action) -> None:
        if action.slot is not None:
            self._busy.add(action.slot)
        task = asyncio.get_running_loop().create_task(self._run(action))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, action: Action) -> None:
        started = time.monotonic()
        try:
            await self._gate.acquire(1 if action.resource is EVENTS else 0)
            try:
                sent = time.monotonic()
                try:
                    body = await action.perform(self._client)
                except KubeError as err:
                    self._observe(action, time.monotonic() - sent, err)
                    raise
                self._observe(action, time.monotonic() - sent, None)
            finally:
                self._gate.release()
            self._deliver(WriteDone(action, body=body, seconds=time.monotonic() - started))
        except KubeError as err:
            self._deliver(WriteDone(action, error=err, seconds=time.monotonic() - started))
        finally:
            slot = action.slot
            if slot is not None:
                self._busy.discard(slot)
                following = self._waiting.pop(slot, None)
                if following is not None and not self.closed:
                    self._start(following)

    def _observe(self, action: Action, seconds: float, error: KubeError | None) -> None:
        if self._metrics is None:
            return
        verb = "create" if isinstance(action, (Create, PostEvent)) else "patch"
        if isinstance(action, Delete):
            verb = "delete"
        code = None
        if isinstance(error, ApiError):
            code = str(error.status)
        elif error is not None:
            code = "transport" if isinstance(error, TransportError) else "decode"
        self._metrics.api_request(verb, action.resource.plural, seconds, code)

    async def drain(self, grace: float) -> bool:
        """Stop taking actions, let in-flight writes finish; cancel what is left after `grace` seconds."""
        self.closed = True
        for slot, action in list(self._waiting.items()):
            del self._waiting[slot]
            self._deliver(WriteDone(action, superseded=True))
        pending = set(self._tasks)
        if not pending:
            return True
        _done, still = await asyncio.wait(pending, timeout=grace)
        for task in still:
            task.cancel()
        if still:
            await asyncio.gather(*still, return_exceptions=True)
            log.warning("writes abandoned at shutdown", count=len(still))
        return not still


class _Gate:
    """At most `limit` holders; waiters are let in by rank (0 before 1), then in arrival order."""

    def __init__(self, limit: int) -> None:
        self._free = limit
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    async def acquire(self, rank: int) -> None:
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (rank, next(self._order), granted))
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self.release()  # let in, then cancelled before it could go: pass its turn on
            raise

    def release(self) -> None:
        while self._waiting:
            _rank, _order, waiter = heapq.heappop(self._waiting)
            if not waiter.done():  # a cancelled waiter is skipped
                waiter.set_result(None)
                return
        self._free += 1
