"""The admission state machine: queues, quota and decisions, with no I/O.

`Admission` holds the known ResourceFlavors, ClusterQueues, LocalQueues,
Namespaces and Workloads, the quota ledger and the pending queues. Callers
feed it changes and call `schedule()`, which returns decisions: admit a
workload with its flavors (its quota is reserved in the ledger at once), or
leave it pending with Kueue's reason and message. A caller that fails to
write an admission calls `rollback()`; quota then returns and the workload
waits again.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from reconciler.api import Admission as AdmissionStatus
from reconciler.api import ResourceFlavor

from .clusterqueues import ClusterQueueModel, active_condition
from .flavors import FlavorFit, FlavorNoFit, PodSetFlavors, assign_flavors
from .ledger import Charge, FlavorResource, Ledger
from .quantity import parse_quantity, to_amount
from .queues import Candidate, PendingQueue
from .selectors import label_selector_matches
from .workloads import WorkloadInfo

__all__ = [
    "REASON_INADMISSIBLE",
    "REASON_PENDING",
    "Admission",
    "Admit",
    "Decision",
    "Pending",
    "admission_node_labels",
    "charge_from_admission",
    "node_labels_for",
]

WorkloadKey = tuple[str, str]

# Kueue's reasons with its granular-reasons feature off, as users of the
# walkthrough see them: quota waits are "Pending", configuration problems
# "Inadmissible".
REASON_PENDING = "Pending"
REASON_INADMISSIBLE = "Inadmissible"
NAMESPACE_MISMATCH = "workload namespace doesn't match ClusterQueue selector"


@dataclass(frozen=True, slots=True)
class Admit:
    key: WorkloadKey
    cluster_queue: str
    pod_sets: list[PodSetFlavors]


@dataclass(frozen=True, slots=True)
class Pending:
    key: WorkloadKey
    reason: str
    message: str
    # Set when the workload is not in any ClusterQueue's queue.
    cluster_queue: str | None = None


Decision = Admit | Pending


def charge_from_admission(admission: AdmissionStatus) -> Charge:
    """The ledger charge an admitted Workload's status.admission describes."""
    usage: dict[FlavorResource, int] = {}
    for assignment in admission.pod_set_assignments:
        for resource, quantity in assignment.resource_usage.items():
            flavor = assignment.flavors.get(resource)
            if flavor is None:
                continue
            fr = (flavor, resource)
            usage[fr] = usage.get(fr, 0) + to_amount(resource, parse_quantity(quantity))
    return Charge(admission.cluster_queue, usage)


