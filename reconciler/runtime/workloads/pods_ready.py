"""waitForPodsReady: the PodsReady condition and claim report of admitted Workloads, their
deadlines, eviction (or deactivation) when a deadline passes, and blockAdmission.

Deadlines come from the conditions' transition times, so a restarted
controller keeps them. An eviction (`evictions`) keeps the quota while the job still runs; an
evicting Workload has no deadline and is never evicted again.
"""

from __future__ import annotations

import msgspec
import structlog

from reconciler.api import Pod, RequeueState, Workload, WorkloadStatus
from reconciler.api.resources import PODS, WORKLOADS
from reconciler.core.primitives.podstatus import (
    CLAIMS_ALLOCATED,
    all_claims_allocated,
    claim_problems,
    claim_report_grace,
    claims_condition,
    eviction_cause,
    lasting,
    ready_or_counted,
    same_report,
)
from reconciler.core.primitives.priority import priority_class_name
from reconciler.core.scheduling.max_execution import deactivated_by_target
from reconciler.core.scheduling.podsready import (
    PODS_READY,
    PODS_READY_TIMEOUT,
    Deactivate,
    deactivation_reason,
    plan_timeout,
    pods_ready_deadline,
    pods_ready_state,
    timeout_message,
)
from reconciler.core.status import condition, set_condition
from reconciler.integrations import expected_pod_sets
from reconciler.integrations.pods.group import GROUP_KIND, PodGroup
from reconciler.kube import Conflict
from reconciler.runtime.shared.actions import MergePatch, OnDone, Purpose, WriteDone
from reconciler.runtime.shared.context import EXPECTED_MISSES, Context
from reconciler.runtime.shared.evictions import Eviction, Evictions
from reconciler.runtime.shared.patches import evicted, holds_quota, status_patch, workload_status_write
from reconciler.runtime.shared.store import JobRef, Key
from reconciler.runtime.workloads.overrun import Overruns

__all__ = ["PodsReady"]

log = structlog.get_logger(__name__)

# Writes that make a workload's PodsReady state moot until they land; and its own write: what it
# looked at is re-checked when it lands (a check meanwhile would write and warn a second time).
_SETTLING = ("admit", "evict", "finish", "pods-ready")


