"""The core's three parts wired together: cache (admitted), queues (waiting), scheduler (next).

Callers feed it changes and call `schedule()`. The changes that concern more
than one part live here: a workload moving between the cache and the queues,
quota coming back waking the queues, queue objects that both parts know.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from reconciler.api import Admission, ResourceFlavor, Topology

from .model.clusterqueues import ClusterQueueModel
from .model.workloads import WorkloadInfo
from .queueing.admission_fair_sharing import AdmissionFairSharing, AfsSettings, Milli, to_milli
from .queueing.queues import QueueManager
from .quota.cache import QuotaCache, charge_from_admission
from .quota.capacity import CohortModel
from .quota.fair_sharing import Share, dominant_share
from .quota.ledger import Charge, Ledger
from .scheduling.scheduler import Decision, Scheduler
from .scheduling.topology_fit import record_topology
from .topology.domains import TopologyNode

__all__ = ["Engine"]

WorkloadKey = tuple[str, str]


@dataclass
class Engine:
    cache: QuotaCache = field(default_factory=QuotaCache)
    queues: QueueManager = field(default_factory=QueueManager)
    scheduler: Scheduler = field(default_factory=Scheduler)
    # Preempting heads skipped per ClusterQueue in the last cycle that skipped any (Kueue's gauge).
    preemption_skips: dict[str, int] = field(default_factory=dict)

    @property
    def ledger(self) -> Ledger:
        return self.cache.ledger

    @property
    def flavors(self) -> Mapping[str, ResourceFlavor]:
        return self.cache.flavors

    def schedule(self) -> list[Decision]:
        decisions = self.scheduler.cycle(self.cache, self.queues)
        self.preemption_skips.update(self.scheduler.skips)
        self.scheduler.skips.clear()
        return decisions

    @property
    def fair_sharing(self) -> bool:
        return self.scheduler.fair_sharing is not None

    def share(self, kind: str, name: str) -> Share:
        """The dominant resource share of a ClusterQueue (`kind` "cq") or cohort ("cohort") now."""
        return dominant_share(self.cache.capacity, (kind, name))

    def cohort_names(self) -> list[str]:
        """Every cohort known: Cohort objects and the cohorts ClusterQueues name."""
        return sorted(self.cache.cohort_models.keys() | self.cache.cohorts.keys())

    # --- queue objects ------------------------------------------------------------------

    def set_flavor(self, flavor: ResourceFlavor) -> None:
        previous = self.cache.flavors.get(flavor.metadata.name)
        self.cache.set_flavor(flavor)
        if previous is None or previous.spec != flavor.spec:
            self.queues.retry()  # not on metadata alone (a finalizer added): nothing could fit anew

    def delete_flavor(self, name: str) -> None:
        self.cache.delete_flavor(name)
        self.queues.retry()

    def set_topology(self, topology: Topology) -> None:
        self.cache.topologies[topology.metadata.name] = topology
        self.queues.retry()

    def delete_topology(self, name: str) -> None:
        self.cache.topologies.pop(name, None)
        self.queues.retry()

    def set_topology_nodes(self, nodes: Iterable[TopologyNode]) -> None:
        """The nodes as topology-aware scheduling sees them (each one's free capacity without the
        pods of admitted TAS workloads). Until they are set, flavors naming a Topology are refused."""
        self.cache.topology_nodes = list(nodes)
        self.queues.retry()

    def set_cluster_queue(self, model: ClusterQueueModel) -> None:
        before = self.cache.cohort_members(model.name)
        self.cache.set_cluster_queue(model)
        self.queues.set_cluster_queue(
            model.name, strict_fifo=model.strategy == "StrictFIFO", fair_admission=model.fair_admission
        )
        # Its quota (or its cohort) changed: what its old and new cohorts can lend changed too.
        self.queues.retry(before | self.cache.cohort_members(model.name))

    def set_broken_cluster_queue(self, name: str, reason: str) -> None:
        members = self.cache.cohort_members(name) - {name}
        self.cache.set_broken_cluster_queue(name, reason)
        self.queues.delete_cluster_queue(name)
        self.queues.retry(members)

    def delete_cluster_queue(self, name: str) -> None:
        members = self.cache.cohort_members(name) - {name}
        self.cache.delete_cluster_queue(name)
        self.queues.delete_cluster_queue(name)
        self.preemption_skips.pop(name, None)  # its gauge goes with it, as in Kueue
        self.queues.retry(members)

    def set_cohort(self, model: CohortModel) -> None:
        """A Cohort object (hierarchical cohorts) was added or changed: its tree's quota moved."""
        self.queues.retry(self.cache.set_cohort(model))

    def delete_cohort(self, name: str) -> None:
        self.queues.retry(self.cache.delete_cohort(name))

    def set_local_queue(
        self, namespace: str, name: str, cluster_queue: str, weight: float = 1.0, stopped: bool = False
    ) -> None:
        """`weight`: its spec.fairSharing.weight (admission fair sharing); `stopped`: its stopPolicy
        holds it (its waiting workloads are not admitted)."""
        self.queues.set_local_queue(namespace, name, cluster_queue, weight, stopped)

    def delete_local_queue(self, namespace: str, name: str) -> None:
        self.queues.delete_local_queue(namespace, name)

    def set_namespace(self, name: str, labels: Mapping[str, str]) -> None:
        if self.cache.namespaces.get(name) == labels:
            return  # only its labels matter to the selectors
        self.cache.set_namespace(name, labels)
        self.queues.retry()

    # --- workloads ----------------------------------------------------------------------

    def workload(self, key: WorkloadKey) -> WorkloadInfo | None:
        """What is known of a workload, admitted or waiting."""
        return self.queues.workloads.get(key) or self.cache.workloads.get(key)

    def add_workload(
        self, info: WorkloadInfo, admission: Admission | None = None, reserved_at: str = ""
    ) -> None:
        """Add or replace a workload; an admitted one is charged to the cache as its status says
        (`reserved_at`: when it got its quota, which orders preemption candidates)."""
        key = info.key
        evicting = key in self.cache.evicting
        self.queues.remove(key)
        charge = charge_from_admission(admission) if admission is not None else None
        if charge is not None and self.cache.ledger.charge_of(key) == charge:
            # The same quota seen again (its own admission coming back): nothing was freed,
            # so nothing parked is woken; like Kueue, which retries only on quota released.
            self.cache.release(key)
        else:
            self._release(key)
        self.scheduler.forget(key)
        if charge is not None and admission is not None:
            self.cache.admit(info, charge, reserved_at)
            assigned = [(a.name, a.flavors, a.topology_assignment) for a in admission.pod_set_assignments]
            record_topology(self.cache, info, assigned)
            if evicting:
                self.cache.evicting.add(key)
        else:
            self.queues.add(info)

    def charge_changed(self, key: WorkloadKey, admission: Admission) -> bool:
        """Whether an admitted workload's charge differs from what `admission` describes."""
        return self.cache.ledger.charge_of(key) != charge_from_admission(admission)

    def eviction_failed(self, key: WorkloadKey) -> None:
        """An eviction asked for by preemption was not written: the workload is a candidate again,
        and whoever waited for it is tried again."""
        self.cache.evicting.discard(key)
        charge = self.cache.ledger.charge_of(key)
        if charge is not None:
            self._freed(charge)

    def keep_evicting(self, key: WorkloadKey) -> None:
        """Its eviction is written but its job still runs: it keeps its quota until the
        reservation ends, and is the first preemption candidate, never asked to go again."""
        if self.cache.holds(key):
            self.cache.evicting.add(key)

    def remove_workload(self, key: WorkloadKey) -> None:
        """The workload finished or was deleted: forget it and return its quota."""
        self.admission_lost(key)
        self.queues.leave(key)
        self.scheduler.forget(key)
        self._release(key)

    def release(self, key: WorkloadKey) -> None:
        """Return a workload's quota and queue it again (eviction, failed write)."""
        info = self._release(key)
        if info is None:
            info = self.queues.workloads.get(key)
        if info is not None:
            self.queues.add(info)

    rollback = release

    def hold(self, info: WorkloadInfo) -> None:
        """A workload waiting out its requeue backoff: counted as pending, not scheduled until added."""
        self.remove_workload(info.key)
        self.queues.hold(info)

    def is_held(self, key: WorkloadKey) -> bool:
        return self.queues.is_held(key)

    def is_admitted(self, key: WorkloadKey) -> bool:
        return self.cache.ledger.holds(key)  # (QuotaCache.holds, one call less: asked on every decision)

    def rebuild(self, admitted: Iterable[tuple[WorkloadKey, Admission]]) -> None:
        """Recompute the ledger from admitted Workloads (start, relist)."""
        self.cache.rebuild(admitted)
        self.queues.retry()

    def _release(self, key: WorkloadKey) -> WorkloadInfo | None:
        charge, info = self.cache.release(key)
        if charge is not None:
            self._freed(charge)
        return info

    def _freed(self, charge: Charge) -> None:
        # In a cohort, quota one member gives back may be what another member waits for.
        for name in self.cache.cohort_members(charge.cluster_queue):
            self.queues.quota_freed(name)

    # --- admission fair sharing ----------------------------------------------------------

    def enable_admission_fair_sharing(self, settings: AfsSettings) -> None:
        """Turn admission fair sharing on (before any queue object is fed)."""
        self.queues.afs = AdmissionFairSharing(settings)

    @property
    def afs(self) -> AdmissionFairSharing | None:
        return self.queues.afs

    def afs_admitted_usage(self, namespace: str, name: str) -> Milli:
        """What the LocalQueue's admitted workloads use, by resource, in milli-units."""
        cluster_queue = self.queues.local_queues.get((namespace, name))
        admitted = self.cache.admitted_through(cluster_queue, namespace, name) if cluster_queue else []
        usage: dict[tuple[str, str], int] = {}
        for key in admitted:
            charge = self.ledger.charge_of(key)
            if charge is not None:
                for fr, amount in charge.usage.items():
                    usage[fr] = usage.get(fr, 0) + amount
        return to_milli(usage)

    def afs_seed(self, namespace: str, name: str, consumed: Milli, now: float) -> None:
        """The LocalQueue's persisted consumedResources (read back at start-up)."""
        afs = self.queues.afs
        if afs is not None:
            afs.seed((namespace, name), consumed, now)

    def afs_sample(self, namespace: str, name: str, now: float) -> bool:
        """Sample the LocalQueue's usage when due (its ClusterQueue uses admission fair sharing);
        True when it was sampled."""
        afs, lq = self.queues.afs, (namespace, name)
        cluster_queue = self.queues.local_queues.get(lq)
        if afs is None or cluster_queue is None or not self.queues.uses_afs(cluster_queue):
            return False
        if not afs.due(lq, now):
            return False
        afs.sample(lq, self.afs_admitted_usage(namespace, name), now)
        return True

    def admission_written(self, key: WorkloadKey, now: float) -> None:
        """The scheduler's admission of `key` was written: its entry penalty joins its
        LocalQueue's usage (Kueue does this when the Workload turns Admitted)."""
        afs = self.queues.afs
        info = self.cache.workloads.get(key)
        if afs is None or info is None:
            return
        afs.written(key, self.afs_admitted_usage(info.namespace, info.queue_name), now)

    def admission_lost(self, key: WorkloadKey) -> None:
        """The admission of `key` was not written (or the workload left first): its penalty goes."""
        afs = self.queues.afs
        if afs is not None:
            afs.lost(key)

    # --- reporting ----------------------------------------------------------------------

    def local_queue_members(self, namespace: str, name: str) -> tuple[int, list[WorkloadKey]]:
        """(waiting workloads, admitted workloads) submitted through one LocalQueue."""
        waiting = self.queues.waiting_in_local_queue(namespace, name)
        cluster_queue = self.queues.local_queues.get((namespace, name))
        if cluster_queue is None:
            return waiting, []
        return waiting, self.cache.admitted_through(cluster_queue, namespace, name)
