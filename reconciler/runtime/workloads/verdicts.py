"""The scheduler's verdicts written to Workloads: admission (QuotaReserved, Admitted), pending
conditions, PodsReady=False WaitForStart, and the annotations of what a Workload is charged for.

Admission is optimistic: the core holds the quota from the moment of the
decision; the status write carries the resourceVersion it was decided on, and
a failed write (409 included) gives the quota back.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import msgspec

from reconciler.api import Workload, WorkloadStatus
from reconciler.api.resources import WORKLOADS
from reconciler.api.times import epoch
from reconciler.core.model.workloads import (
    DEVICE_CHARGES_ANNOTATION,
    FIRST_AVAILABLE_ANNOTATION,
    WorkloadInfo,
)
from reconciler.core.primitives.priority import priority_class_name
from reconciler.core.scheduling.podsready import PODS_READY, pods_ready_state
from reconciler.core.scheduling.scheduler import REASON_PENDING, Admit, Pending
from reconciler.core.status import (
    admitted_workload_status,
    condition,
    pending_workload_status,
    set_condition,
)
from reconciler.kube import Conflict, NotFound
from reconciler.runtime.shared.actions import MergePatch, WriteDone
from reconciler.runtime.shared.context import EXPECTED_MISSES, Context
from reconciler.runtime.shared.own_moves import OwnMoves, Version
from reconciler.runtime.shared.patches import same_workload_status, status_patch, workload_status_write
from reconciler.runtime.shared.store import Key

__all__ = ["Verdicts", "seconds_since"]


def seconds_since(stamp: str | None, now: str) -> int:
    start, end = epoch(stamp), epoch(now)
    return 0 if start is None or end is None else max(0, int(end - start))


class Verdicts:
    def __init__(
        self,
        ctx: Context,
        unfeed: Callable[[Key], None],
        admission_settled: Callable[[Key, bool], None] = lambda key, admitted: None,
    ) -> None:
        self.ctx = ctx
        # Makes the next sync give the workload to the core again.
        self._unfeed = unfeed
        # Told when an admission write lands (True) or fails (preemption waits for it).
        self._admission_settled = admission_settled
        # The firstAvailable annotation last asked for, per workload.
        self._annotating: dict[Key, tuple[str | None, str | None]] = {}
        # Waiting workloads seen without a PodsReady condition (see write_waiting_for_start).
        self._without_pods_ready: set[Key] = set()
        # The pending status last asked for while its write is in flight (and its patch).
        self._asked: dict[Key, tuple[WorkloadStatus, bytes]] = {}
        # The versions our pending writes moved each Workload through (admissions follow them).
        self._moves = OwnMoves(self._version)

    def _version(self, key: Key) -> Version | None:
        workload = self.ctx.store.workloads.get(key)
        return None if workload is None else _version_of(workload)

    def wait_for_start(self, key: Key) -> None:
        """A waiting workload without a PodsReady condition: write_waiting_for_start gives it one."""
        self._without_pods_ready.add(key)

    def forget(self, key: Key) -> None:
        self._annotating.pop(key, None)
        self._asked.pop(key, None)
        self._moves.forget(key)

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
                workload_status_write(
                    "waiting-for-start",
                    (meta.namespace, meta.name),
                    status_patch(status, meta.resource_version),
                    partial(self._waiting_for_start_written, base=[_version_of(workload)]),
                )
            )

    def _waiting_for_start_written(self, done: WriteDone, base: list[Version | None]) -> None:
        self._status_written(done, base)
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
        decided_on = workload.metadata.resource_version

        def on_newest(patch: bytes) -> bytes:
            # A pending verdict of ours that landed first moved the version on: follow it.
            newest = self._moves.follow(key, decided_on)
            return patch if newest == decided_on else status_patch(status, newest)

        ctx.write(
            workload_status_write(
                "admit",
                (key[0], key[1]),
                status_patch(status, decided_on),
                lambda done: self._admission_done(done, decision.considered, decision.charged),
                prepare=on_newest,
            )
        )

    def _admission_done(self, done: WriteDone, considered: str, charged: tuple[str, ...]) -> None:
        self._admission_written(done, considered, charged)
        # Evictions asked for while it was being written go now (or are dropped with it).
        self._admission_settled(done.key, done.ok and done.body is not None)

    def _admission_written(
        self, done: WriteDone, considered: str = "", charged: tuple[str, ...] = ()
    ) -> None:
        ctx = self.ctx
        key = done.key
        if done.ok and done.body is not None:
            ctx.stats.admitted += 1
            self._moves.forget(key)  # (admitted: no pending verdict of its follows)
            ctx.engine.admission_written(key, ctx.wall())  # its entry penalty joins its usage
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
            owner = ctx.store.owner(key)
            if owner is not None:
                ctx.dirty.jobs.add(owner)
            self._record_choices(workload, ctx.engine.workload(key), charged)
            return
        # Not admitted after all: give the quota back and decide again on fresh state.
        ctx.engine.admission_lost(key)
        if isinstance(done.error, Conflict):
            ctx.stats.admission_conflicts += 1
        else:
            ctx.write_failed(done, expected=(NotFound,))
        if isinstance(done.error, NotFound):
            ctx.engine.remove_workload(key)
        else:
            ctx.engine.rollback(key)
        self._unfeed(key)
        # Its newer version may have come while the write was in flight (and been set aside):
        # no event may follow, so it is fed again now on what the store has.
        ctx.dirty.workload(key)

    def pending(self, decision: Pending, *, write: bool = True) -> None:
        """Write the verdict (unless `write` is False: a later verdict of the same cycle will)
        and record its Event when it is news."""
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
        if ctx.workload_writes.in_flight(key, "workload-status"):
            # The write in flight has the last word: skip only a verdict equal to what it carries.
            asked = self._asked.get(key)
            if asked is not None and same_workload_status(status, asked[0]):
                return
        elif same_workload_status(status, workload.status):
            return
        if write:
            patch = status_patch(status)
            self._asked[key] = (status, patch)
            base: list[Version | None] = [None]

            def on_send(sent: bytes) -> bytes:
                base[0] = self._version(key)  # (no precondition: it lands on the store's, or newer)
                return sent

            written = partial(self._status_written, base=base)
            ctx.write(workload_status_write("workload-status", key, patch, written, prepare=on_send))
        if decision.reason == REASON_PENDING:
            # Kueue's scheduler records its verdicts; a workload its queues refuse (unmapped
            # DeviceClass, missing LocalQueue) gets the condition only.
            ctx.events.emit(workload, "Warning", decision.reason, decision.message)

    def _status_written(self, done: WriteDone, base: list[Version | None]) -> None:
        asked = self._asked.get(done.key)
        if asked is not None and isinstance(done.action, MergePatch) and asked[1] is done.action.patch:
            del self._asked[done.key]  # (the last one asked for: none other is in flight)
        if done.ok and done.body is not None:
            applied = self.ctx.apply_workload_write(done.key, done.body)
            if applied is not None:
                self._moves.landed(done.key, base[0], _version_of(applied))
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


def _version_of(workload: Workload) -> Version:
    return (workload.metadata.resource_version, workload.metadata.generation)
