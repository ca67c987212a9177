"""Preemption: the scheduler named admitted workloads to evict so that a pending one fits; evict
them with Kueue's reasons, conditions and Events. The preemptor stays pending meanwhile and is
admitted once the quota they held has come back.
"""

from __future__ import annotations

from reconciler.core.scheduling.preemption import Target, victim_message
from reconciler.core.scheduling.scheduler import Preempt
from reconciler.core.status import PREEMPTED
from reconciler.runtime.shared.context import Context
from reconciler.runtime.shared.evictions import Eviction, Evictions
from reconciler.runtime.shared.store import Key

__all__ = ["Preemption"]


class Preemption:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.evictions = Evictions(ctx)
        # Victims whose admission was still being written when a preemptor named them: evicted
        # once it lands, on the status it lands with (by then their store version is the
        # admitted one), or dropped if it fails (its rollback gives the quota back).
        self._after_admission: dict[Key, list[tuple[Preempt, Target]]] = {}

    def preempt(self, decision: Preempt) -> None:
        ctx = self.ctx
        for target in decision.targets:
            if ctx.workload_writes.in_flight(target.key, "admit"):
                self._after_admission.setdefault(target.key, []).append((decision, target))
            else:
                self._evict(decision, target)

    def admission_settled(self, key: Key, admitted: bool) -> None:
        """The admission write of `key` landed (`admitted`) or failed."""
        for decision, target in self._after_admission.pop(key, ()):
            if admitted:
                self._evict(decision, target)

    def _evict(self, decision: Preempt, target: Target) -> None:
        ctx = self.ctx
        preemptor = ctx.store.workloads.get(decision.key)
        victim = ctx.store.workloads.get(target.key)
        if preemptor is None or victim is None:
            ctx.engine.eviction_failed(target.key)
            return
        message = victim_message(ctx.engine.cache, preemptor, decision.cluster_queue, target)
        eviction = Eviction(
            PREEMPTED,
            message,
            preempted_reason=target.reason,
            on_failed=ctx.engine.eviction_failed,
        )
        if not self.evictions.evict(victim, eviction):
            return
        ctx.metrics.workload_preempted(decision.cluster_queue, target.reason)
        ours, theirs = preemptor.spec.priority or 0, victim.spec.priority or 0
        # Kueue v0.18's wording; no priority boost here, so effective = base
        priorities = (
            f"; preemptor effective priority: {ours} (base: {ours}, boost: 0)"
            f"; preemptee effective priority: {theirs} (base: {theirs}, boost: 0)"
        )
        ctx.events.emit(victim, "Normal", PREEMPTED, message + priorities)
        ctx.events.emit(
            preemptor,
            "Normal",
            "PreemptedWorkload",
            f"Preempted workload {target.key[0]}/{target.key[1]} (UID: {victim.metadata.uid}) "
            f"in ClusterQueue {target.cluster_queue}{priorities}",
        )
