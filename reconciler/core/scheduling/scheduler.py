"""Who goes next: one scheduling cycle over the ClusterQueues whose queues changed.

`Scheduler.cycle` walks each changed ClusterQueue's pending queue in order, assigns flavors against
the cache's free quota, and returns decisions: admit a workload with its flavors (its quota is
reserved in the cache at once, and it leaves the queue manager), or leave it pending with Kueue's
reason and message. A pending verdict is reported only when it changed.

ClusterQueues of one cohort tree compete for the same quota, so they take
turns as in Kueue's cycle: each offers its head, and the heads that fit
without borrowing go first, then higher priority, then the older queue-order
timestamp. With fair sharing on (Kueue's `fairSharing`), the heads of a cohort tree go in the
order of Kueue's tournament instead (fair_sharing), and preemption follows the fair-sharing
strategies (fair_preemption).

Quota released in a cohort wakes every parked head of its tree, as in Kueue; a woken head whose
no-fit verdict read nothing that moved keeps it without a new flavor assignment (see
`kept_verdicts`), so the decisions are the same and a release costs only the heads it could let in.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field, replace

from ..model.clusterqueues import ClusterQueueModel, active_condition
from ..model.workloads import DeviceSizes, WorkloadInfo
from ..primitives.selectors import label_selector_matches
from ..queueing.pending_queue import Candidate, PendingQueue
from ..queueing.queues import QueueManager
from ..quota.cache import QuotaCache
from ..quota.inventory_admission import InventoryGate
from ..quota.ledger import Charge, FlavorResource
from .fair_preemption import fair_preemption_targets
from .fair_sharing import Contender, tournament_winner
from .flavors import FlavorFit, FlavorNoFit, PodSetFlavors, assign_flavors
from .kept_verdicts import KeptVerdicts
from .partial import can_be_partial, largest_fit, resized
from .preemption import Target, preemption_targets, preemptor_requests
from .topology_fit import admitted_pod_sets, place_topology, record_topology, tas_flavors

__all__ = ["REASON_INADMISSIBLE", "REASON_PENDING", "Admit", "Decision", "Pending", "Preempt", "Scheduler"]

WorkloadKey = tuple[str, str]

# Kueue's reasons with its granular-reasons feature off, as users of the walkthrough see them:
# quota waits are "Pending", configuration problems "Inadmissible".
REASON_PENDING = "Pending"
REASON_INADMISSIBLE = "Inadmissible"
NAMESPACE_MISMATCH = "Workload namespace doesn't match ClusterQueue selector"
NO_LONGER_FITS = "Workload no longer fits after processing another workload"


@dataclass(frozen=True, slots=True)
class Admit:
    key: WorkloadKey
    cluster_queue: str
    pod_sets: list[PodSetFlavors]
    # Kueue's "Flavors considered" for the QuotaReserved Event ("" when nothing to say).
    considered: str = ""
    # What the charges the flavors decided came to (allocationMode All, device capacities).
    charged: tuple[str, ...] = ()


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
    # The last pending verdict reported per workload.
    _last: dict[WorkloadKey, tuple[str, str]] = field(default_factory=dict)
    # deviceInventory.mode Enforce: what fits quota must fit the free devices too.
    gate: InventoryGate | None = None
    # The device inventory (Report or Enforce): sizes allocationMode All and device capacities.
    sizes: DeviceSizes | None = None

    # Cohort fair sharing: its preemption strategies in order; None when it is off.
    fair_sharing: tuple[str, ...] | None = None

    # Quota no-fit verdicts kept across cycles by (ClusterQueue, shape), with what they read.
    # None: every woken head is evaluated afresh (the reference the kept verdicts are tested against).
    kept: KeptVerdicts | None = field(default_factory=KeptVerdicts)
    # Heads waiting for their preemptions, by ClusterQueue: looked at again in every cycle of
    # their queue (as Kueue requeues them), so their hold keeps what they wait for.
    _preempting: dict[str, set[WorkloadKey]] = field(default_factory=dict)
    # What the preempting heads of the current cycle hold (given back when the cycle ends).
    _holds: list[tuple[str, dict[FlavorResource, int]]] = field(default_factory=list)
    skips: dict[str, int] = field(default_factory=dict)  # preempting heads skipped, by ClusterQueue

    def forget(self, key: WorkloadKey) -> None:
        """The workload changed or left: its next verdict is reported whatever it is."""
        self._last.pop(key, None)

    def cycle(self, cache: QuotaCache, queues: QueueManager) -> list[Decision]:
        """Admit what fits, in queue order; report what cannot be admitted and why."""
        try:
            return self._cycle(cache, queues)
        finally:
            # A preempting head's usage is kept from the heads after it, in this cycle only.
            for name, usage in self._holds:
                cache.hold(name, usage, -1)
            self._holds.clear()

    def _wake_preempting(self, name: str, queue: PendingQueue) -> None:
        keys = self._preempting.get(name)
        if keys:
            keys -= {key for key in keys if not queue.unsettle(("preempting", key))}

    def _cycle(self, cache: QuotaCache, queues: QueueManager) -> list[Decision]:
        decisions: list[Decision] = []
        for key, message in queues.take_unreported():
            self._report(decisions, Pending(key, REASON_INADMISSIBLE, message))
        # Workloads some preemptor in this cycle already counts on evicting.
        claimed: set[WorkloadKey] = set()
        # ClusterQueues sharing a cohort tree take turns (see _schedule_cohort).
        by_root: dict[str | None, list[_QueuePass]] = {}
        names = list(queues.take_dirty())
        # Kueue pops a preempting head in every cycle: it holds what its victims free against the
        # heads of its whole cohort, not only in cycles with news for its own queue.
        names += [name for name, keys in self._preempting.items() if keys and name not in names]
        for name in names:
            queue = queues.queues.get(name)
            model = cache.cluster_queues.get(name)
            if queue is None or model is None:
                continue
            if cache.cluster_queue_active(name)[0] != "True":
                # Nothing in this queue can be admitted until the ClusterQueue is fixed. Under a
                # cohort cycle alone Kueue's scheduler leaves it out with reason Pending (its
                # ClusterQueue stays Active there); here the message also names the cycle.
                message = f"ClusterQueue {model.name} is inactive"
                reason = REASON_INADMISSIBLE
                cycle = cache.cycle_problem(name)
                if cycle and active_condition(model, cache.flavors)[0] == "True":
                    message, reason = f"{message}: {cycle}", REASON_PENDING
                for key in queue.ordered_keys():
                    self._report(decisions, Pending(key, reason, message, model.name))
                continue
            self._wake_preempting(name, queue)
            one = _QueuePass(self, cache, queues, model, queue, decisions, claimed)
            root = cache.capacity.root(name) if model.cohort is not None else None
            if root is None:
                while one.step(one.peek()):
                    pass
            else:
                by_root.setdefault(root, []).append(one)
        for root, passes in by_root.items():
            if self.fair_sharing is None or root is None:
                self._schedule_cohort(passes)
            else:
                self._schedule_fair(root, passes)
        return decisions

    def _schedule_fair(self, root: str, passes: list[_QueuePass]) -> None:
        """Fair sharing's cycle over a cohort tree: in each round every ClusterQueue offers its
        head, and the heads go one by one in the order of Kueue's tournament, played again after
        each (see fair_sharing)."""
        live = list(passes)
        while live:
            heads: dict[str, tuple[_QueuePass, _Head]] = {}
            for one in live:
                head = one.peek()
                if head is not None:
                    heads[one.model.name] = (one, head)
            live = []
            # What each head would add is fixed for the round (Kueue assigns flavors once a cycle).
            contenders = {name: self._contender(one, head) for name, (one, head) in heads.items()}
            while heads:
                if len(heads) == 1 or not any(c.contends for c in contenders.values()):
                    # Heads that neither fit nor preempt change nothing: their order is moot.
                    name = next(iter(heads))
                else:
                    winner = tournament_winner(passes[0].cache.capacity, root, contenders)
                    name = next(iter(heads)) if winner is None else winner.cluster_queue
                one, head = heads.pop(name)
                del contenders[name]
                if one.step(head):
                    live.append(one)

    def _contender(self, one: _QueuePass, head: _Head) -> Contender:
        """The head as the tournament sees it: what its flavors would add (for one that waits for
        quota its queue may preempt for, what it would use once preemption made room; Kueue's
        no-fit assignments add nothing)."""
        info = one.queues.workloads[head.candidate.key]
        contends = True
        if isinstance(head.fit, FlavorFit):
            usage = head.fit.usage
        elif head.fit is not None and head.fit.waiting_for_quota and _may_preempt(one.model):
            usage = preemptor_requests(info, one.model, one.cache, self.sizes)
        else:
            usage, contends = {}, False
        return Contender(one.model.name, usage, info.priority, info.created, contends=contends)

    def _schedule_cohort(self, passes: list[_QueuePass]) -> None:
        """Kueue's cycle over a cohort: each ClusterQueue offers its head; heads that fit without
        borrowing go first, then higher priority, then the older queue-order timestamp. Rounds
        repeat until every queue is done."""
        live = list(passes)
        while live:
            heads: list[tuple[tuple[int, int, str, str], _QueuePass, _Head]] = []
            for one in live:
                head = one.peek()
                if head is None:
                    continue
                info = one.queues.workloads[head.candidate.key]
                level = head.fit.borrow_level if isinstance(head.fit, FlavorFit) else 0
                heads.append(((level, -info.priority, info.created, one.model.name), one, head))
            heads.sort(key=lambda h: h[0])
            live = [one for _, one, head in heads if one.step(head)]

    def _report(self, out: list[Decision], pending: Pending) -> None:
        """Emit a pending verdict only when it differs from the last one for that workload."""
        verdict = (pending.reason, pending.message)
        if self._last.get(pending.key) != verdict:
            self._last[pending.key] = verdict
            out.append(pending)

    def _settle(
        self,
        out: list[Decision],
        queue: PendingQueue,
        candidate: Candidate,
        group: Hashable,
        pending: Pending,
    ) -> None:
        """Park a workload that does not fit and tell it why. Only the workload looked at is told:
        the rest of its group waits untold, as Kueue's scheduling equivalence hashing moves the
        equivalent workloads aside without a verdict of their own."""
        if candidate.group is not None and candidate.group != group:
            # It leaves its group (e.g. to wait for its own preemptions): its verdict is its own,
            # and the group's next member is looked at in its own right.
            candidate = replace(candidate, group=None)
        self._report(out, pending)
        if candidate.group is None:
            queue.park(candidate.key, group)
        queue.settle(candidate.group if candidate.group is not None else group)


@dataclass(frozen=True, slots=True)
class _Head:
    candidate: Candidate
    # Its flavor assignment as of `admissions` admissions into the cache; None when not evaluated.
    fit: FlavorFit | FlavorNoFit | None
    admissions: int


class _QueuePass:
    """One ClusterQueue's turn in a cycle: its candidates in queue order, one step at a time."""

    def __init__(
        self,
        scheduler: Scheduler,
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
            self.sticky = frozenset(("preempting", key) for key in scheduler._preempting.get(model.name, ()))

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

    def peek(self) -> _Head | None:
        """The next candidate with its flavor assignment (when its namespace may use the queue)."""
        while (candidate := self.queue.next_candidate(self.sticky)) is not None:
            info = self.queues.workloads[candidate.key]
            if not self._namespace_ok(info.namespace):
                return _Head(candidate, None, self.cache.admissions)
            if candidate.group is None and self.queue.join_settled(candidate.key, _group_of(info)):
                # Kueue's scheduling equivalence hashing: one of its shape and priority was just
                # found not to fit, so it waits with them, untold, until quota moves.
                continue
            fit = self.verdicts.get(info.shape) or self._assign(info)
            return _Head(candidate, fit, self.cache.admissions)
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
        fit = assign_flavors(info, self.model, self.cache.flavors, tree, devices, sizes, tas)
        if isinstance(fit, FlavorFit) and tas.levels:
            fit = place_topology(info, fit, self.cache)
        if kept is not None and isinstance(fit, FlavorNoFit):
            kept.put(self.model, info.shape, self.queues.epoch, sizes, tree, fit)
        return fit

    def _unheld(self, info: WorkloadInfo, held: FlavorNoFit) -> FlavorNoFit:
        """The verdict of a head that does not fit while this cycle's preempting heads hold their
        usage, told as Kueue tells it: its flavors assigned on the cycle's snapshot, before any
        hold. One that does not fit then either is told by how much; whether it may preempt is
        still judged with the holds (what its victims free must make room beside them). One that
        would fit but for a hold no longer fits (Kueue's skipped entry) and does not preempt."""
        ledger = self.cache.ledger
        for name, usage in self.scheduler._holds:
            ledger.add_usage(name, usage, -1)
        try:
            unheld = self._assign(info)
        finally:
            for name, usage in self.scheduler._holds:
                ledger.add_usage(name, usage, 1)
        if isinstance(unheld, FlavorNoFit):
            return FlavorNoFit(unheld.message, held.waiting_for_quota)
        return FlavorNoFit(NO_LONGER_FITS, waiting_for_quota=False)

    def step(self, head: _Head | None) -> bool:
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
            scheduler._settle(out, queue, candidate, group, pending)
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
            if scheduler._holds:
                fit = self._unheld(info, fit)
            result = self.verdicts[info.shape] = fit
        if overtaken:
            # Kueue's skipped entry: reported, and tried again on the next round as it is.
            scheduler._report(out, Pending(key, REASON_PENDING, NO_LONGER_FITS, model.name))
            return True
        pending = Pending(key, REASON_PENDING, result.message, model.name)
        group = _group_of(info)
        if result.waiting_for_quota and _may_preempt(model):
            usage = queues.afs.score if queues.afs is not None and queues.uses_afs(model.name) else None
            if scheduler.fair_sharing is not None:
                strategies = scheduler.fair_sharing
                targets = fair_preemption_targets(info, model, cache, strategies, scheduler.sizes, usage)
            else:
                targets = preemption_targets(info, model, cache, cache.flavors, scheduler.sizes, usage)
            victims = {t.key for t in targets}
            if targets and not victims & self.claimed:
                self.claimed |= victims
                message = f"{result.message}. Pending the preemption of {len(targets)} workload(s)"
                pending = Pending(key, REASON_PENDING, message, model.name)
                group = ("preempting", key)  # parked alone: its verdict is its own
                fresh = tuple(t for t in targets if t.key not in cache.evicting)
                cache.evicting |= victims
                # Kueue's scheduler adds the preemptor's usage for the rest of its cycle: what
                # the evictions free is not taken by a head after it.
                held = preemptor_requests(info, model, cache, scheduler.sizes)
                cache.hold(model.name, held)
                scheduler._holds.append((model.name, held))
                scheduler._preempting.setdefault(model.name, set()).add(key)
                if fresh:
                    out.append(Preempt(key, model.name, fresh))
            elif targets:  # Kueue's skip: another preemptor of this cycle claimed its targets
                scheduler.skips[model.name] = scheduler.skips.get(model.name, 0) + 1
        if group != ("preempting", key) and can_be_partial(info):
            smaller = largest_fit(info, self._fit_only)
            if smaller is not None:
                return self._admit(key, resized(info, [ps.count for ps in smaller.pod_sets]), smaller)
        if candidate.group is None and queue.strict_fifo:
            # Kueue requeues a StrictFIFO head at once whatever kept it out (quota in use, or a
            # request no flavor can ever hold): it stays the head and blocks the ones behind it.
            scheduler._report(out, pending)
            return False
        scheduler._settle(out, queue, candidate, group, pending)
        # Kueue's sticky workload: while a head waits for its preemptions, it stays its queue's
        # head and nothing behind it is looked at.
        return group != ("preempting", key)

    def _admit(self, key: WorkloadKey, info: WorkloadInfo, fit: FlavorFit) -> bool:
        model, queues, cache = self.model, self.queues, self.cache
        queues.remove(key)  # out of its pending queue too
        cache.admit(info, Charge(model.name, fit.usage))
        record_topology(cache, info, admitted_pod_sets(fit.pod_sets))
        queues.entry_penalty(info, model.name, fit.usage)
        self.scheduler._last.pop(key, None)
        self.out.append(Admit(key, model.name, fit.pod_sets, fit.considered, fit.charged))
        return True

    def _fit_only(self, info: WorkloadInfo) -> FlavorFit | None:
        """Partial admission's test of smaller sizes: fits without preempting (none kept)."""
        fit = self._assign(info, keep=False)
        return fit if isinstance(fit, FlavorFit) else None


def _group_of(info: WorkloadInfo) -> Hashable:
    """Workloads parked together: what admission looks at and the priority (preemption does)."""
    return (info.shape, info.priority)


def _may_preempt(model: ClusterQueueModel) -> bool:
    return model.within_cluster_queue != "Never" or (
        model.cohort is not None and model.reclaim_within_cohort != "Never"
    )
