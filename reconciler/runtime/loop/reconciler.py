"""The reconciler: the single writer, and the one loop that drives its concerns.

It consumes inbox items (watch events and write results). A watch event
updates the store (or the core's queue objects) and marks keys dirty; a write
result goes to the completion handler its action carries. After each item,
and on every status tick, the dirty marks are processed in a fixed order:

1. workloads: the core fed with what the API shows (`workloads.Workloads`);
2. jobs: Workloads created, jobs suspended, started, restored (`jobs.Jobs`, one per
   integration `integrations.frameworks` enables);
3. PodsReady: deadlines armed or dropped, then the pods of changed jobs checked
   (`pods_ready.PodsReady`);
4. (after a batch) the scheduler's cycle, whose decisions become admission and
   pending writes; (on a tick) queue status (`queue_status.QueueStatus`).

Nothing here awaits: each call returns quickly, and the API calls happen in
the writer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from functools import partial
from operator import attrgetter
from typing import Any

import structlog

from reconciler.api import (
    ClusterQueue,
    Cohort,
    LocalQueue,
    Namespace,
    PriorityClass,
    Workload,
    WorkloadPriorityClass,
)
from reconciler.api.pods import ManagedPod
from reconciler.api.resources import WORKLOADS, Resource
from reconciler.api.times import now_rfc3339
from reconciler.config import Configuration
from reconciler.core.model.jobs import PODSET_LABEL
from reconciler.core.scheduling.scheduler import Admit
from reconciler.feed import feed_cluster_queue, feed_cohort, feed_flavor, feed_local_queue, feed_namespace
from reconciler.integrations import POD, REGISTRY, Integration, enabled, implied_only
from reconciler.integrations.pods.pod import pod_is_job
from reconciler.kube import WatchEvent
from reconciler.observability.metrics import Metrics
from reconciler.runtime.jobs.concern import JobKinds
from reconciler.runtime.jobs.lws import lws_groups
from reconciler.runtime.jobs.podgroups import GROUP_KIND, enable_pod_groups
from reconciler.runtime.jobs.topology_ungater import RETRY_PURPOSE, TopologyUngater
from reconciler.runtime.loop.decisions import carry_out, models_differ
from reconciler.runtime.loop.pod_events import PodEvents
from reconciler.runtime.loop.views import ReconcilerViews
from reconciler.runtime.queues.config_reload import ConfigReload, ConfigReloads
from reconciler.runtime.queues.in_use import InUse
from reconciler.runtime.queues.inventory import Inventory
from reconciler.runtime.queues.status import QueueStatus
from reconciler.runtime.queues.topology import TopologyFeed
from reconciler.runtime.shared.actions import Action, WriteDone
from reconciler.runtime.shared.context import Context, ReconcilerStats
from reconciler.runtime.shared.events import EventRecorder
from reconciler.runtime.shared.patches import after_reclaim, holds_quota
from reconciler.runtime.shared.store import Key
from reconciler.runtime.shared.timers import rechecked_kind
from reconciler.runtime.shared.watched import (
    KIND_BOUND_HANDLERS,
    POD_JOBS_HANDLER,
    WATCHED_KINDS,
    watched_kinds,
)
from reconciler.runtime.workloads.concern import Workloads
from reconciler.runtime.workloads.pods_ready import PodsReady
from reconciler.runtime.workloads.preemption import Preemption

__all__ = ["ALL_WATCHED", "INVENTORY_WATCHED", "LABEL_SELECTORS", "WATCHED", "Reconciler", "ReconcilerStats"]

log = structlog.get_logger(__name__)

# Every so often every Workload and Job is reconciled again, whatever the events said.
RESYNC_SECONDS = 30.0
# The controller's namespace when neither the caller nor the Configuration names one (Kueue's).
DEFAULT_NAMESPACE = "kueue-system"
# Rounds of dirty processing per pass; what one round marks is handled by the next.
MAX_ROUNDS = 4
# Every kind the reconciler needs synced before it decides anything (the table's rows).
WATCHED: tuple[Resource, ...] = tuple(row.resource for row in watched_kinds(inventory_on=False))
# Watched too with deviceInventory.mode Report or Enforce.
INVENTORY_WATCHED: tuple[Resource, ...] = tuple(row.resource for row in WATCHED_KINDS if row.inventory)
ALL_WATCHED = WATCHED + INVENTORY_WATCHED
LABEL_SELECTORS: dict[str, str] = {
    row.resource.plural: row.label_selector for row in WATCHED_KINDS if row.label_selector is not None
}


class Reconciler(ReconcilerViews, PodEvents):
    def __init__(
        self,
        config: Configuration,
        submit: Callable[[Action], None],
        *,
        instance: str = "reconciler",
        clock: Callable[[], str] = now_rfc3339,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        metrics: Metrics | None = None,
        namespace: str | None = None,
        registry: Mapping[str, Integration] = REGISTRY,
    ) -> None:
        """`namespace`: the controller's own (default: the Configuration's, else kueue-system);
        `registry`: framework names -> integrations, of which `integrations.frameworks` enables some."""
        events = EventRecorder(submit, clock, instance, monotonic)
        integrations = enabled(config.frameworks, registry)
        self.ctx = Context(
            config,
            submit,
            events,
            clock=clock,
            monotonic=monotonic,
            wall=wall,
            metrics=metrics or Metrics(),
            integrations=integrations,
        )
        self.ctx.engine.scheduler.fair_sharing = config.fair_sharing_strategies
        self.preemption = Preemption(self.ctx)
        self.workload_sync = Workloads(self.ctx, admission_settled=self.preemption.admission_settled)
        own_namespace = namespace or config.namespace or DEFAULT_NAMESPACE
        self.pod_groups = enable_pod_groups(self.ctx, own_namespace, integrations)  # with plain pods
        self.job_kinds = JobKinds(self.ctx, integrations, own_namespace, self.pod_groups)  # one per kind
        self.lws_groups = lws_groups(self.ctx, self.job_kinds, own_namespace)
        self.pods_ready = PodsReady(self.ctx)
        self.queue_status = QueueStatus(self.ctx)
        self.in_use = InUse(self.ctx)
        self.config_reloads = ConfigReloads(self.ctx, self.workload_sync.mappings_changed)
        self.inventory = Inventory(self.ctx, self.workload_sync.extended_changed)
        # The kinds whose pods are placed in topology domains, as each registers it.
        placed = [(i, i.topology_placement) for i in integrations if i.topology_placement is not None]
        owners = {(i.api_version, i.kind) for i, _ in placed}
        self.topology = TopologyFeed(self.ctx, self.inventory.index, owners)
        self.ungater = TopologyUngater(self.ctx, {i.kind: ranks for i, ranks in placed})
        # (DeviceClasses also with the gate KueueDRAIntegrationExtendedResource)
        inventory_on, device_classes = config.device_inventory.enabled, config.extended_resources
        self.watched_kinds = watched_kinds(inventory_on, integrations, device_classes=device_classes)
        self.watched = tuple(row.resource for row in self.watched_kinds)
        self.synced: set[str] = set()
        self.ready, self._next_resync = False, 0.0
        self.retry_due: float | None = None  # (monotonic) when parked workloads are next retried
        # The event dispatch, from the table: each watched kind's handler (a job's with its kind).
        self._on_object: dict[str, Callable[[Key, Any], None]] = {
            row.resource.plural: _handler(self, row.handler, self.job_kinds.kind_of.get(row.resource.plural))
            for row in watched_kinds(True, integrations)
        }

    # --- the inbox ----------------------------------------------------------------------

    def handle(self, item: WatchEvent[Any] | WriteDone | ConfigReload) -> None:
        """Apply one inbox item, then process what it marked (decisions wait for the batch's end)."""
        if isinstance(item, WriteDone):
            self.ctx.completed(item)
        elif isinstance(item, ConfigReload):
            self.config_reloads.apply(item)
        elif item.kind == "SYNCED":
            self._on_synced(item.resource.plural)
        else:
            handler = self._on_object.get(item.resource.plural)
            if handler is not None:
                handler(item.key, None if item.kind == "DELETED" else item.obj)
        if self.ready:
            self._drain()

    def after_batch(self) -> None:
        """Decide, after a batch of inbox items has been applied."""
        if not self.ready:
            return
        self._drain()
        if self.pods_ready.admission_blocked():
            return
        ctx = self.ctx
        self.inventory.refresh()
        self.topology.refresh()
        started = ctx.monotonic()
        self.retry_due = ctx.engine.queues.release_retries(started)
        decisions = ctx.engine.schedule()
        if decisions:
            admits = any(isinstance(d, Admit) for d in decisions)
            ctx.metrics.admission_attempt(admits, ctx.monotonic() - started)
        carry_out(decisions, self.workload_sync, self.preemption)
        self.workload_sync.write_waiting_for_start()
        ctx.dirty.queue_status = True

    def flush_status(self) -> None:
        """Fire due timers, then write queue status where it differs from the API (on a tick)."""
        if not self.ready:
            return
        ctx = self.ctx
        for key in ctx.workload_writes.expired():
            ctx.dirty.workload(key)  # our write's own event never came: decide on what we have
        self._drain()  # deadlines set by what is still marked count for this tick
        for key, purpose in ctx.timers.due(ctx.wall()):
            if purpose == "pods-ready":
                self.pods_ready.expired(key)
            elif purpose == "claims":
                self.pods_ready.check_pods(key)
            elif purpose == RETRY_PURPOSE:
                self.ungater.retry(key)
            elif (kind := rechecked_kind(purpose)) is not None:
                ctx.dirty.jobs.add((kind, *key))
            else:
                ctx.dirty.workload(key)
        if ctx.monotonic() >= self._next_resync:
            # Level-triggered safety net: anything a lost trigger left undone is redone.
            self._next_resync = ctx.monotonic() + RESYNC_SECONDS
            self._resync(WORKLOADS.plural)
        self._drain()
        self.in_use.recheck()
        self.queue_status.flush()
        ctx.events.tick()

    def _drain(self) -> None:
        """Process the dirty marks in the loop's fixed order."""
        dirty, store, concerns = self.ctx.dirty, self.ctx.store, self.job_kinds.concerns
        for _ in range(MAX_ROUNDS):
            self.ungater.flush()  # (its writes mark nothing dirty)
            if not dirty.pending():
                return
            workloads, dirty.workloads = dirty.workloads, {}
            for key, own_write in workloads.items():
                self.workload_sync.sync(key, own_write=own_write)
            jobs, dirty.jobs = dirty.jobs, set()
            for ref in jobs:
                concerns[ref[0]].reconcile((ref[1], ref[2]))  # (JobKinds.reconcile, one call less)
            tracked, dirty.pods_ready = dirty.pods_ready, set()
            for key in tracked:
                self.pods_ready.refresh(key)
            pods, dirty.pods = dirty.pods, set()
            for ref in pods:
                wl_key = store.pods_workload(ref)  # a JobSet's Job: its pods are the JobSet's
                if wl_key is not None:
                    self.pods_ready.check_pods(wl_key)

    # --- watch events -------------------------------------------------------------------

    def _on_synced(self, kind: str) -> None:
        self.synced.add(kind)
        if kind == WORKLOADS.plural:
            self.ctx.workload_writes.relisted()
        self.job_kinds.relisted(kind)
        if not self.ready and all(r.plural in self.synced for r in self.watched):
            self._become_ready()
        elif self.ready:
            self._resync(kind)

    def _become_ready(self) -> None:
        ctx = self.ctx
        started = ctx.monotonic()
        admitted = [(k, after_reclaim(w)) for k, w in ctx.store.workloads.items() if holds_quota(w)]
        ctx.engine.rebuild((k, a) for k, a in admitted if a is not None)
        ctx.metrics.ledger_rebuilt(ctx.monotonic() - started)
        log.info("caches synced; ledger rebuilt", admitted=len(admitted), workloads=len(ctx.store.workloads))
        self.ready = True
        self._resync(WORKLOADS.plural)
        self.in_use.check_all()

    def _resync(self, kind: str) -> None:
        dirty, store = self.ctx.dirty, self.ctx.store
        if kind == WORKLOADS.plural:
            for key in store.workloads:
                dirty.workload(key)
        self.job_kinds.resync(kind, all_kinds=kind == WORKLOADS.plural)

    def _on_job(self, key: Key, job: Any, *, kind: str) -> None:
        self.job_kinds.on_job(key, job, kind=kind, ready=self.ready)

    def _on_workload(self, key: Key, workload: Workload | None) -> None:
        ctx = self.ctx
        if workload is None:
            owner = ctx.store.owner(key)
            ctx.store.put_workload(key, None)
            ctx.workload_writes.forget(key)
            ctx.dirty.workload(key)
            if owner is not None and self.ready:
                ctx.dirty.jobs.add(owner)  # a job whose Workload is gone gets a new one
            return
        if not ctx.workload_writes.accept_event(key, workload.metadata.resource_version):
            return  # older than our own write, which we already applied
        ctx.store.put_workload(key, workload)
        if self.ready:
            ctx.dirty.workload(key)
            owner = ctx.store.owner(key)
            if owner is not None:
                ctx.dirty.jobs.add(owner)

    def _on_template(self, key: Key, template: Any) -> None:
        templates = self.ctx.store.templates
        if template is None:
            templates.pop(key, None)
        else:
            templates[key] = template
        if self.ready:
            self.workload_sync.template_changed(key[0])
        self.ctx.dirty.queue_status = True
        self.inventory.changed()

    def _on_cluster_queue(self, key: Key, cq: ClusterQueue | None) -> None:
        ctx, name = self.ctx, key[1]
        ctx.dirty.queue_status = True
        known = ctx.store.cluster_queues.get(name)
        if cq is None or known is None or known.metadata.generation != cq.metadata.generation:
            self.inventory.changed()  # its covered resources decide which mapping problems it is told of
        if cq is None:
            ctx.store.cluster_queues.pop(name, None)
            feed_cluster_queue(ctx.engine, name, None)
        else:
            previous = ctx.store.cluster_queues.get(name)
            ctx.store.cluster_queues[name] = cq
            # Only a change of what the core models (spec, deletion) is given to it: a status
            # write (often our own) must not wake what is parked, as in Kueue.
            if previous is None or models_differ(previous, cq) or name not in ctx.engine.cache.cluster_queues:
                reason = feed_cluster_queue(ctx.engine, name, cq)
                if reason is not None:
                    log.warning("ClusterQueue cannot be used", cluster_queue=name, error=reason)
                if self.ready:
                    self.workload_sync.cluster_queue_changed(name)
        if self.ready:
            self.in_use.cluster_queue(name)
            self.in_use.recheck()  # a flavor it listed may be free now

    def _on_cohort(self, key: Key, cohort: Cohort | None) -> None:
        ctx, name = self.ctx, key[1]
        ctx.dirty.queue_status = True
        if ctx.store.put_cohort(name, cohort):
            return  # only its status changed (our own write): the tree is as it was
        reason = feed_cohort(ctx.engine, name, cohort)
        if reason is not None:
            # Its ClusterQueues keep serving; the cohort lends nothing of its own meanwhile.
            log.warning("Cohort cannot be used", cohort=name, error=reason)

    def _on_local_queue(self, key: Key, lq: LocalQueue | None) -> None:
        ctx = self.ctx
        ctx.dirty.queue_status = True
        if lq is None:
            ctx.store.local_queues.pop(key, None)
        else:
            ctx.store.local_queues[key] = lq
        feed_local_queue(ctx.engine, key[0], key[1], lq, ctx.wall())
        if self.ready:
            self.workload_sync.local_queue_changed(key[0], key[1])

    def _on_flavor(self, key: Key, flavor: Any) -> None:
        self.ctx.dirty.queue_status = True
        self.inventory.changed()
        feed_flavor(self.ctx.engine, key[1], flavor)
        if self.ready:
            self.in_use.flavor(key[1])

    def _on_namespace(self, key: Key, namespace: Namespace | None) -> None:
        self.ctx.dirty.queue_status = True
        feed_namespace(self.ctx.engine, namespace)
        if self.ready:
            self.job_kinds.namespace_changed(key[1])

    def _on_workload_priority_class(self, key: Key, wpc: WorkloadPriorityClass | None) -> None:
        classes = self.ctx.store.workload_priority_classes
        if wpc is None:
            classes.pop(key[1], None)
        else:
            classes[key[1]] = wpc
        if self.ready:
            self.job_kinds.priority_classes_changed()
            self.job_kinds.follow_labels()

    def _on_priority_class(self, key: Key, pc: PriorityClass | None) -> None:
        classes = self.ctx.store.priority_classes
        if pc is None:
            classes.pop(key[1], None)
        else:
            classes[key[1]] = pc
        if self.ready:
            self.job_kinds.priority_classes_changed()


def _on_pod_or_job(reconciler: Reconciler, key: Key, pod: ManagedPod | None, *, kind: str) -> None:
    """A pod with the plain-pod integration on: a job of its own while labelled managed (a pod
    group's managed pod is its group's, see `podgroups`; a LeaderWorkerSet's pod is its group's,
    see `lws`), and in the pod index while it is a started job's (as `_on_any_pod`)."""
    if reconciler.lws_groups.on_pod(key, pod):
        managed = False  # a LeaderWorkerSet's pod: its group is the job
    else:
        implied = implied_only(reconciler.ctx.config.frameworks, POD.framework)  # for parents' pods only
        managed = pod is not None and pod_is_job(pod.metadata, implied=implied)
        managed = managed and kind in reconciler.job_kinds.by_kind  # the plain-pod integration is on
        groups = reconciler.pod_groups.get(GROUP_KIND)
        if groups is not None and groups.on_pod(key, pod if managed else None, ready=reconciler.ready):
            managed = False  # its group is the job
    if managed or key in reconciler.ctx.store.of_kind(kind):
        reconciler.job_kinds.on_job(key, pod if managed else None, kind=kind, ready=reconciler.ready)
    brief = None if pod is None else pod.as_pod()
    reconciler.topology.pod(key, brief)
    reconciler.ungater.pod(key, brief)
    started = brief is not None and (
        PODSET_LABEL in brief.metadata.labels or reconciler.of_managed_job(brief)
    )
    if started or key in reconciler.ctx.pod_index.pods:
        reconciler.on_pod(key, brief if started else None)


def _handler(reconciler: Reconciler, name: str, job_kind: str | None) -> Callable[[Key, Any], None]:
    """A table row's handler: the Reconciler's attribute it names (a job's bound to its kind;
    the pods of the plain-pod integration's row go to `_on_pod_or_job`)."""
    if name == POD_JOBS_HANDLER:
        return partial(_on_pod_or_job, reconciler, kind=job_kind or "Pod")
    handler: Callable[..., None] = attrgetter(name)(reconciler)
    if name in KIND_BOUND_HANDLERS and job_kind is not None:
        return partial(handler, kind=job_kind)
    return handler