@dataclass
class Admission:
    flavors: dict[str, ResourceFlavor] = field(default_factory=dict)
    cluster_queues: dict[str, ClusterQueueModel] = field(default_factory=dict)
    # ClusterQueues whose spec could not be used, with the reason.
    broken_cluster_queues: dict[str, str] = field(default_factory=dict)
    local_queues: dict[WorkloadKey, str] = field(default_factory=dict)
    namespaces: dict[str, Mapping[str, str]] = field(default_factory=dict)
    workloads: dict[WorkloadKey, WorkloadInfo] = field(default_factory=dict)
    ledger: Ledger = field(default_factory=Ledger)
    queues: dict[str, PendingQueue] = field(default_factory=dict)
    # Waiting workloads: the ClusterQueue whose queue holds each, or None when blocked.
    _placement: dict[WorkloadKey, str | None] = field(default_factory=dict)
    _dirty: set[str] = field(default_factory=set)
    # Waiting workloads that could not enter a queue (missing LocalQueue, ...).
    _blocked: set[WorkloadKey] = field(default_factory=set)
    _by_local_queue: dict[WorkloadKey, set[WorkloadKey]] = field(default_factory=dict)
    # Waiting out a requeue backoff: pending (inadmissible) in this ClusterQueue, never scheduled.
    _held: set[WorkloadKey] = field(default_factory=set)
    # Decisions for workloads that cannot enter a queue, reported on the next schedule().
    _outbox: dict[WorkloadKey, Pending] = field(default_factory=dict)
    # The last pending verdict reported per workload, and per parked group.
    _last: dict[WorkloadKey, tuple[str, str]] = field(default_factory=dict)
    _group_verdicts: dict[tuple[str | None, Hashable], tuple[str, str] | None] = field(default_factory=dict)

    # --- queue objects ------------------------------------------------------------------

    def set_flavor(self, flavor: ResourceFlavor) -> None:
        self.flavors[flavor.metadata.name] = flavor
        self._retry_queues()

    def delete_flavor(self, name: str) -> None:
        self.flavors.pop(name, None)
        self._retry_queues()

    def set_cluster_queue(self, model: ClusterQueueModel) -> None:
        self.broken_cluster_queues.pop(model.name, None)
        self.cluster_queues[model.name] = model
        queue = self.queues.setdefault(model.name, PendingQueue())
        queue.strict_fifo = model.strategy == "StrictFIFO"
        self._retry_blocked()
        self._retry_queues([model.name])

    def set_broken_cluster_queue(self, name: str, reason: str) -> None:
        self.cluster_queues.pop(name, None)
        self.broken_cluster_queues[name] = reason
        self._requeue_cluster_queue_members(name)

    def delete_cluster_queue(self, name: str) -> None:
        self.cluster_queues.pop(name, None)
        self.broken_cluster_queues.pop(name, None)
        self._requeue_cluster_queue_members(name)

    def set_local_queue(self, namespace: str, name: str, cluster_queue: str) -> None:
        self.local_queues[(namespace, name)] = cluster_queue
        self._replace_local_queue_members((namespace, name))

    def delete_local_queue(self, namespace: str, name: str) -> None:
        self.local_queues.pop((namespace, name), None)
        self._replace_local_queue_members((namespace, name))

    def set_namespace(self, name: str, labels: Mapping[str, str]) -> None:
        self.namespaces[name] = dict(labels)
        self._retry_queues()

    def cluster_queue_active(self, name: str) -> tuple[str, str, str]:
        model = self.cluster_queues.get(name)
        if model is None:
            reason = self.broken_cluster_queues.get(name, "not found")
            return "False", "Unknown", f"Can't admit new workloads: {reason}."
        return active_condition(model, self.flavors)

    # --- workloads ----------------------------------------------------------------------

    def add_workload(self, info: WorkloadInfo, admission: AdmissionStatus | None = None) -> None:
        """Add or replace a workload; an admitted one is charged to the ledger as-is."""
        key = info.key
        self._unplace(key)
        self._unhold(key)
        charge = self.ledger.release(key)
        if charge is not None:
            self._freed(charge.cluster_queue)
        self._last.pop(key, None)
        self.workloads[key] = info
        if admission is not None:
            self.ledger.reserve(key, charge_from_admission(admission))
            return
        self._place(info)

    def remove_workload(self, key: WorkloadKey) -> None:
        """The workload finished or was deleted: forget it and return its quota."""
        self._unplace(key)
        self._unhold(key)
        self.workloads.pop(key, None)
        self._outbox.pop(key, None)
        self._last.pop(key, None)
        charge = self.ledger.release(key)
        if charge is not None:
            self._freed(charge.cluster_queue)

    def release(self, key: WorkloadKey) -> None:
        """Return a workload's quota and queue it again (eviction, failed write)."""
        charge = self.ledger.release(key)
        if charge is not None:
            self._freed(charge.cluster_queue)
        info = self.workloads.get(key)
        if info is not None:
            self._unplace(key)
            self._place(info)

    rollback = release

    def hold(self, info: WorkloadInfo) -> None:
        """A workload waiting out its requeue backoff: counted as pending, not scheduled until added."""
        key = info.key
        self.remove_workload(key)
        self.workloads[key] = info
        self._held.add(key)
        self._by_local_queue.setdefault((info.namespace, info.queue_name), set()).add(key)

    def is_held(self, key: WorkloadKey) -> bool:
        return key in self._held

    def _leave_local_queue(self, key: WorkloadKey) -> None:
        info = self.workloads.get(key)
        if info is None:
            return
        members = self._by_local_queue.get((info.namespace, info.queue_name))
        if members is not None:
            members.discard(key)
            if not members:
                del self._by_local_queue[(info.namespace, info.queue_name)]

    def _unhold(self, key: WorkloadKey) -> None:
        if key not in self._held:
            return
        self._held.discard(key)
        self._leave_local_queue(key)

    def rebuild(self, admitted: Iterable[tuple[WorkloadKey, AdmissionStatus]]) -> None:
        """Recompute the ledger from admitted Workloads (start, relist)."""
        self.ledger.rebuild((key, charge_from_admission(a)) for key, a in admitted)
        self._retry_queues()

    def is_admitted(self, key: WorkloadKey) -> bool:
        return self.ledger.holds(key)

    # --- scheduling ---------------------------------------------------------------------

    def schedule(self) -> list[Decision]:
        """Admit what fits, in queue order; report what cannot be admitted and why."""
        decisions: list[Decision] = []
        for pending in self._outbox.values():
            self._report(decisions, pending)
        self._outbox.clear()
        for name in sorted(self._dirty):
            queue = self.queues.get(name)
            model = self.cluster_queues.get(name)
            if queue is None or model is None:
                continue
            self._schedule_queue(model, queue, decisions)
        self._dirty.clear()
        return decisions

    def _report(self, out: list[Decision], pending: Pending) -> None:
        """Emit a pending verdict only when it differs from the last one for that workload."""
        verdict = (pending.reason, pending.message)
        if self._last.get(pending.key) != verdict:
            self._last[pending.key] = verdict
            out.append(pending)

    def _schedule_queue(self, model: ClusterQueueModel, queue: PendingQueue, out: list[Decision]) -> None:
        if active_condition(model, self.flavors)[0] != "True":
            # Nothing in this queue can be admitted until the ClusterQueue is fixed.
            message = f"ClusterQueue {model.name} is inactive"
            for key in queue.ordered_keys():
                self._report(out, Pending(key, REASON_INADMISSIBLE, message, model.name))
            return
        # Verdicts by shape hold until this ClusterQueue's usage changes (an admission).
        verdicts: dict[bytes, FlavorNoFit] = {}
        selector_ok: dict[str, bool] = {}
        while (candidate := queue.next_candidate()) is not None:
            key = candidate.key
            info = self.workloads[key]
            ok = selector_ok.get(info.namespace)
            if ok is None:
                ok = label_selector_matches(model.namespace_selector, self.namespaces.get(info.namespace, {}))
                selector_ok[info.namespace] = ok
            if not ok:
                group: Hashable = ("namespace", info.namespace)
                pending = Pending(key, REASON_INADMISSIBLE, NAMESPACE_MISMATCH, model.name)
                self._settle(out, queue, candidate, group, pending)
                continue
            result = verdicts.get(info.shape)
            if result is None:
                fit = assign_flavors(info, model, self.flavors, self.ledger)
                if isinstance(fit, FlavorFit):
                    queue.take(candidate)
                    self.ledger.reserve(key, Charge(model.name, fit.usage))
                    self._last.pop(key, None)
                    out.append(Admit(key, model.name, fit.pod_sets))
                    verdicts.clear()
                    continue
                result = verdicts[info.shape] = fit
            pending = Pending(key, REASON_PENDING, result.message, model.name)
            if candidate.group is None and queue.strict_fifo and result.waiting_for_quota:
                self._report(out, pending)
                return
            self._settle(out, queue, candidate, info.shape, pending)

    def _settle(
        self,
        out: list[Decision],
        queue: PendingQueue,
        candidate: Candidate,
        group: Hashable,
        pending: Pending,
    ) -> None:
        """Park a workload that does not fit; a parked group shares its first member's verdict."""
        verdict = (pending.reason, pending.message)
        group_id = (pending.cluster_queue, group)
        if candidate.group is not None:
            if self._group_verdicts.get(group_id) != verdict:
                for member in list(queue.group_members(candidate.group)):
                    self._report(out, replace(pending, key=member))
                self._group_verdicts[group_id] = verdict
        else:
            self._report(out, pending)
            queue.park(candidate.key, group)
            if self._group_verdicts.setdefault(group_id, verdict) != verdict:
                self._group_verdicts[group_id] = None
        queue.settle(candidate.group if candidate.group is not None else group)

    # --- placement of waiting workloads -------------------------------------------------

    def _place(self, info: WorkloadInfo) -> None:
        key = info.key
        self._placement[key] = None
        self._by_local_queue.setdefault((info.namespace, info.queue_name), set()).add(key)
        self._blocked.add(key)
        if info.problem is not None:
            self._outbox[key] = Pending(key, REASON_INADMISSIBLE, info.problem.message)
            return
        cq_name = self.local_queues.get((info.namespace, info.queue_name))
        if cq_name is None:
            self._outbox[key] = Pending(
                key, REASON_INADMISSIBLE, f"LocalQueue {info.queue_name} doesn't exist"
            )
            return
        if cq_name not in self.cluster_queues:
            self._outbox[key] = Pending(key, REASON_INADMISSIBLE, f"ClusterQueue {cq_name} doesn't exist")
            return
        self._outbox.pop(key, None)
        self._blocked.discard(key)
        self._placement[key] = cq_name
        self.queues.setdefault(cq_name, PendingQueue()).push(key, info.priority, info.created, info.uid)
        self._dirty.add(cq_name)

    def _unplace(self, key: WorkloadKey) -> None:
        if key not in self._placement:
            return
        cq_name = self._placement.pop(key)
        self._blocked.discard(key)
        self._leave_local_queue(key)
        if cq_name is not None:
            queue = self.queues.get(cq_name)
            if queue is not None:
                queue.remove(key)

    def _freed(self, cluster_queue: str) -> None:
        queue = self.queues.get(cluster_queue)
        if queue is not None:
            queue.wake_parked()
        self._dirty.add(cluster_queue)

    def _retry_blocked(self) -> None:
        for key in list(self._blocked):
            info = self.workloads.get(key)
            if info is not None and info.problem is None:
                self._unplace(key)
                self._place(info)

    def _replace_local_queue_members(self, local_queue: WorkloadKey) -> None:
        for key in list(self._by_local_queue.get(local_queue, ())):
            info = self.workloads.get(key)
            if info is not None and not self.ledger.holds(key) and key not in self._held:
                self._unplace(key)
                self._place(info)

    def _requeue_cluster_queue_members(self, name: str) -> None:
        queue = self.queues.pop(name, None)
        if queue is not None:
            for key in queue.ordered_keys():
                info = self.workloads.get(key)
                if info is not None:
                    self._unplace(key)
                    self._place(info)

    def _retry_queues(self, names: Iterable[str] | None = None) -> None:
        """Quota, flavors or selectors changed: set-aside workloads get another chance."""
        for name in self.queues if names is None else names:
            queue = self.queues.get(name)
            if queue is not None:
                queue.wake_parked()
                self._dirty.add(name)

    # --- reporting ----------------------------------------------------------------------

    def local_queue_members(self, namespace: str, name: str) -> tuple[int, list[WorkloadKey]]:
        """(waiting workloads, admitted workloads) submitted through one LocalQueue."""
        waiting = sum(
            1 for key in self._by_local_queue.get((namespace, name), ()) if not self.ledger.holds(key)
        )
        cluster_queue = self.local_queues.get((namespace, name))
        admitted: list[WorkloadKey] = []
        if cluster_queue is not None:
            for key in self.ledger.holders(cluster_queue):
                info = self.workloads.get(key)
                if info is not None and info.namespace == namespace and info.queue_name == name:
                    admitted.append(key)
        return waiting, admitted

    def local_queue_pending_counts(self, namespace: str, name: str) -> tuple[int, int]:
        """(active, inadmissible) waiting workloads of one LocalQueue: active ones are queued for a
        decision; the others were set aside (did not fit) or cannot be queued at all."""
        active = inadmissible = 0
        for key in self._by_local_queue.get((namespace, name), ()):
            if self.ledger.holds(key):
                continue
            cq_name = self._placement.get(key)
            queue = self.queues.get(cq_name) if cq_name is not None else None
            if queue is not None and queue.is_active(key):
                active += 1
            else:
                inadmissible += 1
        return active, inadmissible

    def pending_counts(self, cluster_queue: str) -> tuple[int, int]:
        """(active, inadmissible) pending workloads of a ClusterQueue."""
        held = 0
        for key in self._held:
            info = self.workloads.get(key)
            if info is not None and self.local_queues.get((info.namespace, info.queue_name)) == cluster_queue:
                held += 1
        queue = self.queues.get(cluster_queue)
        if queue is None:
            return (0, held)
        return (queue.active_count(), queue.inadmissible_count() + held)


def _flavor_labels(flavor_names: Iterable[str], flavors: Mapping[str, ResourceFlavor]) -> dict[str, str]:
    labels: dict[str, str] = {}
    for name in dict.fromkeys(flavor_names):
        flavor = flavors.get(name)
        if flavor is not None:
            labels.update(flavor.spec.node_labels)
    return labels


def node_labels_for(decision: Admit, flavors: Mapping[str, ResourceFlavor]) -> dict[str, dict[str, str]]:
    """Per pod set, the nodeLabels of its assigned flavors, to merge into the Job's nodeSelector.

    As Kueue does, each distinct flavor assigned to a pod set contributes its labels.
    """
    return {ps.name: _flavor_labels(ps.flavors.values(), flavors) for ps in decision.pod_sets}


def admission_node_labels(
    admission: AdmissionStatus, flavors: Mapping[str, ResourceFlavor]
) -> dict[str, dict[str, str]]:
    """The same, read back from a Workload's status.admission."""
    return {a.name: _flavor_labels(a.flavors.values(), flavors) for a in admission.pod_set_assignments}
