"""Evicting an admitted Workload, in Kueue v0.18.1's two steps: Evicted=True is written while the
reservation is kept, its job is stopped, and only once the job no longer runs (its integration's
`is_active`) is the reservation ended and its quota returned (`release`, asked for by the job's
concern). A job not running at the eviction gets both steps in one write. Events are posted
only once the eviction has landed.

Shared by the concerns that evict (waitForPodsReady, preemption, a stopped ClusterQueue); each
says what its eviction is and what to do when it lands or fails. While a Workload is evicting it
counts in its ClusterQueue's usage and is the first preemption candidate, never evicted again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import msgspec
import structlog

from reconciler.api import RequeueState, Workload
from reconciler.core.eviction_status import evicted_workload_status, unreserved_workload_status
from reconciler.core.primitives.priority import priority_class_name
from reconciler.core.status import EVICTED, PODS_READY, condition, resource_requests
from reconciler.integrations import Integration
from reconciler.integrations.pods.group import PodGroup
from reconciler.runtime.shared.actions import WriteDone
from reconciler.runtime.shared.context import EXPECTED_MISSES, Context
from reconciler.runtime.shared.patches import evicting, status_patch, workload_status_write
from reconciler.runtime.shared.store import Key

__all__ = ["Eviction", "Evictions"]

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Eviction:
    reason: str  # Evicted=True reason (PodsReadyTimeout, Preempted, Deactivated...)
    message: str
    underlying_cause: str = ""  # for the eviction metric
    requeue_state: RequeueState | None = None  # None: keep the Workload's own
    preempted_reason: str | None = None  # sets Preempted=True with this reason (InClusterQueue, ...)
    on_landed: Callable[[Key], None] | None = None
    on_failed: Callable[[Key], None] | None = None


def _ready_since(workload: Workload) -> str | None:
    """When PodsReady turned True, if it is True (before the eviction's write changes it)."""
    ready = condition(workload.status.conditions, PODS_READY)
    return ready.last_transition_time if ready is not None and ready.status == "True" else None


class Evictions:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def evict(self, workload: Workload, eviction: Eviction) -> bool:
        """Ask for the eviction once; False when one is in flight or the Workload is evicting."""
        ctx = self.ctx
        meta = workload.metadata
        key = (meta.namespace, meta.name)
        if ctx.workload_writes.in_flight(key, "evict") or evicting(workload):
            return False  # (an evicting Workload is never evicted again)
        info = ctx.engine.workload(key)
        now, generation = ctx.clock(), meta.generation or None
        running = self._job_active(key)
        status = evicted_workload_status(
            workload.status,
            reason=eviction.reason,
            message=eviction.message,
            requeue_state=eviction.requeue_state or workload.status.requeue_state,
            requests=resource_requests(info) if info is not None else workload.status.resource_requests,
            now=now,
            generation=generation,
            pods_ready=ctx.tracks_pods_ready(key),
            preempted_reason=eviction.preempted_reason,
            keep_reservation=running,
        )
        ctx.write(
            workload_status_write(
                "evict",
                (meta.namespace, meta.name),
                status_patch(status, meta.resource_version),
                partial(self._done, eviction=eviction, released=not running, ready=_ready_since(workload)),
            )
        )
        return True

    def _job_active(self, key: Key) -> bool:
        """Whether the Workload's job still runs (some of its pods), by its integration."""
        store = self.ctx.store
        owner = store.owner(key)
        job = store.job(owner)
        return owner is not None and job is not None and store.integrations[owner[0]].is_active(job)

    def _done(self, done: WriteDone, *, eviction: Eviction, released: bool, ready: str | None) -> None:
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
        before = ctx.store.workloads.get(key)
        written = condition(msgspec.json.decode(done.body, type=Workload).status.conditions, EVICTED)
        ctx.metrics.workload_evicted(
            charge.cluster_queue if charge else "",
            eviction.reason,
            eviction.underlying_cause,
            priority_class_name(before),
            workload_uid=before.metadata.uid if before is not None else None,
            pods_ready_since=ready,
            evicted_at=written.last_transition_time if written is not None else None,
        )
        # Until this write's own event, an older one must not look like it is still admitted.
        ctx.apply_workload_write(key, done.body, until_seen=True)
        if released:
            ctx.engine.remove_workload(key)
        else:
            ctx.engine.keep_evicting(key)  # its quota stays until its job no longer runs
        if eviction.on_landed is not None:
            eviction.on_landed(key)
        ctx.dirty.workload(key, own_write=True)  # queued again (after a backoff, if any) once released
        workload = ctx.store.workloads.get(key)
        if workload is None:
            return
        ctx.events.emit(workload, "Normal", f"EvictedDueTo{eviction.reason}", eviction.message)
        owner = ctx.store.owner(key)
        job = ctx.store.job(owner) if owner is not None else None
        grouped = owner is not None and ctx.store.integrations[owner[0]].jobs_from_pods
        if job is not None and not isinstance(job, PodGroup) and not grouped:
            # (A pod group's pods each get theirs as they are stopped, a set's group's too.)
            ctx.events.emit(job, "Normal", "Stopped", eviction.message)
        if owner is not None:
            ctx.dirty.jobs.add(owner)

    def release_if_stopped(self, workload: Workload, integration: Integration, job: Any) -> None:
        """An evicting Workload whose job (of `integration`) no longer runs, and has not ended
        (its Workload is finished instead): its reservation ends."""
        if evicting(workload) and integration.finished(job) is None and not integration.is_active(job):
            self.release(workload)

    def release(self, workload: Workload) -> None:
        """The second step of an eviction whose job no longer runs: the reservation ends (Kueue's
        words from the Evicted condition) and, once that lands, the quota returns."""
        ctx = self.ctx
        meta = workload.metadata
        key = (meta.namespace, meta.name)
        if ctx.workload_writes.in_flight(key, "evict"):
            return
        status = unreserved_workload_status(workload.status, ctx.clock(), meta.generation or None)
        ctx.write(
            workload_status_write("evict", key, status_patch(status, meta.resource_version), self._released)
        )

    def _released(self, done: WriteDone) -> None:
        ctx = self.ctx
        key = done.key
        if not done.ok or done.body is None:
            # Asked again when the Workload's (or its job's) next event is looked at.
            ctx.write_failed(done, expected=EXPECTED_MISSES)
            ctx.dirty.workload(key)
            return
        ctx.apply_workload_write(key, done.body, until_seen=True)
        ctx.engine.remove_workload(key)
        ctx.dirty.workload(key, own_write=True)  # queued again (after a backoff, if any)
