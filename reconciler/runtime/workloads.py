"""The Workload lifecycle: the core fed with what the API shows, admission and pending writes,
the requeue after a backoff, and letting go of Workloads whose Job is gone.

Admission is optimistic: the core holds the quota from the moment of the
decision; the status write carries the resourceVersion it was decided on, and
a failed write (409 included) gives the quota back.
"""

from __future__ import annotations

import msgspec
import structlog

from reconciler.api import Workload, WorkloadStatus
from reconciler.api.resources import WORKLOADS
from reconciler.api.times import epoch
from reconciler.core.ordering import EVICTION_TIMESTAMP, queue_order_timestamp
from reconciler.core.podsready import PODS_READY, pods_ready_state
from reconciler.core.priority import priority_class_name
from reconciler.core.quantity import QuantityError
from reconciler.core.scheduler import REASON_PENDING, Admit, Pending
from reconciler.core.status import (
    admitted_workload_status,
    backoff_finished_status,
    condition,
    pending_workload_status,
    set_condition,
)
from reconciler.core.workloads import (
    DEVICE_CHARGES_ANNOTATION,
    FIRST_AVAILABLE_ANNOTATION,
    WorkloadInfo,
)
from reconciler.feed import WorkloadSources, compile_for
from reconciler.kube import Conflict, NotFound

from .actions import MergePatch, WriteDone
from .context import EXPECTED_MISSES, Context
from .patches import holds_quota, is_true, same_workload_status, status_patch
from .store import Key

__all__ = ["DEVICE_CHARGES_ANNOTATION", "FIRST_AVAILABLE_ANNOTATION", "Workloads", "seconds_since"]

log = structlog.get_logger(__name__)

RESOURCE_IN_USE = "kueue.x-k8s.io/resource-in-use"


def seconds_since(stamp: str | None, now: str) -> int:
    start, end = epoch(stamp), epoch(now)
    return 0 if start is None or end is None else max(0, int(end - start))


