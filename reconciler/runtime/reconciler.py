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

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec
import structlog

from reconciler.config import Configuration
from reconciler.core.admission import Admission, Admit, Pending, admission_node_labels
from reconciler.core.clusterqueues import InvalidClusterQueueError, compile_cluster_queue
from reconciler.core.jobs import is_managed, job_outcome, start_patch, suspend_patch
from reconciler.core.projections import (
    ClusterQueue,
    ClusterQueueStatus,
    Condition,
    Job,
    LocalQueue,
    LocalQueueStatus,
    Namespace,
    ResourceClaimTemplate,
    Workload,
    WorkloadStatus,
)
from reconciler.core.quantity import QuantityError
from reconciler.core.status import (
    admitted_workload_status,
    cluster_queue_status,
    condition,
    local_queue_status,
    pending_workload_status,
    set_condition,
)
from reconciler.core.workloads import WorkloadInfo, compile_workload, workload_for_job, workload_name_for_job
from reconciler.kube import (
    CLUSTER_QUEUES,
    EVENTS,
    JOBS,
    LOCAL_QUEUES,
    NAMESPACES,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_FLAVORS,
    WORKLOADS,
    Conflict,
    NotFound,
    Resource,
    WatchEvent,
)
from reconciler.observability.metrics import Metrics

from .actions import Action, Create, MergePatch, PostEvent
from .events import event_body
from .writer import WriteDone

__all__ = ["WATCHED", "Reconciler"]

log = structlog.get_logger(__name__)

Key = tuple[str, str]
WORKLOAD_API = "kueue.x-k8s.io/v1beta2"
# How long events older than our own write are ignored; past it, the watch is the truth.
AWAIT_OWN_WRITE_SECONDS = 5.0
# Every so often every Workload and Job is reconciled again, whatever the events said.
RESYNC_SECONDS = 30.0
# Every kind the reconciler needs synced before it decides anything.
WATCHED: tuple[Resource, ...] = (
    JOBS,
    WORKLOADS,
    RESOURCE_CLAIM_TEMPLATES,
    CLUSTER_QUEUES,
    LOCAL_QUEUES,
    RESOURCE_FLAVORS,
    NAMESPACES,
)


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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
    core: Admission = field(default_factory=Admission)
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
    # resourceVersions the watch delivered while our Job write or admission was in flight: when the
    # response's version is among them, the watch got there first and the cache is already as new.
    _job_rvs_in_flight: dict[Key, set[str]] = field(default_factory=dict)
    _admission_rvs_in_flight: dict[Key, set[str]] = field(default_factory=dict)
    # After our own Job write: its resourceVersion; older Job events are stale until it is seen.
    _job_awaiting: dict[Key, str] = field(default_factory=dict)
    # Workloads whose Finished write is in flight.
    _finishing: set[Key] = field(default_factory=set)
    _next_resync: float = 0.0
    _cq_dirty: bool = True

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
            self._reconcile_job(key)

    def _on_workload(self, key: Key, workload: Workload | None) -> None:
        if workload is None:
            self.workloads.pop(key, None)
            self._awaiting.pop(key, None)
            self._fed.pop(key, None)
            self.core.remove_workload(key)
            return
        if key in self._admitting:
            self._admission_rvs_in_flight.setdefault(key, set()).add(workload.metadata.resource_version)
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
        for wl_key, info in list(self.core.workloads.items()):
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

    def _sync_workload(self, key: Key) -> None:
        """Bring the core in line with the Workload the API shows."""
        workload = self.workloads.get(key)
        if workload is None or key in self._admitting or self._is_awaiting(key):
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
            workload.status, decision, now, workload.metadata.generation or None
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
        info = self.core.workloads.get(key)
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

    def _write_job(self, job: Job, purpose: Literal["job-start", "job-suspend"], patch: bytes) -> bool:
        """Ask for a start or a suspend once; False when it is already asked for."""
        key = (job.metadata.namespace, job.metadata.name)
        if self._job_intent.get(key) == purpose:
            return False  # in flight; its response updates the cached Job
        self._job_intent[key] = purpose
        self.submit(MergePatch(purpose, JOBS, key[0], key[1], patch, slot_name="job"))
        return True

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
        elif purpose in ("job-start", "job-suspend"):
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

    def _cluster_queue_of(self, key: Key) -> str:
        workload = self.workloads.get(key)
        if workload is None:
            return ""
        if workload.status.admission is not None:
            return workload.status.admission.cluster_queue
        return self.core.local_queues.get((key[0], workload.spec.queue_name), "")

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
        seen = self._admission_rvs_in_flight.pop(key, set())
        if done.ok and done.body is not None:
            self.stats.admitted += 1
            self._apply_own_write(key, done.body, until_seen=True, seen=seen)
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
    if not stamp:
        return 0
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    try:
        return max(
            0, int((dt.datetime.strptime(now, fmt) - dt.datetime.strptime(stamp, fmt)).total_seconds())
        )
    except ValueError:
        return 0
