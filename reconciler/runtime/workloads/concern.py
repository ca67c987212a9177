"""The Workload lifecycle: the core fed with what the API shows. The writes it leads to are
the parts': the scheduler's verdicts (`workload_verdicts`), the requeue after a backoff
(`workload_requeue`), letting go of Workloads whose Job is gone (`workload_orphans`) and a
LocalQueue's or ClusterQueue's stopPolicy: drained, then requeued once it runs again
(`workload_stopped`), and the maximum execution time of admitted Workloads: their deactivation
once exceeded (`max_execution`).
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import structlog

from reconciler.api import Workload, pod_template_view
from reconciler.core.model.workloads import (
    DEVICE_CHARGES_ANNOTATION,
    FIRST_AVAILABLE_ANNOTATION,
    WorkloadInfo,
)
from reconciler.core.primitives.ordering import EVICTION_TIMESTAMP, queue_order_timestamp
from reconciler.core.primitives.quantity import QuantityError
from reconciler.core.quota.cache import after_reclaim
from reconciler.core.scheduling.podsready import PODS_READY
from reconciler.core.scheduling.scheduler import Admit, Pending
from reconciler.core.status import condition, set_condition
from reconciler.feed import WorkloadSources, compile_for
from reconciler.runtime.shared.context import Context
from reconciler.runtime.shared.patches import evicted, holds_quota
from reconciler.runtime.shared.store import Key
from reconciler.runtime.workloads.max_execution import MaxExecution
from reconciler.runtime.workloads.orphans import Orphans
from reconciler.runtime.workloads.requeue import Requeues
from reconciler.runtime.workloads.stopped import StoppedQueues
from reconciler.runtime.workloads.verdicts import Verdicts, seconds_since

__all__ = ["DEVICE_CHARGES_ANNOTATION", "FIRST_AVAILABLE_ANNOTATION", "Workloads", "seconds_since"]

log = structlog.get_logger(__name__)


class Workloads:
    def __init__(
        self, ctx: Context, admission_settled: Callable[[Key, bool], None] = lambda key, admitted: None
    ) -> None:
        self.ctx = ctx
        # The generation of each workload as last given to the core.
        self._fed: dict[Key, int] = {}
        self.verdicts = Verdicts(ctx, unfeed=self._unfeed, admission_settled=admission_settled)
        self.requeues = Requeues(ctx)
        self.orphans = Orphans(ctx, forget=self._forget)
        self.stopped = StoppedQueues(ctx)
        self.max_execution = MaxExecution(ctx)

    def _unfeed(self, key: Key) -> None:
        self._fed.pop(key, None)

    def compile(self, workload: Workload) -> WorkloadInfo:
        config = self.ctx.config
        sources = WorkloadSources(
            config.class_to_resource,
            self.ctx.store.templates,
            self.ctx.pod_index.claims,
            config.class_capacities,
            config.device_inventory.enabled,
            self.ctx.extended_resources if config.extended_resources else None,
        )
        info = compile_for(self.ctx.engine, workload, sources)
        wfpr = self.ctx.config.wait_for_pods_ready
        strategy = wfpr.requeuing_timestamp if wfpr is not None else EVICTION_TIMESTAMP
        info.created = queue_order_timestamp(workload, strategy) or info.created
        return info

    # --- the scheduler's decisions (written by the verdicts) -----------------------------

    def admit(self, decision: Admit) -> None:
        self.verdicts.admit(decision)

    def pending(self, decision: Pending, *, write: bool = True) -> None:
        self.verdicts.pending(decision, write=write)

    def write_waiting_for_start(self) -> None:
        self.verdicts.write_waiting_for_start()

    # --- keeping the core in line with the API ------------------------------------------

    def sync(self, key: Key, *, own_write: bool = False) -> None:
        """Bring the core in line with the Workload the API shows (or our write just returned)."""
        ctx = self.ctx
        workload = ctx.store.workloads.get(key)
        if workload is None:
            self._fed.pop(key, None)
            self.verdicts.forget(key)
            ctx.timers.cancel(key, "requeue")
            ctx.engine.remove_workload(key)
            ctx.dirty.pods_ready.add(key)
            return
        if ctx.workload_writes.in_flight(key, "admit", "evict"):
            return
        if not own_write and ctx.workload_writes.awaiting(key):
            return
        if self._let_go(key, workload):
            return
        # Whatever follows, the PodsReady tracking looks at this workload again.
        ctx.dirty.pods_ready.add(key)
        self.max_execution.check(key, workload)  # (its timer, or the deactivation once exceeded)
        if holds_quota(workload):
            self.stopped.drain(workload)
            self._keep_admitted(key, workload)
            if evicted(workload):  # (holds its quota: evicting)
                # Also after a restart: it keeps its quota until its job is seen no longer running.
                ctx.engine.keep_evicting(key)
            return
        if not workload.spec.active:
            self._forget(key)  # inactive: in no queue until reactivated
            if workload.status.requeue_state is not None:
                # As Kueue: an inactive workload's requeue count goes, so reactivation starts afresh.
                self.requeues.write("reset", workload, {"requeueState": None})
            return
        self._reactivated(workload)
        if self.requeues.backing_off(key, workload) or self.stopped.restarting(key, workload):
            self._hold(key, workload)
            return
        if not self._feed(key, workload):
            return
        if ctx.tracks_pods_ready(key) and condition(workload.status.conditions, PODS_READY) is None:
            self.verdicts.wait_for_start(key)

    def _let_go(self, key: Key, workload: Workload) -> bool:
        """Its Job is gone, it is being deleted or it finished: out of the core. True if so."""
        store = self.ctx.store
        owner = store.owner(key)
        orphaned = False
        if owner is not None:
            table = store.by_kind.get(owner[0])
            job = None if table is None else table.get((owner[1], owner[2]))
            # A job stopped by deletion (a pod) is gone for good once it is being deleted.
            orphaned = job is None or (
                job.metadata.deletion_timestamp is not None and store.integrations[owner[0]].stop_deletes
            )
        if orphaned or workload.metadata.deletion_timestamp:
            # As Kueue, an orphan not yet being deleted is first finished (OwnerNotFound), which
            # returns its quota; one being deleted keeps its quota until the API no longer shows it.
            if orphaned and not workload.metadata.deletion_timestamp and holds_quota(workload):
                self.orphans.finish(workload)
            elif not holds_quota(workload):
                self._forget(key)
            self.orphans.release_finalizer(workload)
            return True
        for c in workload.status.conditions:  # its first Finished (as is_true reads it, in one call)
            if c.type == "Finished":
                if c.status == "True":
                    self._forget(key)
                    return True
                break
        return False

    def _keep_admitted(self, key: Key, workload: Workload) -> None:
        # Also after a restart: the rebuilt ledger has the charges, not what preemption needs to know.
        engine = self.ctx.engine
        charged = after_reclaim(workload)  # finished pods' quota given back (reclaimablePods)
        assert charged is not None
        if (
            not engine.is_admitted(key)
            or key not in engine.cache.workloads
            or (charged is not workload.status.admission and engine.charge_changed(key, charged))
        ):
            reserved = condition(workload.status.conditions, "QuotaReserved")
            at = (reserved.last_transition_time if reserved else None) or ""
            engine.add_workload(self.compile(workload), charged, at)
            self._fed[key] = workload.metadata.generation

    def _reactivated(self, workload: Workload) -> None:
        """Requeued=False Deactivated* on an active workload: Requeued=True Reactivated is written."""
        requeued = condition(workload.status.conditions, "Requeued")
        if requeued is None or requeued.status != "False" or not requeued.reason.startswith("Deactivated"):
            return
        conditions = set_condition(
            workload.status.conditions,
            "Requeued",
            "True",
            "Reactivated",
            "The workload was reactivated",
            self.ctx.clock(),
            workload.metadata.generation or None,
        )
        self.requeues.write("reactivated", workload, {"conditions": msgspec.to_builtins(conditions)})

    def _hold(self, key: Key, workload: Workload) -> None:
        # Pending (inadmissible) in its queues' counts, but not scheduled until the backoff ends.
        engine = self.ctx.engine
        if not engine.is_held(key):
            try:
                engine.hold(self.compile(workload))
            except (QuantityError, msgspec.ValidationError):
                engine.remove_workload(key)
        self._fed.pop(key, None)

    def _feed(self, key: Key, workload: Workload) -> bool:
        """Give the workload to the core unless it has this generation already; False if it
        cannot be compiled."""
        engine = self.ctx.engine
        generation = workload.metadata.generation
        fed = self._fed.get(key) == generation and engine.workload(key) is not None
        if engine.is_admitted(key) or engine.is_held(key) or not fed:
            # Newly seen, spec changed, evicted, or its admission was cleared by someone else.
            try:
                info = self.compile(workload)
            except (QuantityError, msgspec.ValidationError) as err:
                log.warning("Workload cannot be compiled", workload=f"{key[0]}/{key[1]}", error=str(err))
                return False
            engine.add_workload(info)
            self._fed[key] = generation
        return True

    # --- what makes waiting workloads be charged again ----------------------------------

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

    def extended_changed(self, names: frozenset[str]) -> None:
        """The DeviceClass serving some extended resources appeared, went or changed: the Workloads
        not holding quota that ask for one of them are charged again (admitted ones keep theirs)."""
        ctx = self.ctx
        for key, workload in ctx.store.workloads.items():
            if holds_quota(workload) or ctx.engine.is_admitted(key) or not _asks_for(workload, names):
                continue
            self._fed.pop(key, None)
            if ctx.engine.is_held(key):
                ctx.engine.remove_workload(key)  # held again, with the new charge, by sync
            ctx.dirty.workload(key)

    def _forget(self, key: Key) -> None:
        self.ctx.engine.remove_workload(key)  # a no-op for a workload the core does not know
        self._fed.pop(key, None)
        self.verdicts.forget(key)

    def template_changed(self, namespace: str) -> None:
        """A template (or shared claim) that appears can make a waiting workload chargeable."""
        for wl_key, info in list(self.ctx.engine.queues.workloads.items()):
            if wl_key[0] == namespace and info.problem is not None and info.problem.retryable:
                self._fed.pop(wl_key, None)
                self.ctx.dirty.workload(wl_key)

    def cluster_queue_changed(self, name: str) -> None:
        """A ClusterQueue's resources may have changed: the firstAvailable choices of the workloads
        waiting in it are made again; only those whose charge changes are given to the core anew.
        Its stopPolicy may have changed too (`workload_stopped`)."""
        ctx = self.ctx
        self.stopped.cluster_queue_changed(name)
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

    def local_queue_changed(self, namespace: str, name: str) -> None:
        """A LocalQueue was added, changed or deleted: its stopPolicy may have changed
        (`workload_stopped`; its waiting workloads are moved by the core)."""
        self.stopped.local_queue_changed(namespace, name)

    def shared_claim_changed(self, namespace: str) -> None:
        """A pre-created ResourceClaim appeared or went: the waiting workloads of its namespace are
        charged again (admitted ones keep their charge)."""
        for wl_key in list(self.ctx.engine.queues.workloads):
            if wl_key[0] == namespace:
                self._fed.pop(wl_key, None)
                self.ctx.dirty.workload(wl_key)


def _asks_for(workload: Workload, names: frozenset[str]) -> bool:
    """Whether a container (or init container) of one of the Workload's pod sets asks for one of
    `names` (requests or limits)."""
    for pod_set in workload.spec.pod_sets:
        spec = pod_template_view(pod_set.template).spec
        for container in (*spec.containers, *spec.init_containers):
            wanted = container.resources
            if names.intersection(wanted.requests) or names.intersection(wanted.limits):
                return True
    return False
