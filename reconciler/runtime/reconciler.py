"""The reconciler: the single writer that owns every cache, the core and the ledger.

It consumes inbox items one at a time (watch events and write results), keeps
the latest known object of every kind, feeds the pure core, and turns the
core's decisions into actions for the writer. Nothing here awaits: each call
returns quickly, and the API calls happen in the writer.

Admission is optimistic: the ledger holds the quota from the moment of the
decision; the Workload status write carries the resourceVersion it was
decided on, and a failed write (409 included) rolls the reservation back.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec
import structlog

from reconciler.api import (
    ClusterQueue,
    ClusterQueueStatus,
    Condition,
    Job,
    LocalQueue,
    LocalQueueStatus,
    Namespace,
    RequeueState,
    ResourceClaimTemplate,
    Workload,
    WorkloadStatus,
    pod_template_view,
)
from reconciler.api.resources import (
    CLUSTER_QUEUES,
    EVENTS,
    JOBS,
    LOCAL_QUEUES,
    NAMESPACES,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_FLAVORS,
    WORKLOADS,
    Resource,
)
from reconciler.api.times import epoch, now_rfc3339
from reconciler.config import Configuration
from reconciler.core.clusterqueues import InvalidClusterQueueError, compile_cluster_queue
from reconciler.core.engine import Engine
from reconciler.core.flavors import admission_node_labels
from reconciler.core.jobs import (
    PODSET_LABEL,
    is_managed,
    job_outcome,
    restore_patch,
    start_patch,
    suspend_patch,
)
from reconciler.core.podsready import (
    PODS_READY,
    PODS_READY_TIMEOUT,
    Deactivate,
    deactivation_reason,
    plan_timeout,
    pods_needed,
    pods_ready_deadline,
    pods_ready_state,
    timeout_message,
)
from reconciler.core.podstatus import (
    CLAIMS_ALLOCATED,
    all_claims_allocated,
    claim_problems,
    claims_condition,
    lasting,
    ready_or_succeeded,
)
from reconciler.core.quantity import QuantityError
from reconciler.core.scheduler import Admit, Pending
from reconciler.core.status import (
    admitted_workload_status,
    backoff_finished_status,
    cluster_queue_status,
    condition,
    evicted_workload_status,
    local_queue_status,
    pending_workload_status,
    resource_requests,
    set_condition,
)
from reconciler.core.workloads import WorkloadInfo, compile_workload, workload_for_job, workload_name_for_job
from reconciler.kube import Conflict, NotFound, WatchEvent
from reconciler.observability.metrics import Metrics

from .actions import Action, Create, MergePatch, PostEvent
from .events import event_body
from .podindex import PodIndex
from .timers import Timers
from .writer import WriteDone

__all__ = ["LABEL_SELECTORS", "WATCHED", "Reconciler"]

log = structlog.get_logger(__name__)

Key = tuple[str, str]
WORKLOAD_API = "kueue.x-k8s.io/v1beta2"
# How long events older than our own write are ignored; past it, the watch is the truth.
AWAIT_OWN_WRITE_SECONDS = 5.0
# Every so often every Workload and Job is reconciled again, whatever the events said.
RESYNC_SECONDS = 30.0
# A pod the scheduler cannot place for a claim is reported once this has passed (transient
# reports, while devices are being freed, are not worth a Warning).
CLAIM_REPORT_GRACE_SECONDS = 5.0
# Every kind the reconciler needs synced before it decides anything.
WATCHED: tuple[Resource, ...] = (
    JOBS,
    WORKLOADS,
    RESOURCE_CLAIM_TEMPLATES,
    CLUSTER_QUEUES,
    LOCAL_QUEUES,
    RESOURCE_FLAVORS,
    NAMESPACES,
    PODS,
    RESOURCE_CLAIMS,
)
_PODSET_LABEL_BYTES = PODSET_LABEL.encode()
# Only the pods of Jobs this controller started carry the pod set label.
LABEL_SELECTORS: dict[str, str] = {PODS.plural: PODSET_LABEL}


def _is_true(conditions: list[Condition], kind: str) -> bool:
    found = condition(conditions, kind)
    return found is not None and found.status == "True"


def holds_quota(workload: Workload) -> bool:
    """Admitted in the API and not finished: its quota is in use."""
    return (
        workload.status.admission is not None
        and _is_true(workload.status.conditions, "QuotaReserved")
        and not _is_true(workload.status.conditions, "Finished")
    )


def _same_conditions(a: list[Condition], b: list[Condition]) -> bool:
    def essence(conds: list[Condition]) -> set[tuple[str, str, str, str]]:
        return {(c.type, c.status, c.reason, c.message) for c in conds}

    return essence(a) == essence(b)


def _same_workload_status(a: WorkloadStatus, b: WorkloadStatus) -> bool:
    return (
        _same_conditions(a.conditions, b.conditions)
        and a.admission == b.admission
        and a.resource_requests == b.resource_requests
    )


def _same_cq_status(a: ClusterQueueStatus, b: ClusterQueueStatus) -> bool:
    return (
        _same_conditions(a.conditions, b.conditions)
        and a.flavors_usage == b.flavors_usage
        and a.flavors_reservation == b.flavors_reservation
        and (a.pending_workloads, a.reserving_workloads, a.admitted_workloads)
        == (b.pending_workloads, b.reserving_workloads, b.admitted_workloads)
    )


def _api_body(obj: msgspec.Struct, api_version: str, kind: str) -> bytes:
    """JSON of a projection with apiVersion and kind set (they are omitted as defaults)."""
    body: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(obj))
    body["apiVersion"], body["kind"] = api_version, kind
    body.get("metadata", {}).pop("creationTimestamp", None)
    return msgspec.json.encode(body)


def _same_lq_status(a: LocalQueueStatus, b: LocalQueueStatus) -> bool:
    return (
        _same_conditions(a.conditions, b.conditions)
        and a.flavors_usage == b.flavors_usage
        and (a.pending_workloads, a.reserving_workloads, a.admitted_workloads)
        == (b.pending_workloads, b.reserving_workloads, b.admitted_workloads)
    )


def _status_patch(status: msgspec.Struct, resource_version: str | None = None) -> bytes:
    rendered: dict[str, Any] = msgspec.to_builtins(status)
    if isinstance(status, WorkloadStatus):
        # A merge patch only removes what it names as null.
        rendered.setdefault("admission", None)
        rendered.setdefault("resourceRequests", None)
        if status.requeue_state is not None and status.requeue_state.requeue_at is None:
            rendered["requeueState"]["requeueAt"] = None
    body: dict[str, Any] = {"status": rendered}
    if resource_version:
        body["metadata"] = {"resourceVersion": resource_version}
    return msgspec.json.encode(body)


@dataclass
class ReconcilerStats:
    admitted: int = 0
    admission_conflicts: int = 0
    write_errors: int = 0


@dataclass
class Reconciler:
    config: Configuration
    submit: Callable[[Action], None]
    instance: str = "reconciler"
    clock: Callable[[], str] = now_rfc3339
    monotonic: Callable[[], float] = time.monotonic
    # Seconds since the epoch, for deadlines read from condition timestamps.
    wall: Callable[[], float] = time.time
    core: Engine = field(default_factory=Engine)
    jobs: dict[Key, Job] = field(default_factory=dict)
    workloads: dict[Key, Workload] = field(default_factory=dict)
    templates: dict[Key, ResourceClaimTemplate] = field(default_factory=dict)
    cluster_queues: dict[str, ClusterQueue] = field(default_factory=dict)
    local_queues: dict[Key, LocalQueue] = field(default_factory=dict)
    synced: set[str] = field(default_factory=set)
    ready: bool = False
    stats: ReconcilerStats = field(default_factory=ReconcilerStats)
    metrics: Metrics = field(default_factory=Metrics)
    # Workloads whose admission write is in flight: events about them wait.
    _admitting: set[Key] = field(default_factory=set)
    # After our own write: the resourceVersion it produced; older events are stale.
    _awaiting: dict[Key, tuple[str, float]] = field(default_factory=dict)
    # The generation of each workload as last given to the core.
    _fed: dict[Key, int] = field(default_factory=dict)
    _creating: set[Key] = field(default_factory=set)
    # A start or suspend we asked for and the watch has not shown yet: not asked twice.
    _job_intent: dict[Key, str] = field(default_factory=dict)
    # resourceVersions the watch delivered while our Job write, admission or eviction was in flight:
    # when the response's version is among them, the watch got there first and the cache is as new.
    _job_rvs_in_flight: dict[Key, set[str]] = field(default_factory=dict)
    _status_rvs_in_flight: dict[Key, set[str]] = field(default_factory=dict)
    # After our own Job write: its resourceVersion; older Job events are stale until it is seen.
    _job_awaiting: dict[Key, str] = field(default_factory=dict)
    # Workloads whose Finished write is in flight.
    _finishing: set[Key] = field(default_factory=set)
    _next_resync: float = 0.0
    _cq_dirty: bool = True
    # waitForPodsReady: deadlines, the pods and claims of started Jobs, writes in flight.
    timers: Timers[Key] = field(default_factory=Timers)
    pod_index: PodIndex = field(default_factory=PodIndex)
    _pods_dirty: set[Key] = field(default_factory=set)
    _evicting: dict[Key, tuple[str, str]] = field(default_factory=dict)
    _eviction_causes: dict[Key, str] = field(default_factory=dict)  # (for the eviction metric)
    _requeueing: set[Key] = field(default_factory=set)
    _deactivating: set[Key] = field(default_factory=set)
    _unready: set[Key] = field(default_factory=set)

    # --- inbox ----------------------------------------------------------------------------

    def handle(self, item: WatchEvent[Any] | WriteDone) -> None:
        if isinstance(item, WriteDone):
            self._on_write(item)
        else:
            self._on_watch(item)

    def after_batch(self) -> None:
        """Decide, after a batch of inbox items has been applied."""
        if not self.ready:
            return
        for job_key in self._pods_dirty:
            job = self.jobs.get(job_key)
            if job is not None:
                self._check_pods(self._workload_key_for(job))
        self._pods_dirty.clear()
        if self._admission_blocked():
            return
        started = self.monotonic()
        decisions = self.core.schedule()
        if decisions:
            admits = any(isinstance(d, Admit) for d in decisions)
            self.metrics.admission_attempt(admits, self.monotonic() - started)
        for decision in decisions:
            if isinstance(decision, Admit):
                self._admit(decision)
            else:
                self._pending(decision)
        self._cq_dirty = True

    def flush_status(self) -> None:
        """Write queue status where it differs from what the API shows (called on a timer)."""
        if not self.ready:
            return
        for key in [k for k in self._awaiting if not self._is_awaiting(k)]:
            self._sync_workload(key)  # our write's own event never came: decide on what we have
        for key, purpose in self.timers.due(self.wall()):
            if purpose == "pods-ready":
                self._pods_ready_expired(key)
            elif purpose == "claims":
                self._check_pods(key)
            else:
                self._sync_workload(key)
        if self.monotonic() >= self._next_resync:
            # Level-triggered safety net: anything a lost trigger left undone is redone.
            self._next_resync = self.monotonic() + RESYNC_SECONDS
            self._resync(WORKLOADS.plural)
        if not self._cq_dirty:
            return
        self._cq_dirty = False
        now = self.clock()
        for name, cq in self.cluster_queues.items():
            desired = cluster_queue_status(self.core, name, cq.status, now, cq.metadata.generation or None)
            if _same_cq_status(desired, cq.status):
                continue
            self.submit(
                MergePatch(
                    "cq-status", CLUSTER_QUEUES, None, name, _status_patch(desired), subresource="status"
                )
            )
        for (namespace, name), lq in self.local_queues.items():
            lq_desired = local_queue_status(
                self.core, namespace, name, lq.status, now, lq.metadata.generation or None
            )
            if _same_lq_status(lq_desired, lq.status):
                continue
            self.submit(
                MergePatch(
                    "lq-status",
                    LOCAL_QUEUES,
                    namespace,
                    name,
                    _status_patch(lq_desired),
                    subresource="status",
                )
            )

    # --- watch events ---------------------------------------------------------------------

    def _on_watch(self, event: WatchEvent[Any]) -> None:
        kind = event.resource.plural
        if event.kind == "SYNCED":
            self.synced.add(kind)
            if kind == WORKLOADS.plural:
                # A relist is the truth: stop waiting for events it may have skipped.
                self._awaiting.clear()
            if kind == JOBS.plural:
                self._job_awaiting.clear()
            if not self.ready and all(r.plural in self.synced for r in WATCHED):
                self._become_ready()
            elif self.ready:
                self._resync(kind)
            return
        key = event.key
        obj = event.obj
        deleted = event.kind == "DELETED"
        if kind == JOBS.plural:
            self._on_job(key, None if deleted else obj)
        elif kind == WORKLOADS.plural:
            self._on_workload(key, None if deleted else obj)
        elif kind == RESOURCE_CLAIM_TEMPLATES.plural:
            self._on_template(key, None if deleted else obj)
        elif kind == CLUSTER_QUEUES.plural:
            self._on_cluster_queue(key[1], None if deleted else obj)
        elif kind == LOCAL_QUEUES.plural:
            self._on_local_queue(key, None if deleted else obj)
        elif kind == RESOURCE_FLAVORS.plural:
            if deleted or obj is None:
                self.core.delete_flavor(key[1])
            else:
                self.core.set_flavor(obj)
        elif kind == PODS.plural:
            job_key = self.pod_index.on_pod(key, None if deleted else obj)
            if job_key is not None:
                self._pods_dirty.add(job_key)
            return
        elif kind == RESOURCE_CLAIMS.plural:
            job_key = self.pod_index.on_claim(key, None if deleted else obj)
            if job_key is not None:
                self._pods_dirty.add(job_key)
            return
        elif kind == NAMESPACES.plural and isinstance(obj, Namespace):
            labels = {**obj.metadata.labels, "kubernetes.io/metadata.name": obj.metadata.name}
            self.core.set_namespace(obj.metadata.name, labels)
        self._cq_dirty = True

    def _become_ready(self) -> None:
        started = self.monotonic()
        admitted = [(k, w.status.admission) for k, w in self.workloads.items() if holds_quota(w)]
        self.core.rebuild((k, a) for k, a in admitted if a is not None)
        self.metrics.ledger_rebuilt(self.monotonic() - started)
        log.info("caches synced; ledger rebuilt", admitted=len(admitted), workloads=len(self.workloads))
        self.ready = True
        self._resync(WORKLOADS.plural)

    def _resync(self, kind: str) -> None:
        if kind == WORKLOADS.plural:
            for key in list(self.workloads):
                self._sync_workload(key)
        if kind in (JOBS.plural, WORKLOADS.plural):
            for key in list(self.jobs):
                self._reconcile_job(key)

    def _on_job(self, key: Key, job: Job | None) -> None:
        if job is None:
            gone = self.jobs.pop(key, None)
            self._job_intent.pop(key, None)
            self._job_awaiting.pop(key, None)
            self._job_rvs_in_flight.pop(key, None)
            if gone is not None and self.ready:
                self._job_deleted(gone)
            return
        if key in self._job_intent:
            self._job_rvs_in_flight.setdefault(key, set()).add(job.metadata.resource_version)
        awaited = self._job_awaiting.get(key)
        if awaited is not None:
            if job.metadata.resource_version != awaited:
                return  # older than our own write, already applied
            del self._job_awaiting[key]
        self.jobs[key] = job
        if self.ready:
            self._pods_dirty.add(key)
            self._reconcile_job(key)

    def _on_workload(self, key: Key, workload: Workload | None) -> None:
        if workload is None:
            self.workloads.pop(key, None)
            self._awaiting.pop(key, None)
            self._fed.pop(key, None)
            self._unready.discard(key)
            self.timers.cancel(key, "pods-ready")
            self.timers.cancel(key, "requeue")
            self.core.remove_workload(key)
            return
        if key in self._admitting or key in self._evicting:
            self._status_rvs_in_flight.setdefault(key, set()).add(workload.metadata.resource_version)
        awaited = self._awaiting.get(key)
        if awaited is not None:
            rv, deadline = awaited
            if workload.metadata.resource_version != rv and self.monotonic() < deadline:
                return  # older than our own write, which we already applied
            # Our write's own event, or it never came (a relist skipped it): events rule again.
            del self._awaiting[key]
        self.workloads[key] = workload
        if self.ready:
            self._sync_workload(key)
            owner = self._owner_job(workload)
            if owner is not None:
                self._reconcile_job(owner)

    def _on_template(self, key: Key, template: ResourceClaimTemplate | None) -> None:
        if template is None:
            self.templates.pop(key, None)
        else:
            self.templates[key] = template
        if not self.ready:
            return
        # A template that appears can make a waiting workload chargeable.
        for wl_key, info in list(self.core.queues.workloads.items()):
            if wl_key[0] == key[0] and info.problem is not None and info.problem.retryable:
                self._fed.pop(wl_key, None)
                self._sync_workload(wl_key)

    def _on_cluster_queue(self, name: str, cq: ClusterQueue | None) -> None:
        if cq is None:
            self.cluster_queues.pop(name, None)
            self.core.delete_cluster_queue(name)
            return
        self.cluster_queues[name] = cq
        try:
            self.core.set_cluster_queue(compile_cluster_queue(cq))
        except (InvalidClusterQueueError, QuantityError) as err:
            log.warning("ClusterQueue cannot be used", cluster_queue=name, error=str(err))
            self.core.set_broken_cluster_queue(name, str(err))

    def _on_local_queue(self, key: Key, lq: LocalQueue | None) -> None:
        if lq is None:
            self.local_queues.pop(key, None)
            self.core.delete_local_queue(*key)
        else:
            self.local_queues[key] = lq
            self.core.set_local_queue(key[0], key[1], lq.spec.cluster_queue)

    # --- workloads ------------------------------------------------------------------------

    def _compile(self, workload: Workload) -> WorkloadInfo:
        return compile_workload(
            workload,
            lookup_template=lambda ns, name: self.templates.get((ns, name)),
            mappings=self.config.class_to_resource,
        )

    def _sync_workload(self, key: Key, *, own_write: bool = False) -> None:
        """Bring the core in line with the Workload the API shows (or our write just returned)."""
        workload = self.workloads.get(key)
        if workload is None or key in self._admitting or key in self._evicting:
            return
        if not own_write and self._is_awaiting(key):
            return
        owner = self._owner_job(workload)
        orphaned = owner is not None and owner not in self.jobs
        if orphaned or workload.metadata.deletion_timestamp:
            # Its Job is gone (or it is being deleted): let it go. It keeps its quota until the
            # API no longer shows it, so usage in the API never exceeds quota. The finalizer
            # patch carries the resourceVersion; a conflict retries on the next event.
            if not holds_quota(workload):
                self.core.remove_workload(key)
                self._fed.pop(key, None)
            self._release_finalizer(workload)
            return
        if _is_true(workload.status.conditions, "Finished"):
            self.core.remove_workload(key)
            self._fed.pop(key, None)
            return
        generation = workload.metadata.generation
        if holds_quota(workload):
            if not self.core.is_admitted(key):
                assert workload.status.admission is not None
                self.core.add_workload(self._compile(workload), workload.status.admission)
                self._fed[key] = generation
            if not workload.spec.active:
                reason, message = deactivation_reason(workload.status.requeue_state, self._backoff_limit())
                self._evict(workload, reason, message, None, underlying_cause="")
            else:
                self._arm_pods_ready(key, workload)
            return
        self._unready.discard(key)
        self.timers.cancel(key, "pods-ready")
        if not workload.spec.active:
            if self.core.workload(key) is not None:
                self.core.remove_workload(key)  # inactive: in no queue until reactivated
            self._fed.pop(key, None)
            return
        if self._backing_off(key, workload):
            # Pending (inadmissible) in its queues' counts, but not scheduled until the backoff ends.
            if not self.core.is_held(key):
                try:
                    self.core.hold(self._compile(workload))
                except (QuantityError, msgspec.ValidationError):
                    self.core.remove_workload(key)
            self._fed.pop(key, None)
            return
        if self.core.is_admitted(key) or self._fed.get(key) != generation:
            # Newly seen, spec changed, or its admission was cleared by someone else.
            try:
                info = self._compile(workload)
            except (QuantityError, msgspec.ValidationError) as err:
                log.warning("Workload cannot be compiled", workload=f"{key[0]}/{key[1]}", error=str(err))
                return
            self.core.add_workload(info)
            self._fed[key] = generation

    def _admit(self, decision: Admit) -> None:
        key = decision.key
        workload = self.workloads.get(key)
        if workload is None:
            self.core.remove_workload(key)
            return
        now = self.clock()
        status = admitted_workload_status(
            workload.status,
            decision,
            now,
            workload.metadata.generation or None,
            pods_ready=self.config.wait_for_pods_ready is not None,
        )
        self._admitting.add(key)
        self.submit(
            MergePatch(
                "admit",
                WORKLOADS,
                key[0],
                key[1],
                _status_patch(status, workload.metadata.resource_version),
                subresource="status",
                slot_name="workload-status",
            )
        )

    def _pending(self, decision: Pending) -> None:
        key = decision.key
        workload = self.workloads.get(key)
        info = self.core.workload(key)
        if workload is None or info is None:
            return
        status = pending_workload_status(
            workload.status, info, decision, self.clock(), workload.metadata.generation or None
        )
        if _same_workload_status(status, workload.status):
            return
        self.submit(
            MergePatch(
                "workload-status",
                WORKLOADS,
                key[0],
                key[1],
                _status_patch(status),
                subresource="status",
                slot_name="workload-status",
            )
        )
        self._event(WORKLOAD_API, "Workload", workload, "Warning", decision.reason, decision.message)

    # --- waitForPodsReady -----------------------------------------------------------------

    def _backoff_limit(self) -> int | None:
        wfpr = self.config.wait_for_pods_ready
        return None if wfpr is None else wfpr.backoff_limit_count

    def _admission_blocked(self) -> bool:
        """blockAdmission: nothing is admitted while an admitted workload is not yet ready."""
        wfpr = self.config.wait_for_pods_ready
        if wfpr is None or not wfpr.block_admission:
            return False
        for key in list(self._unready):
            workload = self.workloads.get(key)
            if workload is None or not holds_quota(workload) or key in self._evicting:
                self._unready.discard(key)
        return bool(self._unready)

    def _arm_pods_ready(self, key: Key, workload: Workload) -> None:
        """Track an admitted workload's PodsReady deadline (from its conditions, so restarts keep it)."""
        wfpr = self.config.wait_for_pods_ready
        if wfpr is None:
            return
        ready = condition(workload.status.conditions, PODS_READY)
        if ready is not None and ready.status == "True":
            self._unready.discard(key)
        else:
            self._unready.add(key)
        deadline = pods_ready_deadline(
            workload.status.conditions, wfpr.timeout_seconds, wfpr.recovery_timeout_seconds
        )
        if deadline is None:
            self.timers.cancel(key, "pods-ready")
        else:
            self.timers.set(key, "pods-ready", deadline.at)
        owner = self._owner_job(workload)
        if owner is not None:
            self._pods_dirty.add(owner)

    def _backing_off(self, key: Key, workload: Workload) -> bool:
        """True while the requeue backoff runs; once over, Requeued=True is written first."""
        state = workload.status.requeue_state
        at = epoch(state.requeue_at) if state is not None else None
        if at is None:
            return False
        if at > self.wall():
            self.timers.set(key, "requeue", at)
            return True
        if key not in self._requeueing:
            self._requeueing.add(key)
            status = backoff_finished_status(
                workload.status, self.clock(), workload.metadata.generation or None
            )
            self._write_status("requeue", workload, status, precondition=True)
        return True

    def _check_pods(self, key: Key) -> None:
        """PodsReady and the claim report of an admitted workload, from its Job's pods."""
        workload = self.workloads.get(key)
        if (
            workload is None
            or not holds_quota(workload)
            or key in self._admitting
            or key in self._evicting
            or key in self._finishing
            or self._is_awaiting(key)
        ):
            return
        owner = self._owner_job(workload)
        if owner is None:
            return
        pods = self.pod_index.pods_of(owner)
        conditions = workload.status.conditions
        now, generation = self.clock(), workload.metadata.generation or None
        if self.config.wait_for_pods_ready is not None:
            job = self.jobs.get(owner)
            needed = pods_needed(job.spec.parallelism, job.spec.completions) if job else 1
            previous = condition(conditions, PODS_READY)
            state = pods_ready_state(
                admitted=True, ready=ready_or_succeeded(pods, job), needed=needed, previous=previous
            )
            if previous is None or (previous.status, previous.reason) != (state.status, state.reason):
                conditions = set_condition(
                    conditions, PODS_READY, state.status, state.reason, state.message, now, generation
                )
        problems, recheck = lasting(
            claim_problems(key[0], pods, self.pod_index.claims), self.wall(), CLAIM_REPORT_GRACE_SECONDS
        )
        if recheck is not None:
            self.timers.set(key, "claims", recheck)
        claims_before = condition(conditions, CLAIMS_ALLOCATED)
        allocated = all_claims_allocated(key[0], pods, self.pod_index.claims)
        claims_now = claims_condition(key[0], problems, claims_before, all_allocated=allocated)
        if claims_now is not None and (
            claims_before is None
            or (claims_before.status, claims_before.message) != (claims_now[0], claims_now[2])
        ):
            conditions = set_condition(conditions, CLAIMS_ALLOCATED, *claims_now, now, generation)
            if claims_now[0] == "False":
                self._event(WORKLOAD_API, "Workload", workload, "Warning", claims_now[1], claims_now[2])
        if conditions is workload.status.conditions:
            return
        status = msgspec.structs.replace(workload.status, conditions=conditions)
        self._write_status("pods-ready", workload, status, precondition=True)

    def _pods_ready_expired(self, key: Key) -> None:
        wfpr = self.config.wait_for_pods_ready
        workload = self.workloads.get(key)
        if wfpr is None or workload is None or not holds_quota(workload):
            return
        if key in self._admitting or key in self._evicting or key in self._deactivating:
            return
        if key in self._finishing:
            return  # its Job has ended: the Finished write releases the quota
        deadline = pods_ready_deadline(
            workload.status.conditions, wfpr.timeout_seconds, wfpr.recovery_timeout_seconds
        )
        if deadline is None:
            return
        now = self.wall()
        if deadline.at > now:
            self.timers.set(key, "pods-ready", deadline.at)
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
            # The eviction follows once the API shows spec.active=false (see _sync_workload).
            self._deactivating.add(key)
            meta = workload.metadata
            self.submit(
                MergePatch("deactivate", WORKLOADS, meta.namespace, meta.name, b'{"spec":{"active":false}}')
            )
            return
        message = timeout_message(key[0], key[1])
        self._evict(
            workload, PODS_READY_TIMEOUT, message, plan.requeue_state, underlying_cause=deadline.cause
        )

    def _evict(
        self,
        workload: Workload,
        reason: str,
        message: str,
        requeue_state: RequeueState | None,
        *,
        underlying_cause: str,
    ) -> None:
        """Evict: one status write ends the reservation; the quota returns when it lands."""
        key = (workload.metadata.namespace, workload.metadata.name)
        if key in self._evicting:
            return
        info = self.core.workload(key)
        status = evicted_workload_status(
            workload.status,
            reason=reason,
            message=message,
            requeue_state=requeue_state or workload.status.requeue_state,
            requests=resource_requests(info) if info is not None else workload.status.resource_requests,
            now=self.clock(),
            generation=workload.metadata.generation or None,
            pods_ready=self.config.wait_for_pods_ready is not None,
        )
        self._evicting[key] = (reason, message)
        self._eviction_causes[key] = underlying_cause
        self._write_status("evict", workload, status, precondition=True)

    def _evicted(self, key: Key, done: WriteDone) -> None:
        reason, message = self._evicting.pop(key, ("", ""))
        seen = self._status_rvs_in_flight.pop(key, set())
        underlying_cause = self._eviction_causes.pop(key, "")
        if not done.ok or done.body is None:
            log.debug(
                "eviction not written; it is retried", workload=f"{key[0]}/{key[1]}", error=str(done.error)
            )
            if done.error is not None and not isinstance(done.error, (NotFound, Conflict)):
                self._write_failed(done)
            self._sync_workload(key)  # still admitted: the deadline fires again on fresh state
            return
        # Until this write's own event, an older one must not look like it is still admitted.
        charge = self.core.ledger.charge_of(key)
        self.metrics.workload_evicted(charge.cluster_queue if charge else "", reason, underlying_cause)
        self._apply_own_write(key, done.body, until_seen=True, seen=seen)
        self.core.remove_workload(key)
        self._fed.pop(key, None)
        self._unready.discard(key)
        self.timers.cancel(key, "pods-ready")
        self._sync_workload(key, own_write=True)  # starts the requeue backoff
        workload = self.workloads[key]
        self._event(WORKLOAD_API, "Workload", workload, "Normal", f"EvictedDueTo{reason}", message)
        owner = self._owner_job(workload)
        job = self.jobs.get(owner) if owner is not None else None
        if job is not None:
            self._event("batch/v1", "Job", job, "Normal", "Stopped", message)
        if owner is not None:
            self._reconcile_job(owner)

    def _write_status(
        self,
        purpose: Literal["evict", "requeue", "pods-ready"],
        workload: Workload,
        status: WorkloadStatus,
        *,
        precondition: bool,
    ) -> None:
        meta = workload.metadata
        self.submit(
            MergePatch(
                purpose,
                WORKLOADS,
                meta.namespace,
                meta.name,
                _status_patch(status, meta.resource_version if precondition else None),
                subresource="status",
                slot_name="workload-status",
            )
        )

    # --- jobs -----------------------------------------------------------------------------

    def _owner_job(self, workload: Workload) -> Key | None:
        for ref in workload.metadata.owner_references:
            if ref.kind == "Job" and ref.api_version == "batch/v1" and ref.controller:
                return (workload.metadata.namespace, ref.name)
        return None

    def _workload_key_for(self, job: Job) -> Key:
        return (job.metadata.namespace, workload_name_for_job(job.metadata.name, job.metadata.uid))

    def _reconcile_job(self, key: Key) -> None:
        job = self.jobs.get(key)
        if job is None or job.metadata.deletion_timestamp:
            return
        if "batch/job" not in self.config.frameworks or not is_managed(
            job, manage_without_queue_name=self.config.manage_jobs_without_queue_name
        ):
            return
        wl_key = self._workload_key_for(job)
        workload = self.workloads.get(wl_key)
        outcome = job_outcome(job)
        if workload is None:
            if outcome is not None:
                return
            if not job.spec.suspend and self._write_job(job, "job-suspend", suspend_patch()):
                self._event(
                    "batch/v1",
                    "Job",
                    job,
                    "Normal",
                    "Suspended",
                    "Suspended until its Workload is admitted by queue "
                    f"{job.metadata.labels.get('kueue.x-k8s.io/queue-name', '')}",
                )
            if wl_key not in self._creating:
                self._creating.add(wl_key)
                body = _api_body(workload_for_job(job), WORKLOAD_API, "Workload")
                self.submit(Create("create-workload", WORKLOADS, wl_key[0], wl_key[1], body))
            return
        if outcome is not None:
            if not _is_true(workload.status.conditions, "Finished") and wl_key not in self._finishing:
                self._finishing.add(wl_key)
                self._finish(workload, outcome.succeeded, outcome.message)
            return
        admitted = self.core.is_admitted(wl_key) and wl_key not in self._admitting
        if admitted and job.spec.suspend:
            admission = workload.status.admission
            if admission is None:
                return  # our write succeeded but its event has not been applied yet
            selector = admission_node_labels(admission, self.core.flavors).get("main", {})
            self._write_job(job, "job-start", start_patch(selector, {"kueue.x-k8s.io/podset": "main"}))
        elif not admitted and not job.spec.suspend and wl_key not in self._admitting:
            self._write_job(job, "job-suspend", suspend_patch())
        elif not admitted and job.spec.suspend and wl_key not in self._admitting:
            self._restore_job(job, workload)

    def _write_job(
        self,
        job: Job,
        purpose: Literal["job-start", "job-suspend", "job-restore", "job-clear-start"],
        patch: bytes,
    ) -> bool:
        """Ask for a start, suspend or restore once; False when it is already asked for."""
        key = (job.metadata.namespace, job.metadata.name)
        if self._job_intent.get(key) == purpose:
            return False  # in flight; its response updates the cached Job
        self._job_intent[key] = purpose
        subresource = "status" if purpose == "job-clear-start" else None
        self.submit(
            MergePatch(purpose, JOBS, key[0], key[1], patch, subresource=subresource, slot_name="job")
        )
        return True

    def _restore_job(self, job: Job, workload: Workload) -> None:
        """A suspended Job gets its pod template back as the Workload recorded it (after eviction)."""
        if not workload.spec.pod_sets or _PODSET_LABEL_BYTES not in bytes(job.spec.template):
            return
        if job.status.start_time:
            # The API allows template changes only to a suspended Job that has not started.
            if job.status.active == 0:
                self._write_job(job, "job-clear-start", b'{"status":{"startTime":null}}')
            return
        patch = restore_patch(
            pod_template_view(job.spec.template), pod_template_view(workload.spec.pod_sets[0].template)
        )
        if patch is not None:
            self._write_job(job, "job-restore", patch)

    def _finish(self, workload: Workload, succeeded: bool, message: str) -> None:
        now = self.clock()
        conditions = set_condition(
            workload.status.conditions,
            "Finished",
            "True",
            "Succeeded" if succeeded else "Failed",
            message,
            now,
            workload.metadata.generation or None,
        )
        patch = msgspec.json.encode({"status": {"conditions": msgspec.to_builtins(conditions)}})
        meta = workload.metadata
        self.submit(
            MergePatch(
                "finish",
                WORKLOADS,
                meta.namespace,
                meta.name,
                patch,
                subresource="status",
                slot_name="workload-status",
            )
        )
        # The quota is released when the write lands (or the watch shows it finished), never
        # before: until then the API still counts this workload against the quota.
        self._event(
            WORKLOAD_API,
            "Workload",
            workload,
            "Normal",
            "FinishedWorkload",
            f"Workload '{meta.namespace}/{meta.name}' is declared finished",
        )

    def _job_deleted(self, job: Job) -> None:
        wl_key = self._workload_key_for(job)
        if wl_key in self.workloads:
            self._sync_workload(wl_key)
        else:
            self.core.remove_workload(wl_key)

    def _release_finalizer(self, workload: Workload) -> None:
        meta = workload.metadata
        if "kueue.x-k8s.io/resource-in-use" not in meta.finalizers:
            return
        rest = [f for f in meta.finalizers if f != "kueue.x-k8s.io/resource-in-use"]
        patch = msgspec.json.encode(
            {"metadata": {"finalizers": rest, "resourceVersion": meta.resource_version}}
        )
        self.submit(MergePatch("release-finalizer", WORKLOADS, meta.namespace, meta.name, patch))

    # --- events ---------------------------------------------------------------------------

    def _event(
        self, api_version: str, kind: str, obj: Job | Workload, event_type: str, reason: str, message: str
    ) -> None:
        body = event_body(
            api_version=api_version,
            kind=kind,
            meta=obj.metadata,
            event_type=event_type,
            reason=reason,
            message=message,
            now=self.clock(),
            instance=self.instance,
        )
        self.submit(PostEvent("event", EVENTS, obj.metadata.namespace, body))

    # --- write results --------------------------------------------------------------------

    def _on_write(self, done: WriteDone) -> None:
        action = done.action
        if isinstance(action, PostEvent):
            if done.error is not None:
                log.debug("event not recorded", error=str(done.error))
            return
        key = (action.namespace or "", action.name)
        purpose = action.purpose
        if purpose == "admit":
            self._admission_written(key, done)
        elif purpose == "evict":
            self._evicted(key, done)
        elif purpose in ("requeue", "pods-ready", "deactivate"):
            self._requeueing.discard(key)
            self._deactivating.discard(key)
            if done.ok and done.body is not None:
                self._apply_own_write(key, done.body)
                self._sync_workload(key, own_write=True)
                if purpose == "pods-ready":
                    self._note_pods_ready(action, done.body)
                if purpose == "requeue":
                    self._event(
                        WORKLOAD_API,
                        "Workload",
                        self.workloads[key],
                        "Normal",
                        "Requeued",
                        "The workload backoff was finished",
                    )
            elif done.error is not None and not isinstance(done.error, (NotFound, Conflict)):
                self._write_failed(done)
        elif purpose in ("workload-status", "finish"):
            if purpose == "finish":
                self._finishing.discard(key)
                if done.superseded and key in self.workloads:
                    owner = self._owner_job(self.workloads[key])
                    if owner is not None:
                        self._reconcile_job(owner)  # write it again
                    return
            if done.ok and done.body is not None:
                self._apply_own_write(key, done.body)
                if purpose == "finish":
                    self.core.remove_workload(key)
                    self._fed.pop(key, None)
                    self.metrics.workload_finished(self._cluster_queue_of(key))
            elif done.error is not None and not isinstance(done.error, NotFound):
                self._write_failed(done)
        elif purpose == "create-workload":
            self._creating.discard(key)
            if done.ok and done.body is not None:
                workload = msgspec.json.decode(done.body, type=Workload)
                owner = self._owner_job(workload)
                job = self.jobs.get(owner) if owner else None
                if job is not None:
                    self._event(
                        "batch/v1",
                        "Job",
                        job,
                        "Normal",
                        "CreatedWorkload",
                        f"Created Workload: {key[0]}/{key[1]}",
                    )
                self._apply_own_write(key, done.body)
            elif done.error is not None and not isinstance(done.error, Conflict):
                self._write_failed(done)
        elif purpose in ("job-start", "job-suspend", "job-restore", "job-clear-start"):
            self._job_intent.pop(key, None)
            seen = self._job_rvs_in_flight.pop(key, set())
            if done.ok and done.body is not None:
                self._apply_own_job_write(key, done.body, seen)
            if done.error is not None or done.superseded:
                if done.error is not None and not isinstance(done.error, NotFound):
                    self._write_failed(done)
            elif purpose == "job-start" and done.body is not None:
                started = msgspec.json.decode(done.body, type=Job)
                owned = self.workloads.get(self._workload_key_for(started))
                admission = owned.status.admission if owned is not None else None
                cq_name = admission.cluster_queue if admission is not None else ""
                self._event(
                    "batch/v1", "Job", started, "Normal", "Started", f"Admitted by clusterQueue {cq_name}"
                )
            elif purpose == "job-clear-start":
                self._reconcile_job(key)  # the template can be restored now
        elif purpose == "lq-status":
            if done.ok and done.body is not None:
                lq_written = msgspec.json.decode(done.body, type=LocalQueue)
                self.local_queues[(lq_written.metadata.namespace, lq_written.metadata.name)] = lq_written
            elif done.error is not None:
                self._cq_dirty = True
                if not isinstance(done.error, (NotFound, Conflict)):
                    self._write_failed(done)
        elif purpose == "cq-status":
            if done.ok and done.body is not None:
                written = msgspec.json.decode(done.body, type=ClusterQueue)
                self.cluster_queues[written.metadata.name] = written
            elif done.error is not None:
                self._cq_dirty = True
                if not isinstance(done.error, (NotFound, Conflict)):
                    self._write_failed(done)
        elif done.error is not None and not isinstance(done.error, (NotFound, Conflict)):
            self._write_failed(done)

    def _note_pods_ready(self, action: Action, body: bytes) -> None:
        """Metrics: a PodsReady=True we wrote (written only when it changes) ends the wait for ready."""
        sent = msgspec.json.decode(getattr(action, "patch", b"{}"))
        conditions = (sent.get("status") or {}).get("conditions") or []
        if not any(c.get("type") == PODS_READY and c.get("status") == "True" for c in conditions):
            return
        written = msgspec.json.decode(body, type=Workload)
        admission = written.status.admission
        reserved = condition(written.status.conditions, "QuotaReserved")
        self.metrics.workload_ready(
            admission.cluster_queue if admission else "",
            written.metadata.creation_timestamp,
            reserved.last_transition_time if reserved else None,
        )

    def _cluster_queue_of(self, key: Key) -> str:
        workload = self.workloads.get(key)
        if workload is None:
            return ""
        if workload.status.admission is not None:
            return workload.status.admission.cluster_queue
        return self.core.queues.local_queues.get((key[0], workload.spec.queue_name), "")

    def _write_failed(self, done: WriteDone) -> None:
        self.stats.write_errors += 1
        action = done.action
        log.warning(
            "write failed",
            purpose=action.purpose,
            object=f"{getattr(action, 'namespace', '')}/{getattr(action, 'name', '')}",
            error=str(done.error),
        )

    def _is_awaiting(self, key: Key) -> bool:
        awaited = self._awaiting.get(key)
        if awaited is None:
            return False
        if self.monotonic() < awaited[1]:
            return True
        del self._awaiting[key]
        return False

    def _apply_own_job_write(self, key: Key, body: bytes, seen: set[str] | None = None) -> None:
        job = msgspec.json.decode(body, type=Job)
        if seen and job.metadata.resource_version in seen:
            return  # the watch brought our write (and maybe newer) before its response
        previous = self.jobs.get(key)
        self.jobs[key] = job
        rv = job.metadata.resource_version
        if previous is None or previous.metadata.resource_version != rv:
            self._job_awaiting[key] = rv

    def _apply_own_write(
        self, key: Key, body: bytes, *, until_seen: bool = False, seen: set[str] | None = None
    ) -> None:
        """Our write's response is the newest state: apply it now, skip the older events."""
        workload = msgspec.json.decode(body, type=Workload)
        if seen and workload.metadata.resource_version in seen:
            return  # the watch brought our write (and maybe newer) before its response
        previous = self.workloads.get(key)
        self.workloads[key] = workload
        rv = workload.metadata.resource_version
        if previous is not None and previous.metadata.resource_version == rv:
            return  # a write that changed nothing makes no event to wait for
        # An admission is awaited until its own event: an older event must never look like
        # the admission was cleared (that would hand its quota out twice).
        deadline = float("inf") if until_seen else self.monotonic() + AWAIT_OWN_WRITE_SECONDS
        self._awaiting[key] = (rv, deadline)

    def _admission_written(self, key: Key, done: WriteDone) -> None:
        self._admitting.discard(key)
        seen = self._status_rvs_in_flight.pop(key, set())
        if done.ok and done.body is not None:
            self.stats.admitted += 1
            self._apply_own_write(key, done.body, until_seen=True, seen=seen)
            # Its own watch event may have come first and been set aside: start the PodsReady clock now.
            self._sync_workload(key, own_write=True)
            workload = self.workloads[key]
            cq = workload.status.admission.cluster_queue if workload.status.admission else ""
            self.metrics.quota_reserved(cq, workload.metadata.creation_timestamp)
            self._event(
                WORKLOAD_API,
                "Workload",
                workload,
                "Normal",
                "QuotaReserved",
                f"Quota reserved in ClusterQueue {cq}, wait time since queued was "
                f"{_seconds_since(workload.metadata.creation_timestamp, self.clock())}s",
            )
            self._event(
                WORKLOAD_API,
                "Workload",
                workload,
                "Normal",
                "Admitted",
                f"Admitted by ClusterQueue {cq}, wait time since reservation was 0s",
            )
            owner = self._owner_job(workload)
            if owner is not None:
                self._reconcile_job(owner)
            return
        # Not admitted after all: give the quota back and decide again on fresh state.
        if isinstance(done.error, Conflict):
            self.stats.admission_conflicts += 1
        elif done.error is not None and not isinstance(done.error, NotFound):
            self._write_failed(done)
        if isinstance(done.error, NotFound):
            self.core.remove_workload(key)
        else:
            self.core.rollback(key)
        self._fed.pop(key, None)


def _seconds_since(stamp: str | None, now: str) -> int:
    start, end = epoch(stamp), epoch(now)
    return 0 if start is None or end is None else max(0, int(end - start))
