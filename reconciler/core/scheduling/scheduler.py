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

from ..model.clusterqueues import active_condition
from ..model.workloads import DeviceSizes
from ..queueing.pending_queue import Candidate, PendingQueue
from ..queueing.queues import QueueManager
from ..quota.cache import QuotaCache
from ..quota.inventory_admission import InventoryGate
from ..quota.ledger import FlavorResource
from .decisions import (
    NAMESPACE_MISMATCH,
    NO_LONGER_FITS,
    REASON_INADMISSIBLE,
    REASON_PENDING,
    Admit,
    Decision,
    Pending,
    Preempt,
    WorkloadKey,
)
from .fair_sharing import Contender, tournament_winner
from .flavors import FlavorFit
from .kept_verdicts import KeptVerdicts
from .preemption import preemptor_requests
from .queue_pass import Head, QueuePass, may_preempt

__all__ = [
    "NAMESPACE_MISMATCH",
    "NO_LONGER_FITS",
    "REASON_INADMISSIBLE",
    "REASON_PENDING",
    "Admit",
    "Decision",
    "Pending",
    "Preempt",
    "Scheduler",
]


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
    preempting: dict[str, set[WorkloadKey]] = field(default_factory=dict)
    # What the preempting heads of the current cycle hold (given back when the cycle ends).
    holds: list[tuple[str, dict[FlavorResource, int]]] = field(default_factory=list)
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
            for name, usage in self.holds:
                cache.hold(name, usage, -1)
            self.holds.clear()

    def _wake_preempting(self, name: str, queue: PendingQueue) -> None:
        keys = self.preempting.get(name)
        if keys:
            keys -= {key for key in keys if not queue.unsettle(("preempting", key))}

    def _cycle(self, cache: QuotaCache, queues: QueueManager) -> list[Decision]:
        decisions: list[Decision] = []
        for key, message in queues.take_unreported():
            self.report(decisions, Pending(key, REASON_INADMISSIBLE, message))
        # Workloads some preemptor in this cycle already counts on evicting.
        claimed: set[WorkloadKey] = set()
        # ClusterQueues sharing a cohort tree take turns (see _schedule_cohort).
        by_root: dict[str | None, list[QueuePass]] = {}
        names = list(queues.take_dirty())
        # Kueue pops a preempting head in every cycle: it holds what its victims free against the
        # heads of its whole cohort, not only in cycles with news for its own queue.
        names += [name for name, keys in self.preempting.items() if keys and name not in names]
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
                    self.report(decisions, Pending(key, reason, message, model.name))
                continue
            self._wake_preempting(name, queue)
            one = QueuePass(self, cache, queues, model, queue, decisions, claimed)
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

    def _schedule_fair(self, root: str, passes: list[QueuePass]) -> None:
        """Fair sharing's cycle over a cohort tree: in each round every ClusterQueue offers its
        head, and the heads go one by one in the order of Kueue's tournament, played again after
        each (see fair_sharing)."""
        live = list(passes)
        while live:
            heads: dict[str, tuple[QueuePass, Head]] = {}
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

    def _contender(self, one: QueuePass, head: Head) -> Contender:
        """The head as the tournament sees it: what its flavors would add (for one that waits for
        quota its queue may preempt for, what it would use once preemption made room; Kueue's
        no-fit assignments add nothing)."""
        info = one.queues.workloads[head.candidate.key]
        contends = True
        if isinstance(head.fit, FlavorFit):
            usage = head.fit.usage
        elif head.fit is not None and head.fit.waiting_for_quota and may_preempt(one.model):
            usage = preemptor_requests(info, one.model, one.cache, self.sizes)
        else:
            usage, contends = {}, False
        return Contender(one.model.name, usage, info.priority, info.created, contends=contends)

    def _schedule_cohort(self, passes: list[QueuePass]) -> None:
        """Kueue's cycle over a cohort: each ClusterQueue offers its head; heads that fit without
        borrowing go first, then higher priority, then the older queue-order timestamp. Rounds
        repeat until every queue is done."""
        live = list(passes)
        while live:
            heads: list[tuple[tuple[int, int, str, str], QueuePass, Head]] = []
            for one in live:
                head = one.peek()
                if head is None:
                    continue
                info = one.queues.workloads[head.candidate.key]
                level = head.fit.borrow_level if isinstance(head.fit, FlavorFit) else 0
                heads.append(((level, -info.priority, info.created, one.model.name), one, head))
            heads.sort(key=lambda h: h[0])
            live = [one for _, one, head in heads if one.step(head)]

    def report(self, out: list[Decision], pending: Pending) -> None:
        """Emit a pending verdict only when it differs from the last one for that workload."""
        verdict = (pending.reason, pending.message)
        if self._last.get(pending.key) != verdict:
            self._last[pending.key] = verdict
            out.append(pending)

    def settle(
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
        self.report(out, pending)
        if candidate.group is None:
            queue.park(candidate.key, group)
        queue.settle(candidate.group if candidate.group is not None else group)
