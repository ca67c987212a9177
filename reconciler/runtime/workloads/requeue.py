"""The requeue of an evicted Workload after its backoff, and the requeue state's other writes
(reset while inactive, Reactivated once active again)."""

from __future__ import annotations

import msgspec
import structlog

from reconciler.api import Workload
from reconciler.api.times import epoch
from reconciler.core.status import backoff_finished_status
from reconciler.runtime.shared.actions import WriteDone
from reconciler.runtime.shared.context import EXPECTED_MISSES, Context
from reconciler.runtime.shared.patches import status_patch, workload_status_write
from reconciler.runtime.shared.store import Key

__all__ = ["Requeues"]

log = structlog.get_logger(__name__)


class Requeues:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def backing_off(self, key: Key, workload: Workload) -> bool:
        """True while the requeue backoff runs; once over, Requeued=True is written first."""
        ctx = self.ctx
        state = workload.status.requeue_state
        at = epoch(state.requeue_at) if state is not None else None
        if at is None:
            return False
        if at > ctx.wall():
            ctx.timers.set(key, "requeue", at)
            return True
        if not ctx.workload_writes.in_flight(key, "requeue"):
            status = backoff_finished_status(
                workload.status, ctx.clock(), workload.metadata.generation or None
            )
            meta = workload.metadata
            ctx.write(
                workload_status_write(
                    "requeue",
                    (meta.namespace, meta.name),
                    status_patch(status, meta.resource_version),
                    self._requeued,
                )
            )
        return True

    def write(self, what: str, workload: Workload, status: dict[str, object]) -> None:
        """A requeue-state write (reset while inactive, Reactivated once active again), asked for once."""
        meta = workload.metadata
        key = (meta.namespace, meta.name)
        if self.ctx.workload_writes.in_flight(key, "requeue"):
            return
        body = {"status": status, "metadata": {"resourceVersion": meta.resource_version}}
        log.debug("requeue state written", workload=f"{key[0]}/{key[1]}", what=what)
        self.ctx.write(
            workload_status_write(
                "requeue",
                (meta.namespace, meta.name),
                msgspec.json.encode(body),
                self._requeue_written,
            )
        )

    def _requeue_written(self, done: WriteDone) -> None:
        if done.ok and done.body is not None:
            self.ctx.apply_workload_write(done.key, done.body)
            self.ctx.dirty.workload(done.key, own_write=True)
        else:
            self.ctx.write_failed(done, expected=EXPECTED_MISSES)

    def _requeued(self, done: WriteDone) -> None:
        key = done.key
        if done.ok and done.body is not None:
            # Kueue v0.18.1 sets Requeued=True BackoffFinished without an Event.
            self.ctx.apply_workload_write(key, done.body)
            self.ctx.dirty.workload(key, own_write=True)
        else:
            self.ctx.write_failed(done, expected=EXPECTED_MISSES)