class Workloads:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        # The generation of each workload as last given to the core.
        self._fed: dict[Key, int] = {}
        # The firstAvailable annotation last asked for, per workload.
        self._annotating: dict[Key, tuple[str | None, str | None]] = {}
        # Waiting workloads seen without a PodsReady condition (see write_waiting_for_start).
        self._without_pods_ready: set[Key] = set()

    def compile(self, workload: Workload) -> WorkloadInfo:
        config = self.ctx.config
        sources = WorkloadSources(
            config.class_to_resource,
            self.ctx.store.templates,
            self.ctx.pod_index.claims,
            config.class_capacities,
            config.device_inventory.enabled,
        )
        info = compile_for(self.ctx.engine, workload, sources)
        wfpr = self.ctx.config.wait_for_pods_ready
        strategy = wfpr.requeuing_timestamp if wfpr is not None else EVICTION_TIMESTAMP
        info.created = queue_order_timestamp(workload, strategy) or info.created
        return info

    # --- keeping the core in line with the API ------------------------------------------

    def sync(self, key: Key, *, own_write: bool = False) -> None:
        """Bring the core in line with the Workload the API shows (or our write just returned)."""
        ctx = self.ctx
        workload = ctx.store.workloads.get(key)
        if workload is None:
            self._fed.pop(key, None)
            self._annotating.pop(key, None)
            ctx.timers.cancel(key, "requeue")
            ctx.engine.remove_workload(key)
            ctx.dirty.pods_ready.add(key)
            return
        if ctx.workload_writes.in_flight(key, "admit", "evict"):
            return
        if not own_write and ctx.workload_writes.awaiting(key):
            return
        owner = ctx.store.job_key(key)
        orphaned = owner is not None and owner not in ctx.store.jobs
        if orphaned or workload.metadata.deletion_timestamp:
            # Its Job is gone (or it is being deleted): let it go. As Kueue, an orphan not yet
            # being deleted is first finished (OwnerNotFound), which returns its quota; one
            # being deleted keeps its quota until the API no longer shows it.
            if orphaned and not workload.metadata.deletion_timestamp and holds_quota(workload):
                self._finish_orphan(workload)
            elif not holds_quota(workload):
                self._forget(key)
            self._release_finalizer(workload)
            return
        if is_true(workload.status.conditions, "Finished"):
            self._forget(key)
            return
        # Whatever follows, the PodsReady tracking looks at this workload again.
        ctx.dirty.pods_ready.add(key)
        engine = ctx.engine
        generation = workload.metadata.generation
        if holds_quota(workload):
            # Also after a restart: the rebuilt ledger has the charges, not what preemption needs to know.
            if not engine.is_admitted(key) or key not in engine.cache.workloads:
                assert workload.status.admission is not None
                reserved = condition(workload.status.conditions, "QuotaReserved")
                at = (reserved.last_transition_time if reserved else None) or ""
                engine.add_workload(self.compile(workload), workload.status.admission, at)
                self._fed[key] = generation
            return
        if not workload.spec.active:
            self._forget(key)  # inactive: in no queue until reactivated
            if workload.status.requeue_state is not None:
                # As Kueue: an inactive workload's requeue count goes, so reactivation starts afresh.
                self._write_requeue("reset", workload, {"requeueState": None})
            return
        requeued = condition(workload.status.conditions, "Requeued")
        if requeued is not None and requeued.status == "False" and requeued.reason.startswith("Deactivated"):
            conditions = set_condition(
                workload.status.conditions,
                "Requeued",
                "True",
                "Reactivated",
                "The workload was reactivated",
                ctx.clock(),
                generation or None,
            )
            self._write_requeue("reactivated", workload, {"conditions": msgspec.to_builtins(conditions)})
        if self._backing_off(key, workload):
            # Pending (inadmissible) in its queues' counts, but not scheduled until the backoff ends.
            if not engine.is_held(key):
                try:
                    engine.hold(self.compile(workload))
                except (QuantityError, msgspec.ValidationError):
                    engine.remove_workload(key)
            self._fed.pop(key, None)
            return
        fed = self._fed.get(key) == generation and engine.workload(key) is not None
        if engine.is_admitted(key) or engine.is_held(key) or not fed:
            # Newly seen, spec changed, evicted, or its admission was cleared by someone else.
            try:
                info = self.compile(workload)
            except (QuantityError, msgspec.ValidationError) as err:
                log.warning("Workload cannot be compiled", workload=f"{key[0]}/{key[1]}", error=str(err))
                return
            engine.add_workload(info)
            self._fed[key] = generation
        if ctx.tracks_pods_ready(key) and condition(workload.status.conditions, PODS_READY) is None:
            self._without_pods_ready.add(key)

    def write_waiting_for_start(self) -> None:
        """With waitForPodsReady, a waiting Job's Workload shows PodsReady=False WaitForStart
        from the start, as Kueue's job reconciler writes it, also when no verdict is written
        for it (behind a StrictFIFO head). Run after the scheduler's decisions, which carry
        the condition themselves, so this write never races an admission."""
        ctx = self.ctx
        keys, self._without_pods_ready = self._without_pods_ready, set()
        for key in keys:
            workload = ctx.store.workloads.get(key)
            if workload is None or ctx.engine.is_admitted(key):
                continue
            if ctx.workload_writes.in_flight(key):
                # E.g. its create, when the watch showed it before the response: try after it lands.
                self._without_pods_ready.add(key)
                continue
            if condition(workload.status.conditions, PODS_READY) is not None:
                continue
            meta = workload.metadata
            status = _waiting_for_start(workload.status, ctx.clock(), meta.generation or None)
            ctx.write(
                MergePatch(
                    "waiting-for-start",
                    WORKLOADS,
                    meta.namespace,
                    meta.name,
                    status_patch(status, meta.resource_version),
                    subresource="status",
                    slot_name="workload-status",
                    on_done=self._waiting_for_start_written,
                )
            )

    def _waiting_for_start_written(self, done: WriteDone) -> None:
        self._status_written(done)
        if not done.ok:
            # Lost a race (a newer version, or a superseded write): look at it again.
            self.ctx.dirty.workload(done.key)

    def _record_choices(
        self, workload: Workload, info: WorkloadInfo | None, charged: tuple[str, ...] = ()
    ) -> None:
        """Show on the Workload which firstAvailable subrequests it is charged for, and what the
        charges its flavors decided came to when admitted (`charged`; none while it waits): two
        annotations.

        Written once a decision is out (pending written, admission landed), never before: a metadata
        write in between would make the admission's resourceVersion-conditioned write conflict."""
        if info is None:
            return
        meta = workload.metadata
        wanted = ("; ".join(info.choices) or None, "; ".join(charged) or None)
        annotations = meta.annotations
        have = (annotations.get(FIRST_AVAILABLE_ANNOTATION), annotations.get(DEVICE_CHARGES_ANNOTATION))
        if have == wanted:
            return
        key = (meta.namespace, meta.name)
        # Asked for already (in flight, or landed and its event not seen yet).
        if self._annotating.get(key) == wanted:
            return
        self._annotating[key] = wanted
        names = (FIRST_AVAILABLE_ANNOTATION, DEVICE_CHARGES_ANNOTATION)
        asked = {name: value for name, value, now in zip(names, wanted, have, strict=True) if value != now}
        patch = msgspec.json.encode({"metadata": {"annotations": asked}})
        self.ctx.write(
            MergePatch(
                "workload-annotate", WORKLOADS, meta.namespace, meta.name, patch, on_done=self._annotated
            )
        )

    def _annotated(self, done: WriteDone) -> None:
        if not done.ok:
            self._annotating.pop(done.key, None)  # asked again on the next decision
            self.ctx.write_failed(done, expected=EXPECTED_MISSES)

    def mappings_changed(self) -> int:
        """The DeviceClass mappings changed: every Workload that does not hold quota is charged
        again by the new ones (pending, inadmissible, backing off); admitted ones keep the charge
        they were admitted with until they finish or are evicted. Returns how many were marked."""
        ctx = self.ctx
        marked = 0
        for key, workload in ctx.store.workloads.items():
            if holds_quota(workload) or ctx.engine.is_admitted(key):
                continue
            self._fed.pop(key, None)
            if ctx.engine.is_held(key):
                ctx.engine.remove_workload(key)  # held again, with the new charge, by sync
            ctx.dirty.workload(key)
            marked += 1
        return marked

    def _forget(self, key: Key) -> None:
        self.ctx.engine.remove_workload(key)  # a no-op for a workload the core does not know
        self._fed.pop(key, None)
        self._annotating.pop(key, None)

    def template_changed(self, namespace: str) -> None:
        """A template (or shared claim) that appears can make a waiting workload chargeable."""
        for wl_key, info in list(self.ctx.engine.queues.workloads.items()):
            if wl_key[0] == namespace and info.problem is not None and info.problem.retryable:
                self._fed.pop(wl_key, None)
                self.ctx.dirty.workload(wl_key)

    def cluster_queue_changed(self, name: str) -> None:
        """A ClusterQueue's resources may have changed: the firstAvailable choices of the workloads
        waiting in it are made again; only those whose charge changes are given to the core anew."""
        ctx = self.ctx
        local_queues = ctx.engine.queues.local_queues
        for wl_key, info in list(ctx.engine.queues.workloads.items()):
            workload = ctx.store.workloads.get(wl_key)
            if not info.choices or workload is None:
                continue
            if local_queues.get((wl_key[0], workload.spec.queue_name)) != name:
                continue
            try:
                changed = self.compile(workload).shape != info.shape
            except (QuantityError, msgspec.ValidationError):
                changed = True
            if changed:
                self._fed.pop(wl_key, None)
                ctx.dirty.workload(wl_key)

    def shared_claim_changed(self, namespace: str) -> None:
        """A pre-created ResourceClaim appeared or went: the waiting workloads of its namespace are
        charged again (admitted ones keep their charge)."""
        for wl_key in list(self.ctx.engine.queues.workloads):
            if wl_key[0] == namespace:
                self._fed.pop(wl_key, None)
                self.ctx.dirty.workload(wl_key)

    def _finish_orphan(self, workload: Workload) -> None:
        meta = workload.metadata
        key = (meta.namespace, meta.name)
        if self.ctx.workload_writes.in_flight(key, "finish"):
            return
        conditions = set_condition(
            workload.status.conditions,
            "Finished",
            "True",
            "OwnerNotFound",
            "The workload's owner no longer exists",
            self.ctx.clock(),
            meta.generation or None,
        )
        self.ctx.write(
            MergePatch(
                "finish",
                WORKLOADS,
                meta.namespace,
                meta.name,
                msgspec.json.encode({"status": {"conditions": msgspec.to_builtins(conditions)}}),
                subresource="status",
                slot_name="workload-status",
                on_done=self._orphan_finished,
            )
        )

    def _orphan_finished(self, done: WriteDone) -> None:
        if done.ok and done.body is not None:
            self.ctx.apply_workload_write(done.key, done.body)
            self._forget(done.key)  # finished: its quota is free
        else:
            self.ctx.write_failed(done, expected=EXPECTED_MISSES)

    def _release_finalizer(self, workload: Workload) -> None:
        meta = workload.metadata
        if RESOURCE_IN_USE not in meta.finalizers:
            return
        rest = [f for f in meta.finalizers if f != RESOURCE_IN_USE]
        # The patch carries the resourceVersion; a conflict retries on the next event.
        patch = msgspec.json.encode(
            {"metadata": {"finalizers": rest, "resourceVersion": meta.resource_version}}
        )
        self.ctx.write(
            MergePatch(
                "release-finalizer",
                WORKLOADS,
                meta.namespace,
                meta.name,
                patch,
                on_done=lambda done: self.ctx.write_failed(done, expected=EXPECTED_MISSES),
            )
        )

    # --- requeue after a backoff --------------------------------------------------------

    def _backing_off(self, key: Key, workload: Workload) -> bool:
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
                MergePatch(
                    "requeue",
                    WORKLOADS,
                    meta.namespace,
                    meta.name,
                    status_patch(status, meta.resource_version),
                    subresource="status",
                    slot_name="workload-status",
                    on_done=self._requeued,
                )
            )
        return True

    def _write_requeue(self, what: str, workload: Workload, status: dict[str, object]) -> None:
        """A requeue-state write (reset while inactive, Reactivated once active again), asked for once."""
        meta = workload.metadata
        key = (meta.namespace, meta.name)
        if self.ctx.workload_writes.in_flight(key, "requeue"):
            return
        body = {"status": status, "metadata": {"resourceVersion": meta.resource_version}}
        log.debug("requeue state written", workload=f"{key[0]}/{key[1]}", what=what)
        self.ctx.write(
            MergePatch(
                "requeue",
                WORKLOADS,
                meta.namespace,
                meta.name,
                msgspec.json.encode(body),
                subresource="status",
                slot_name="workload-status",
                on_done=self._requeue_written,
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

    # --- the scheduler's decisions ------------------------------------------------------

    def admit(self, decision: Admit) -> None:
        ctx = self.ctx
        key = decision.key
        workload = ctx.store.workloads.get(key)
        if workload is None:
            ctx.engine.remove_workload(key)
            return
        status = admitted_workload_status(
            workload.status,
            decision,
            ctx.clock(),
            workload.metadata.generation or None,
            pods_ready=ctx.tracks_pods_ready(key),
        )
        ctx.write(
            MergePatch(
                "admit",
                WORKLOADS,
                key[0],
                key[1],
                status_patch(status, workload.metadata.resource_version),
                subresource="status",
                slot_name="workload-status",
                on_done=lambda done: self._admission_written(done, decision.considered, decision.charged),
            )
        )

    def _admission_written(
        self, done: WriteDone, considered: str = "", charged: tuple[str, ...] = ()
    ) -> None:
        ctx = self.ctx
        key = done.key
        if done.ok and done.body is not None:
            ctx.stats.admitted += 1
            ctx.apply_workload_write(key, done.body, until_seen=True)
            # Its own watch event may have come first and been set aside: start the PodsReady clock now.
            ctx.dirty.workload(key, own_write=True)
            workload = ctx.store.workloads.get(key)
            if workload is None:
                return
            cq = workload.status.admission.cluster_queue if workload.status.admission else ""
            priority_class = priority_class_name(workload)
            ctx.metrics.quota_reserved(cq, workload.metadata.creation_timestamp, priority_class)
            ctx.metrics.admitted_in_cohorts(ctx.engine.cache.cohort_path(cq), priority_class)
            waited = seconds_since(workload.metadata.creation_timestamp, ctx.clock())
            message = f"Quota reserved in ClusterQueue {cq}, wait time since queued was {waited}s"
            if considered:
                message += f"; Flavors considered: {considered}"
            ctx.events.emit(workload, "Normal", "QuotaReserved", message)
            ctx.events.emit(
                workload,
                "Normal",
                "Admitted",
                f"Admitted by ClusterQueue {cq}, wait time since reservation was 0s",
            )
            owner = ctx.store.job_key(key)
            if owner is not None:
                ctx.dirty.jobs.add(owner)
            self._record_choices(workload, ctx.engine.workload(key), charged)
            return
        # Not admitted after all: give the quota back and decide again on fresh state.
        if isinstance(done.error, Conflict):
            ctx.stats.admission_conflicts += 1
        else:
            ctx.write_failed(done, expected=(NotFound,))
        if isinstance(done.error, NotFound):
            ctx.engine.remove_workload(key)
        else:
            ctx.engine.rollback(key)
        self._fed.pop(key, None)

    def pending(self, decision: Pending) -> None:
        ctx = self.ctx
        key = decision.key
        workload = ctx.store.workloads.get(key)
        info = ctx.engine.workload(key)
        if workload is None or info is None:
            return
        now, generation = ctx.clock(), workload.metadata.generation or None
        status = pending_workload_status(workload.status, info, decision, now, generation)
        if ctx.tracks_pods_ready(key):
            status = _waiting_for_start(status, now, generation)
        self._record_choices(workload, info)
        # A status write still in flight may carry an older verdict: this one must follow it.
        if same_workload_status(status, workload.status) and not ctx.workload_writes.in_flight(
            key, "workload-status"
        ):
            return
        ctx.write(
            MergePatch(
                "workload-status",
                WORKLOADS,
                key[0],
                key[1],
                status_patch(status),
                subresource="status",
                slot_name="workload-status",
                on_done=self._status_written,
            )
        )
        if decision.reason == REASON_PENDING:
            # Kueue's scheduler records its verdicts; a workload its queues refuse (unmapped
            # DeviceClass, missing LocalQueue) gets the condition only.
            ctx.events.emit(workload, "Warning", decision.reason, decision.message)

    def _status_written(self, done: WriteDone) -> None:
        if done.ok and done.body is not None:
            self.ctx.apply_workload_write(done.key, done.body)
        else:
            self.ctx.write_failed(done, expected=(NotFound, Conflict))


def _waiting_for_start(status: WorkloadStatus, now: str, generation: int | None) -> WorkloadStatus:
    """With waitForPodsReady, a Workload that is not admitted carries PodsReady=False
    WaitForStart, as Kueue's job reconciler writes it before admission."""
    previous = condition(status.conditions, PODS_READY)
    state = pods_ready_state(admitted=False, ready=0, needed=1, previous=previous)
    if previous is not None and (previous.status, previous.reason) == (state.status, state.reason):
        return status
    conditions = set_condition(
        status.conditions, PODS_READY, state.status, state.reason, state.message, now, generation
    )
    return msgspec.structs.replace(status, conditions=conditions)