class PodsReady:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.evictions = Evictions(ctx)
        self.overruns = Overruns(ctx, self.evictions)
        # Admitted workloads whose pods are not all ready (for blockAdmission).
        self._unready: set[Key] = set()

    # --- tracking admitted workloads ----------------------------------------------------

    def refresh(self, key: Key) -> None:
        """An admitted workload gets its deadline (or is evicted when deactivated); others lose it."""
        ctx = self.ctx
        workload = ctx.store.workloads.get(key)
        if workload is None or not holds_quota(workload):
            self._unready.discard(key)
            ctx.timers.cancel(key, "pods-ready")
            return
        if evicted(workload):  # (holds its quota: evicting)
            # It keeps its quota until its job stops: no deadline, never evicted again; but not
            # ready, it still holds blockAdmission back (as in Kueue's cache until it leaves).
            ctx.timers.cancel(key, "pods-ready")
            self._track_ready(key, workload)
            return
        if not workload.spec.active:
            # A deactivation target (the maximum execution time) names its cause; else Kueue's words
            # for a deactivation (by a user, or the requeue limit spent).
            target = deactivated_by_target(workload.status.conditions)
            if target is None:
                limit = ctx.config.wait_for_pods_ready
                reason, message = deactivation_reason(
                    workload.status.requeue_state, None if limit is None else limit.backoff_limit_count
                )
                target = (reason, message, "")
            self._evict(workload, target[0], target[1], None, underlying_cause=target[2])
            return
        wfpr = ctx.config.wait_for_pods_ready
        if wfpr is None:
            return
        self._track_ready(key, workload)
        deadline = pods_ready_deadline(
            workload.status.conditions, wfpr.timeout_seconds, wfpr.recovery_timeout_seconds
        )
        if deadline is None:
            ctx.timers.cancel(key, "pods-ready")
        else:
            ctx.timers.set(key, "pods-ready", deadline.at)
        owner = ctx.store.owner(key)
        if owner is not None:
            ctx.dirty.pods.add(owner)

    def _track_ready(self, key: Key, workload: Workload) -> None:
        if self.ctx.config.wait_for_pods_ready is None:
            return
        ready = condition(workload.status.conditions, PODS_READY)
        if ready is not None and ready.status == "True":
            self._unready.discard(key)
        else:
            self._unready.add(key)

    def admission_blocked(self) -> bool:
        """blockAdmission: nothing is admitted while an admitted workload is not yet ready."""
        ctx = self.ctx
        wfpr = ctx.config.wait_for_pods_ready
        if wfpr is None or not wfpr.block_admission:
            return False
        for key in list(self._unready):
            workload = ctx.store.workloads.get(key)
            if workload is None or not holds_quota(workload):
                self._unready.discard(key)
        return bool(self._unready)

    # --- pods and claims ----------------------------------------------------------------

    def check_pods(self, key: Key) -> None:
        """PodsReady and the claim report of an admitted workload, from its job's pods."""
        ctx = self.ctx
        workload = ctx.store.workloads.get(key)
        if (
            workload is None
            or not holds_quota(workload)
            or evicted(workload)
            or ctx.workload_writes.in_flight(key, *_SETTLING)
            or ctx.workload_writes.awaiting(key)
        ):
            return
        owner = ctx.store.owner(key)
        if owner is None:
            return
        pods = self._pods(owner)
        if self.overruns.stop_if_overrun(workload, owner, pods):
            return  # (beyond Kueue: more pods run than charged)
        claims = ctx.pod_index.claims
        conditions = workload.status.conditions
        now, generation = ctx.clock(), workload.metadata.generation or None
        if ctx.config.wait_for_pods_ready is not None:
            job = ctx.store.job(owner)
            integration = ctx.store.integrations[owner[0]]
            counted = 0 if job is None else integration.pods_ready_count(job)
            # Every pod set's pods, as the Workload charged them (any number of pod sets; a
            # partially admitted one's count as admitted).
            needed = sum(1 if ps.count is None else ps.count for ps in expected_pod_sets(workload)) or 1
            previous = condition(conditions, PODS_READY)
            # A pod group is ready as a whole, by its own rule (its count), never pod by pod.
            seen = [] if owner[0] == GROUP_KIND else pods
            state = pods_ready_state(
                admitted=True, ready=ready_or_counted(seen, counted), needed=needed, previous=previous
            )
            if previous is None or (previous.status, previous.reason) != (state.status, state.reason):
                conditions = set_condition(
                    conditions, PODS_READY, state.status, state.reason, state.message, now, generation
                )
        wfpr = ctx.config.wait_for_pods_ready
        grace = claim_report_grace(None if wfpr is None else wfpr.timeout_seconds)
        problems, recheck = lasting(claim_problems(key[0], pods, claims), ctx.wall(), grace)
        if recheck is not None:
            ctx.timers.set(key, "claims", recheck)
        claims_before = condition(conditions, CLAIMS_ALLOCATED)
        allocated = all_claims_allocated(key[0], pods, claims)
        claims_now = claims_condition(key[0], problems, claims_before, all_allocated=allocated)
        reported = claims_before is not None and claims_before.status == "False"
        if claims_now is not None and (
            claims_before is None
            or claims_before.status != claims_now[0]
            or not (
                claims_before.message == claims_now[2] or same_report(claims_before.message, claims_now[2])
            )
        ):
            conditions = set_condition(conditions, CLAIMS_ALLOCATED, *claims_now, now, generation)
            if claims_now[0] == "False" and not reported:
                # One Warning per report: the condition follows a change of pod or claim, not of
                # the scheduler's words alone.
                ctx.events.emit(workload, "Warning", claims_now[1], claims_now[2])
        if conditions is workload.status.conditions:
            return
        status = msgspec.structs.replace(workload.status, conditions=conditions)
        self._write_status("pods-ready", workload, status, self._pods_ready_written)

    def _pods_ready_written(self, done: WriteDone) -> None:
        key = self._settled(done)
        if key is None:
            if isinstance(done.error, Conflict):
                # Another write to the Workload landed first (a pod group's condition): decide
                # again on the newer Workload, else PodsReady stays as it was until a pod changes.
                self.ctx.dirty.pods_ready.add(done.key)
            return
        written = self.ctx.store.workloads.get(key)
        sent = msgspec.json.decode(getattr(done.action, "patch", b"{}"))
        conditions = (sent.get("status") or {}).get("conditions") or []
        if written is None or not any(
            c.get("type") == PODS_READY and c.get("status") == "True" for c in conditions
        ):
            return
        # Metrics: a PodsReady=True we wrote (written only when it changes) ends the wait for ready.
        admission = written.status.admission
        reserved = condition(written.status.conditions, "QuotaReserved")
        self.ctx.metrics.workload_ready(
            admission.cluster_queue if admission else "",
            written.metadata.creation_timestamp,
            reserved.last_transition_time if reserved else None,
            priority_class_name(written),
        )

    # --- deadlines ----------------------------------------------------------------------

    def expired(self, key: Key) -> None:
        ctx = self.ctx
        wfpr = ctx.config.wait_for_pods_ready
        workload = ctx.store.workloads.get(key)
        if wfpr is None or workload is None or not holds_quota(workload) or evicted(workload):
            return
        if ctx.workload_writes.in_flight(key, "admit", "evict", "deactivate", "finish"):
            return  # a Job that has ended is finished by its write, never evicted
        deadline = pods_ready_deadline(
            workload.status.conditions, wfpr.timeout_seconds, wfpr.recovery_timeout_seconds
        )
        if deadline is None:
            return
        now = ctx.wall()
        if deadline.at > now:
            ctx.timers.set(key, "pods-ready", deadline.at)
            return
        log.debug("PodsReady timeout", workload=f"{key[0]}/{key[1]}", late=round(now - deadline.at, 3))
        plan = plan_timeout(
            workload.status.requeue_state,
            now,
            limit=wfpr.backoff_limit_count,
            base_seconds=wfpr.backoff_base_seconds,
            max_seconds=wfpr.backoff_max_seconds,
        )
        if isinstance(plan, Deactivate):
            # The eviction follows once the API shows spec.active=false (see refresh).
            meta = workload.metadata
            patch = b'{"spec":{"active":false}}'
            ctx.write(
                MergePatch(
                    "deactivate", WORKLOADS, meta.namespace, meta.name, patch, on_done=self._deactivated
                )
            )
            return
        message = timeout_message(key[0], key[1])
        cause = self._claim_cause(key)
        if cause is not None:
            # Kueue's reason and message, then why: a claim that cannot be allocated, not a slow start.
            message = f"{message}; cause: {cause}"
        self._evict(
            workload, PODS_READY_TIMEOUT, message, plan.requeue_state, underlying_cause=deadline.cause
        )

    def _pods(self, owner: JobRef) -> list[Pod]:
        """A job's pods, with those of the jobs it controls and theirs (a JobSet's are its Jobs'); a pod
        group's are its started pods."""
        index = self.ctx.pod_index
        pods = index.pods_of((owner[1], owner[2]), owner[0])
        job = self.ctx.store.job(owner)
        if isinstance(job, PodGroup):
            started = (index.pods.get((owner[1], p.metadata.name)) for p in job.pods)
            return [p for p in started if p is not None]
        resource = self.ctx.store.integrations[owner[0]].resource
        if resource.plural == PODS.plural and resource == PODS:  # (the plural first: cheaper)
            own = index.pods.get((owner[1], owner[2]))  # a plain pod is its own job's pod
            pods += [] if own is None else [own]
        for child in self.ctx.store.descendants(owner):
            pods += index.pods_of((child[1], child[2]), child[0])
        return pods

    def _claim_cause(self, key: Key) -> str | None:
        owner = self.ctx.store.owner(key)
        if owner is None:
            return None
        pods = self._pods(owner)
        return eviction_cause(key[0], pods, self.ctx.pod_index.claims)

    # --- eviction -----------------------------------------------------------------------

    def _evict(
        self,
        workload: Workload,
        reason: str,
        message: str,
        requeue_state: RequeueState | None,
        *,
        underlying_cause: str,
    ) -> None:
        """Evict (`evictions`: the quota returns once the job no longer runs)."""
        eviction = Eviction(
            reason,
            message,
            underlying_cause=underlying_cause,
            requeue_state=requeue_state,
            on_landed=self._forget_deadline,
        )
        self.evictions.evict(workload, eviction)

    def _forget_deadline(self, key: Key) -> None:
        self._unready.discard(key)
        self.ctx.timers.cancel(key, "pods-ready")

    # --- writes -------------------------------------------------------------------------

    def _write_status(
        self, purpose: Purpose, workload: Workload, status: WorkloadStatus, on_done: OnDone
    ) -> None:
        meta = workload.metadata
        self.ctx.write(
            workload_status_write(
                purpose,
                (meta.namespace, meta.name),
                status_patch(status, meta.resource_version),
                on_done,
            )
        )

    def _deactivated(self, done: WriteDone) -> None:
        self._settled(done)

    def _settled(self, done: WriteDone) -> Key | None:
        """A PodsReady or deactivation write came back: apply it and look at the workload again."""
        key = done.key
        if done.ok and done.body is not None:
            self.ctx.apply_workload_write(key, done.body)
            self.ctx.dirty.workload(key, own_write=True)
            return key
        self.ctx.write_failed(done, expected=EXPECTED_MISSES)
        return None
