"""The writer: a bounded pool of concurrent API calls whose results come back as inbox items.

The reconciler never waits for a write: it submits an action and goes on
deciding; the outcome arrives later as a `WriteDone`. One write per slot is in
flight at a time, and a newer action for a busy slot supersedes the queued one
(its `WriteDone` says so), which keeps writes to one object in order. When every
write in flight is taken, waiting writes go in by rank: writes of objects first, then the
pending verdicts (a Workload's pending status, its PodsReady=False WaitForStart), then
Events; so under a saturated API server admissions are not queued behind the verdicts and
Events of thousands of waiting Workloads. A write that outranks the one waiting for its slot
replaces it (an admission the pending message it was queued behind). A patch to an object whose
last patches met 409 Conflict waits a little first, and writes that keep conflicting ask for the
object's collection to be relisted (`conflicts`).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable

import structlog

from reconciler.api.resources import EVENTS, Resource
from reconciler.kube import ApiError, Conflict, KubeClient, KubeError, TransportError
from reconciler.observability.metrics import Metrics
from reconciler.runtime.shared.actions import Action, Create, Delete, MergePatch, PostEvent, Slot, WriteDone
from reconciler.runtime.shared.conflicts import BEHIND_AFTER, Conflicts, ObjectRef

__all__ = ["WriteDone", "Writer"]

log = structlog.get_logger(__name__)

# Waiting writes of these purposes go after other object writes (and before Events).
_VERDICTS = frozenset({"workload-status", "waiting-for-start"})


def rank(action: Action) -> int:
    """0: object writes, 1: pending verdicts, 2: Events (lower goes first when all are taken)."""
    if action.resource is EVENTS:
        return 2
    return 1 if action.purpose in _VERDICTS else 0


class Writer:
    def __init__(
        self,
        client: KubeClient,
        deliver: Callable[[WriteDone], None],
        *,
        concurrency: int = 32,
        metrics: Metrics | None = None,
        may_write: Callable[[], bool] | None = None,
        conflicts: Conflicts | None = None,
    ) -> None:
        self._client = client
        # Asked just before each write is sent (a leader's lease check); False: not sent, superseded.
        self._may_write = may_write
        self.fenced = 0  # writes not sent because ``may_write`` said no
        self._metrics = metrics
        self._deliver = deliver
        self._gate = _Gate(concurrency)
        self._busy: set[Slot] = set()
        self._waiting: dict[Slot, Action] = {}
        # Slots whose write waits for a place in flight (not sent yet): its turn and its rank.
        self._blocked: dict[Slot, tuple[asyncio.Future[None], int]] = {}
        # Each write's task, with what it writes and when it was taken (for `in_flight_writes`).
        self._tasks: dict[asyncio.Task[None], tuple[Action, float]] = {}
        # Objects whose writes meet 409 Conflict in a row: paced; told to `on_behind` when it lasts.
        self._conflicts = conflicts or Conflicts()
        self.on_behind: Callable[[Resource], None] | None = None
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
            blocked = self._blocked.get(slot)
            if blocked is not None and rank(action) < blocked[1]:
                blocked[0].cancel()  # not sent yet: withdrawn (superseded), this one goes instead
            return
        self._start(action)

    def in_flight(self) -> int:
        return len(self._tasks)

    def in_flight_writes(self) -> list[str]:
        """What each write in flight writes and for how long it has been in flight (for a log line)."""
        now = time.monotonic()
        writes = self._tasks.values()
        return [f"{action.purpose} {_described(action)} {now - taken:.1f}s" for action, taken in writes]

    def _start(self, action: Action) -> None:
        if action.slot is not None:
            self._busy.add(action.slot)
        task = asyncio.get_running_loop().create_task(self._run(action))
        self._tasks[task] = (action, time.monotonic())
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        self._tasks.pop(task, None)

    async def _run(self, action: Action) -> None:
        started = time.monotonic()
        ref = _conflict_ref(action)
        try:
            if ref is not None and (pause := self._conflicts.delay(ref)):
                await asyncio.sleep(pause)  # its last writes met 409: give the watch time to catch up
            if not await self._enter(action):
                self._deliver(WriteDone(action, superseded=True))
                return
            if self._may_write is not None and not self._may_write():
                self._gate.release()
                self.fenced += 1
                if self.fenced == 1:  # the process exits once the loss is noticed: one line is enough
                    log.warning("writes held back: the lease may have been lost", first=action.purpose)
                self._deliver(WriteDone(action, superseded=True))
                return
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
            if ref is not None:
                self._conflicts.settled(ref)
            self._deliver(WriteDone(action, body=body, seconds=time.monotonic() - started))
        except KubeError as err:
            if ref is not None:
                self._conflicted(action, ref, err)
            self._deliver(WriteDone(action, error=err, seconds=time.monotonic() - started))
        finally:
            slot = action.slot
            if slot is not None:
                self._busy.discard(slot)
                following = self._waiting.pop(slot, None)
                if following is not None and not self.closed:
                    self._start(following)

    async def _enter(self, action: Action) -> bool:
        """Wait for a place in flight; False when withdrawn meanwhile for a write that outranks it."""
        order = rank(action)
        turn = self._gate.enter(order)
        if turn is None:
            return True
        slot = action.slot
        if slot is not None:
            self._blocked[slot] = (turn, order)
        try:
            await self._gate.wait(turn)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if turn.cancelled() and (task is None or not task.cancelling()):
                return False  # withdrawn (the writer's own cancel of the turn, not the task's)
            raise
        finally:
            if slot is not None:
                self._blocked.pop(slot, None)
        return True

    def _conflicted(self, action: Action, ref: ObjectRef, err: KubeError) -> None:
        if not isinstance(err, Conflict):
            self._conflicts.settled(ref)
            return
        if self._conflicts.conflict(ref) and self.on_behind is not None:
            log.warning(
                "writes keep meeting 409 Conflict: the cache is behind; relisting",
                kind=action.resource.kind,
                object=_described(action),
                seconds=BEHIND_AFTER,
            )
            self.on_behind(action.resource)

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


def _described(action: Action) -> str:
    return f"{action.resource.plural} {action.namespace or ''}/{getattr(action, 'name', '')}"


def _conflict_ref(action: Action) -> ObjectRef | None:
    """The object of a write that can meet a failed precondition (a patch), else None."""
    if not isinstance(action, MergePatch):
        return None
    return (action.resource.plural, action.namespace or "", action.name)


class _Gate:
    """At most `limit` holders; waiters are let in by rank (0 before 1), then in arrival order."""

    def __init__(self, limit: int) -> None:
        self._free = limit
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def enter(self, rank: int) -> asyncio.Future[None] | None:
        """In at once (None), or a turn to `wait` for (cancelling it withdraws the waiter)."""
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return None
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (rank, next(self._order), granted))
        return granted

    async def wait(self, granted: asyncio.Future[None]) -> None:
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
