"""One ClusterQueue's turn in a scheduling cycle: its candidates in queue order, one step at a
time (admit, preempt for, try smaller, or park with its verdict).

A head that fits neither as it is nor by preempting, and may run with fewer pods (partial
admission), is tried at smaller sizes as Kueue v0.18.1 tries them: at each size it may fit, or
fit once workloads are preempted; the largest size that does either is taken.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, replace
from functools import partial
from typing import Protocol

from ..model.clusterqueues import ClusterQueueModel
from ..model.workloads import DeviceSizes, WorkloadInfo
from ..primitives.selectors import label_selector_matches
from ..queueing.pending_queue import Candidate, PendingQueue
from ..queueing.queues import QueueManager
from ..quota.cache import QuotaCache
from ..quota.inventory_admission import InventoryGate
from ..quota.ledger import Charge, FlavorResource
from .decisions import (
    NAMESPACE_MISMATCH,
    NO_LONGER_FITS,
    REASON_PENDING,
    Admit,
    Decision,
    Pending,
    Preempt,
    WorkloadKey,
)
from .fair_preemption import fair_preemption_targets
from .flavors import FlavorFit, FlavorNoFit, assign_flavors
from .fungibility import NO_CANDIDATES, PREEMPT, RECLAIM, Outcome
from .kept_verdicts import KeptVerdicts
from .partial import can_be_partial, largest_fit
from .preemption import Needs, Target, TopologyCheck, preemption_targets, preemptor_requests
from .topology_fit import (
    admitted_pod_sets,
    place_topology,
    record_topology,
    short_of_quota,
    tas_flavors,
    topology_fits,
)

__all__ = ["CycleOwner", "Head", "QueuePass", "group_of", "may_preempt"]


class CycleOwner(Protocol):
    """What a queue's turn reads and keeps of the scheduler's cycle (the Scheduler)."""

    gate: InventoryGate | None
    sizes: DeviceSizes | None
    fair_sharing: tuple[str, ...] | None
    kept: KeptVerdicts | None
    preempting: dict[str, set[WorkloadKey]]
    holds: list[tuple[str, dict[FlavorResource, int]]]
    skips: dict[str, int]

    def forget(self, key: WorkloadKey) -> None: ...

    def report(self, out: list[Decision], pending: Pending) -> None: ...

    def settle(
        self,
        out: list[Decision],
        queue: PendingQueue,
        candidate: Candidate,
        group: Hashable,
        pending: Pending,
    ) -> None: ...


# A smaller size partial admission found: the resized workload, its verdict there, and the
# workloads to preempt when the verdict is a no-fit.
Smaller = tuple[WorkloadInfo, FlavorFit | FlavorNoFit, tuple[Target, ...]]


@dataclass(frozen=True, slots=True)
class Head:
    candidate: Candidate
    # Its flavor assignment as of `admissions` admissions into the cache; None when not evaluated.
    fit: FlavorFit | FlavorNoFit | None
    admissions: int


class QueuePass:
    """One ClusterQueue's turn in a cycle: its candidates in queue order, one step at a time."""

    def __init__(
        self,
        scheduler: CycleOwner,
        cache: QuotaCache,
        queues: QueueManager,
        model: ClusterQueueModel,
        queue: PendingQueue,
        out: list[Decision],
        claimed: set[WorkloadKey],
    ) -> None:
        self.scheduler, self.cache, self.queues = scheduler, cache, queues
        self.model, self.queue, self.out, self.claimed = model, queue, out, claimed
        # Verdicts by shape hold until usage changes (an admission here or in the cohort).
        self._verdicts: dict[bytes, FlavorNoFit] = {}
        self._verdicts_at = cache.admissions
        self.selector_ok: dict[str, bool] = {}
        # Kueue's sticky workload: a head waiting for its preemptions is looked at first (a head
        # that turns preemptor during the pass ends it, so this stays true for the pass).
        self.sticky: frozenset[Hashable] = frozenset()
        if not queue.strict_fifo:
            self.sticky = frozenset(("preempting", key) for key in scheduler.preempting.get(model.name, ()))

    @property
    def verdicts(self) -> dict[bytes, FlavorNoFit]:
        if self._verdicts_at != self.cache.admissions:
            self._verdicts.clear()
            self._verdicts_at = self.cache.admissions
        return self._verdicts

    def _namespace_ok(self, namespace: str) -> bool:
        ok = self.selector_ok.get(namespace)
        if ok is None:
            labels = self.cache.namespaces.get(namespace, {})
            ok = self.selector_ok[namespace] = label_selector_matches(self.model.namespace_selector, labels)
        return ok

    def peek(self) -> Head | None:
        """The next candidate with its flavor assignment (when its namespace may use the queue)."""
        while (candidate := self.queue.next_candidate(self.sticky)) is not None:
            info = self.queues.workloads[candidate.key]
            if not self._namespace_ok(info.namespace):
                return Head(candidate, None, self.cache.admissions)
            if candidate.group is None and self.queue.join_settled(candidate.key, group_of(info)):
                # Kueue's scheduling equivalence hashing: one of its shape and priority was just
                # found not to fit, so it waits with them, untold, until quota moves.
                continue
            fit = self.verdicts.get(info.shape) or self._assign(info)
            return Head(candidate, fit, self.cache.admissions)
        return None

    def _assign(self, info: WorkloadInfo, keep: bool = True) -> FlavorFit | FlavorNoFit:
        gate = self.scheduler.gate
        sizes = self.scheduler.sizes
        tas = tas_flavors(self.cache, self.model, info.owner)
        # Free devices and free places in topology domains are not tracked by the kept verdicts.
        kept = self.scheduler.kept if gate is None and keep and not tas.levels else None
        tree = self.cache.capacity
        if kept is not None:
            verdict = kept.get(self.model, info.shape, self.queues.epoch, sizes, tree)
            if verdict is not None:
                return verdict
        devices = gate.check(self.cache.ledger) if gate is not None else None
        oracle = _Oracle(self, info) if may_preempt(self.model) else None
        fit = assign_flavors(info, self.model, self.cache.flavors, tree, devices, sizes, tas, oracle)
        if isinstance(fit, FlavorFit) and tas.levels:
            fit = place_topology(info, fit, self.cache)
        elif isinstance(fit, FlavorNoFit) and fit.waiting_for_quota and fit.retry is not None:
            fit = short_of_quota(info, fit, self.cache)
        if kept is not None and isinstance(fit, FlavorNoFit) and not fit.depends:
            kept.put(self.model, info.shape, self.queues.epoch, sizes, tree, fit)
        return fit

    def _unheld(self, info: WorkloadInfo, held: FlavorNoFit) -> FlavorNoFit:
        """The verdict of a head that does not fit while this cycle's preempting heads hold their
        usage, told as Kueue tells it: its flavors assigned on the cycle's snapshot, before any
        hold. One that does not fit then either is told by how much; whether it may preempt is
        still judged with the holds (what its victims free must make room beside them). One that
        would fit but for a hold no longer fits (Kueue's skipped entry) and does not preempt."""
        ledger = self.cache.ledger
        for name, usage in self.scheduler.holds:
            ledger.add_usage(name, usage, -1)
        try:
            unheld = self._assign(info)
        finally:
            for name, usage in self.scheduler.holds:
                ledger.add_usage(name, usage, 1)
        if isinstance(unheld, FlavorNoFit):
            return replace(held, message=unheld.message)
        return FlavorNoFit(NO_LONGER_FITS, waiting_for_quota=False)

    def step(self, head: Head | None) -> bool:
        """Admit, park or report one candidate; False when the queue is done for this cycle."""
        if head is None:
            return False
        cache, queues, model, queue, out = self.cache, self.queues, self.model, self.queue, self.out
        scheduler = self.scheduler
        candidate = head.candidate
        key = candidate.key
        info = queues.workloads[key]
        if not self._namespace_ok(info.namespace):
            group: Hashable = ("namespace", info.namespace)
            pending = Pending(key, REASON_PENDING, NAMESPACE_MISMATCH, model.name)
            scheduler.settle(out, queue, candidate, group, pending)
            return True
        result = self.verdicts.get(info.shape)
        # It fitted when the round began, but another ClusterQueue's head went first.
        overtaken = isinstance(head.fit, FlavorFit) and head.admissions != cache.admissions
        if result is None:
            # What the peek found holds unless something was admitted since.
            fit = None if overtaken else head.fit
            if fit is None:
                fit = self._assign(info)
            if isinstance(fit, FlavorFit):
                return self._admit(key, info, fit)
            if scheduler.holds:
                fit = self._unheld(info, fit)
            result = fit
            if not fit.depends:
                self.verdicts[info.shape] = fit
        if overtaken:
            # Kueue's skipped entry: reported, and tried again on the next round as it is.
            scheduler.report(out, Pending(key, REASON_PENDING, NO_LONGER_FITS, model.name))
            return True
        pending = Pending(key, REASON_PENDING, result.message, model.name)
        group = group_of(info)
        preemptor, message = info, result.message
        targets: tuple[Target, ...] = ()
        if result.waiting_for_quota and may_preempt(model):
            targets = self._targets(info, result)
        if not targets and can_be_partial(info):
            # Kueue tries smaller sizes only when the whole one has nobody to preempt.
            smaller = largest_fit(info, self._smaller)
            if smaller is not None:
                preemptor, verdict, targets = smaller
                if isinstance(verdict, FlavorFit):
                    return self._admit(key, preemptor, verdict)
                message, result = verdict.message, verdict
        victims = {t.key for t in targets}
        if targets and not victims & self.claimed:
            self.claimed |= victims
            message = f"{message}. Pending the preemption of {len(targets)} workload(s)"
            pending = Pending(key, REASON_PENDING, message, model.name)
            group = ("preempting", key)  # parked alone: its verdict is its own
            self._preempt(key, preemptor, targets, result)
        elif targets:  # Kueue's skip: another preemptor of this cycle claimed its targets
            scheduler.skips[model.name] = scheduler.skips.get(model.name, 0) + 1
        if candidate.group is None and queue.strict_fifo:
            # Kueue requeues a StrictFIFO head at once whatever kept it out (quota in use, or a
            # request no flavor can ever hold): it stays the head and blocks the ones behind it.
            scheduler.report(out, pending)
            return False
        scheduler.settle(out, queue, candidate, group, pending)
        # Kueue's sticky workload: while a head waits for its preemptions, it stays its queue's
        # head and nothing behind it is looked at.
        return group != ("preempting", key)

    def _admit(self, key: WorkloadKey, info: WorkloadInfo, fit: FlavorFit) -> bool:
        model, queues, cache = self.model, self.queues, self.cache
        queues.remove(key)  # out of its pending queue too
        cache.admit(info, Charge(model.name, fit.usage))
        record_topology(cache, info, admitted_pod_sets(fit.pod_sets))
        queues.entry_penalty(info, model.name, fit.usage)
        self.scheduler.forget(key)
        self.out.append(Admit(key, model.name, fit.pod_sets, fit.considered, fit.charged))
        return True

    def _targets(self, info: WorkloadInfo, fit: FlavorNoFit | None = None) -> tuple[Target, ...]:
        """Whom the workload (at its sizes) would preempt to fit, in the flavors its assignment
        chose (`fit`, and its topology when only the domains stand in the way); none when nobody
        may go."""
        topology: TopologyCheck | None = None
        retry = fit.retry if fit is not None else None
        if retry is not None:
            topology = partial(topology_fits, info, retry, self.cache)
        return self.targets_for(info, _needs(fit), topology)

    def targets_for(
        self, info: WorkloadInfo, needs: Needs | None, topology: TopologyCheck | None = None
    ) -> tuple[Target, ...]:
        scheduler, model, cache, queues = self.scheduler, self.model, self.cache, self.queues
        usage = queues.afs.score if queues.afs is not None and queues.uses_afs(model.name) else None
        sizes = scheduler.sizes
        if scheduler.fair_sharing is not None:
            strategies = scheduler.fair_sharing
            found = fair_preemption_targets(info, model, cache, strategies, sizes, usage, needs, topology)
            return tuple(found)
        return tuple(preemption_targets(info, model, cache, cache.flavors, sizes, usage, needs, topology))

    def _preempt(
        self, key: WorkloadKey, info: WorkloadInfo, targets: tuple[Target, ...], fit: FlavorNoFit
    ) -> None:
        """Evict the targets for the workload (at the sizes it is preempting for)."""
        scheduler, model, cache = self.scheduler, self.model, self.cache
        fresh = tuple(t for t in targets if t.key not in cache.evicting)
        cache.evicting |= {t.key for t in targets}
        # Kueue's scheduler adds the preemptor's usage for the rest of its cycle: what the
        # evictions free is not taken by a head after it.
        needs = _needs(fit)
        held = needs[0] if needs is not None else preemptor_requests(info, model, cache, scheduler.sizes)
        cache.hold(model.name, held)
        scheduler.holds.append((model.name, held))
        scheduler.preempting.setdefault(model.name, set()).add(key)
        if fresh:
            self.out.append(Preempt(key, model.name, fresh))

    def _smaller(self, info: WorkloadInfo) -> Smaller | None:
        """Partial admission's test of one smaller size: it fits, or fits once the workloads it
        names are preempted (none kept)."""
        fit = self._assign(info, keep=False)
        if isinstance(fit, FlavorFit):
            return info, fit, ()
        if fit.waiting_for_quota and may_preempt(self.model):
            targets = self._targets(info, fit)
            if targets:
                return info, fit, targets
        return None


