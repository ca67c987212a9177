"""Who goes next: one scheduling cycle over the ClusterQueues whose queues changed.

`Scheduler.cycle` walks each changed ClusterQueue's pending queue in order,
assigns flavors against the cache's free quota, and returns decisions: admit a
workload with its flavors (its quota is reserved in the cache at once, and it
leaves the queue manager), or leave it pending with Kueue's reason and
message. A pending verdict is reported only when it changed.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field, replace
from functools import partial

from .cache import QuotaCache
from .clusterqueues import ClusterQueueModel, active_condition
from .flavors import FlavorFit, FlavorNoFit, PodSetFlavors, assign_flavors, considered_flavors
from .inventory_admission import InventoryGate
from .ledger import Charge
from .pending_queue import Candidate, PendingQueue
from .preemption import Target, preemption_possibility, preemption_targets
from .queues import QueueManager
from .selectors import label_selector_matches
from .workloads import WorkloadInfo

__all__ = ["REASON_INADMISSIBLE", "REASON_PENDING", "Admit", "Decision", "Pending", "Preempt", "Scheduler"]

WorkloadKey = tuple[str, str]

# Kueue's reasons with its granular-reasons feature off, as users of the
# walkthrough see them: quota waits are "Pending", configuration problems
# "Inadmissible".
REASON_PENDING = "Pending"
REASON_INADMISSIBLE = "Inadmissible"
NAMESPACE_MISMATCH = "Workload namespace doesn't match ClusterQueue selector"


@dataclass(frozen=True, slots=True)
class Admit:
    key: WorkloadKey
    cluster_queue: str
    pod_sets: list[PodSetFlavors]
    # The flavors tried on the way, in Kueue's words ("" when the first flavor fit).
    considered: str = ""


@dataclass(frozen=True, slots=True)
class Pending:
    key: WorkloadKey
    reason: str
    message: str
    # Set when the workload is not in any ClusterQueue's queue.
    cluster_queue: str | None = None


@dataclass(frozen=True, slots=True)
class Preempt:
    """Evict `targets` so that the pending workload `key` fits (it stays pending meanwhile)."""

    key: WorkloadKey
    cluster_queue: str
    targets: tuple[Target, ...]


Decision = Admit | Pending | Preempt


@dataclass
class Scheduler:
    # The last pending verdict reported per workload, and per parked group.
    _last: dict[WorkloadKey, tuple[str, str]] = field(default_factory=dict)
    _group_verdicts: dict[tuple[str | None, Hashable], tuple[str, str] | None] = field(default_factory=dict)
    # deviceInventory.mode Enforce: what fits quota must fit the free devices too.
    gate: InventoryGate | None = None

    def forget(self, key: WorkloadKey) -> None:
        """The workload changed or left: its next verdict is reported whatever it is."""
        self._last.pop(key, None)

    def cycle(self, cache: QuotaCache, queues: QueueManager) -> list[Decision]:
        """Admit what fits, in queue order; report what cannot be admitted and why."""
        decisions: list[Decision] = []
        for key, message in queues.take_unreported():
            self._report(decisions, Pending(key, REASON_INADMISSIBLE, message))
        for name in queues.take_dirty():
            queue = queues.queues.get(name)
            model = cache.cluster_queues.get(name)
            if queue is None or model is None:
                continue
            self._schedule_queue(cache, queues, model, queue, decisions)
        return decisions

    def _report(self, out: list[Decision], pending: Pending) -> None:
        """Emit a pending verdict only when it differs from the last one for that workload."""
        verdict = (pending.reason, pending.message)
        if self._last.get(pending.key) != verdict:
            self._last[pending.key] = verdict
            out.append(pending)

    def _schedule_queue(
        self,
        cache: QuotaCache,
        queues: QueueManager,
        model: ClusterQueueModel,
        queue: PendingQueue,
        out: list[Decision],
    ) -> None:
        if active_condition(model, cache.flavors)[0] != "True":
            # Nothing in this queue can be admitted until the ClusterQueue is fixed.
            message = f"ClusterQueue {model.name} is inactive"
            for key in queue.ordered_keys():
                self._report(out, Pending(key, REASON_INADMISSIBLE, message, model.name))
            return
        # Verdicts by shape hold until this ClusterQueue's usage changes (an admission).
        verdicts: dict[bytes, FlavorNoFit] = {}
        capacity = cache.capacity
        # Workloads some preemptor in this pass already counts on evicting.
        claimed: set[WorkloadKey] = set()
        selector_ok: dict[str, bool] = {}
        while (candidate := queue.next_candidate()) is not None:
            key = candidate.key
            info = queues.workloads[key]
            ok = selector_ok.get(info.namespace)
            if ok is None:
                labels = cache.namespaces.get(info.namespace, {})
                ok = selector_ok[info.namespace] = label_selector_matches(model.namespace_selector, labels)
            if not ok:
                group: Hashable = ("namespace", info.namespace)
                pending = Pending(key, REASON_PENDING, NAMESPACE_MISMATCH, model.name)
                self._settle(out, queue, candidate, group, pending)
                continue
            result = verdicts.get(info.shape)
            if result is None:
                devices = self.gate.check(cache.ledger) if self.gate is not None else None
                fit = assign_flavors(info, model, cache.flavors, capacity, devices)
                if isinstance(fit, FlavorFit):
                    considered = considered_flavors(fit, partial(_possibility, cache, info, model))
                    queues.remove(key)  # out of its pending queue too
                    cache.admit(info, Charge(model.name, fit.usage))
                    self._last.pop(key, None)
                    out.append(Admit(key, model.name, fit.pod_sets, considered))
                    verdicts.clear()
                    continue
                result = verdicts[info.shape] = fit
            pending = Pending(key, REASON_PENDING, result.message, model.name)
            group = info.shape
            if result.waiting_for_quota and _may_preempt(model):
                targets = preemption_targets(info, model, cache, cache.flavors)
                victims = {t.key for t in targets}
                if targets and not victims & claimed:
                    claimed |= victims
                    message = f"{result.message}. Pending the preemption of {len(targets)} workload(s)"
                    pending = Pending(key, REASON_PENDING, message, model.name)
                    group = ("preempting", key)  # parked alone: its verdict is its own
                    fresh = tuple(t for t in targets if t.key not in cache.evicting)
                    cache.evicting |= victims
                    if fresh:
                        out.append(Preempt(key, model.name, fresh))
            if candidate.group is None and queue.strict_fifo and result.waiting_for_quota:
                self._report(out, pending)
                return
            self._settle(out, queue, candidate, group, pending)

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


def _possibility(cache: QuotaCache, info: WorkloadInfo, model: ClusterQueueModel, flavor: str) -> str:
    return preemption_possibility(info, model, cache, flavor) if _may_preempt(model) else "NoCandidates"


def _may_preempt(model: ClusterQueueModel) -> bool:
    return model.within_cluster_queue != "Never" or (
        model.cohort is not None and model.reclaim_within_cohort != "Never"
    )
