"""Evicting an admitted Workload: one status write ends its reservation; its quota returns, its Job
is stopped and restored, and Events are posted only once that write has landed.

Shared by the concerns that evict (waitForPodsReady, preemption); each says what its eviction
is and what to do when it lands or fails.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import structlog

from reconciler.api import RequeueState, Workload
from reconciler.core.primitives.priority import priority_class_name
from reconciler.core.status import evicted_workload_status, resource_requests
from reconciler.integrations.podgroup import PodGroup

from .actions import WriteDone
from .context import EXPECTED_MISSES, Context
from .patches import status_patch, workload_status_write
from .store import Key

__all__ = ["Eviction", "Evictions"]

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Eviction:
    reason: str  # Evicted=True reason (PodsReadyTimeout, Preempted, Deactivated...)
    message: str
    underlying_cause: str = ""  # for the eviction metric
    requeue_state: RequeueState | None = None  # None: keep the Workload's own
    requeued: bool = False  # Requeued=True (preemption), else False with the eviction's reason
    preempted_reason: str | None = None  # sets Preempted=True with this reason (InClusterQueue, ...)
    on_landed: Callable[[Key], None] | None = None
    on_failed: Callable[[Key], None] | None = None


class Evictions:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def evict(self, workload: Workload, eviction: Eviction) -> bool:
        """Ask for the eviction once; False when one is already in flight."""
        ctx = self.ctx
        meta = workload.metadata
        key = (meta.namespace, meta.name)
        if ctx.workload_writes.in_flight(key, "evict"):
            return False
        info = ctx.engine.workload(key)
        now, generation = ctx.clock(), meta.generation or None
        status = evicted_workload_status(
            workload.status,
            reason=eviction.reason,
            message=eviction.message,
            requeue_state=eviction.requeue_state or workload.status.requeue_state,
            requests=resource_requests(info) if info is not None else workload.status.resource_requests,
            now=now,
            generation=generation,
            pods_ready=ctx.tracks_pods_ready(key),
            requeued=eviction.requeued,
            preempted_reason=eviction.preempted_reason,
        )
        ctx.write(
            workload_status_write(
                "evict",
                (meta.namespace, meta.name),
                status_patch(status, meta.resource_version),
                partial(self._done, eviction=eviction),
            )
        )
        return True

    def _done(self, done: WriteDone, *, eviction: Eviction) -> None:
        ctx = self.ctx
        key = done.key
        if not done.ok or done.body is None:
            log.debug("eviction not written", workload=f"{key[0]}/{key[1]}", error=str(done.error))
            ctx.write_failed(done, expected=EXPECTED_MISSES)
            ctx.dirty.workload(key)  # still admitted: decide again on fresh state
            if eviction.on_failed is not None:
                eviction.on_failed(key)
            return
        charge = ctx.engine.ledger.charge_of(key)
        ctx.metrics.workload_evicted(
            charge.cluster_queue if charge else "",
            eviction.reason,
            eviction.underlying_cause,
            priority_class_name(ctx.store.workloads.get(key)),
        )
        # Until this write's own event, an older one must not look like it is still admitted.
        ctx.apply_workload_write(key, done.body, until_seen=True)
        ctx.engine.remove_workload(key)
        if eviction.on_landed is not None:
            eviction.on_landed(key)
        ctx.dirty.workload(key, own_write=True)  # queued again (after a backoff, if any)
        workload = ctx.store.workloads.get(key)
        if workload is None:
            return
        ctx.events.emit(workload, "Normal", f"EvictedDueTo{eviction.reason}", eviction.message)
        owner = ctx.store.owner(key)
        job = ctx.store.job(owner) if owner is not None else None
        if job is not None and not isinstance(job, PodGroup):
            # (A pod group's pods each get theirs as they are stopped.)
            ctx.events.emit(job, "Normal", "Stopped", eviction.message)
        if owner is not None:
            ctx.dirty.jobs.add(owner)