def group_of(info: WorkloadInfo) -> Hashable:
    """Workloads parked together: what admission looks at and the priority (preemption does)."""
    return (info.shape, info.priority)


def may_preempt(model: ClusterQueueModel) -> bool:
    return model.within_cluster_queue != "Never" or (
        model.cohort is not None and model.reclaim_within_cohort != "Never"
    )


def _needs(fit: FlavorNoFit | None) -> Needs | None:
    """What a no-fit's flavor assignment would use and what of it needs preemption."""
    if fit is None or fit.usage is None or not fit.needed:
        return None
    return dict(fit.usage), set(fit.needed)


class _Oracle:
    """Kueue's preemption oracle for one workload: per flavor-resource its flavor assigner
    tries, whether preemption finds candidates there, and whether they are all in other
    ClusterQueues of the cohort (Reclaim) or some in its own (Preempt)."""

    def __init__(self, owner: QueuePass, info: WorkloadInfo) -> None:
        self.owner, self.info = owner, info
        fair = owner.scheduler.fair_sharing is not None
        self.while_borrowing = fair and owner.model.reclaim_within_cohort != "Never"

    def possibility(self, fr: FlavorResource, amount: int) -> Outcome:
        owner = self.owner
        model, cache = owner.model, owner.cache
        targets = owner.targets_for(self.info, ({fr: amount}, {fr}))
        if not targets:
            return NO_CANDIDATES, cache.capacity.borrow_level(model, fr, amount)[0]
        ledger = cache.ledger
        released = [(t.key, ledger.release(t.key)) for t in targets]
        try:
            height = cache.capacity.borrow_level(model, fr, amount)[0]
        finally:
            for key, charge in released:
                if charge is not None:
                    ledger.reserve(key, charge)
        mine = any(t.cluster_queue == model.name for t in targets)
        return (PREEMPT if mine else RECLAIM), height
