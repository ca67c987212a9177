"""Queues' spec.stopPolicy (LocalQueue and ClusterQueue) as Kueue's workload controller applies
it to Workloads; the rules are the core's (`reconciler.core.queueing.stops`).

`Hold` admits nothing new (the core keeps the queue's Workloads waiting); `HoldAndDrain` also
evicts every admitted Workload of the queue (Evicted=True and Requeued=False, LocalQueueStopped
"The LocalQueue is stopped", or ClusterQueueStopped "The ClusterQueue is stopped"), and its job
is stopped. Once the queue runs again (stopPolicy None), a Workload so evicted is given
Requeued=True (LocalQueueRestarted or ClusterQueueRestarted) before it is queued again; until
that lands it waits, as Kueue keeps it out of the queue while Requeued is False.
"""

from __future__ import annotations

import msgspec
import structlog

from reconciler.api import Workload
from reconciler.core.queueing.stops import (
    CLUSTER_QUEUE_STOPPED,
    LOCAL_QUEUE_STOPPED,
    drain_cause,
    restart_for,
)
from reconciler.core.status import condition, set_condition
from reconciler.runtime.shared.actions import WriteDone
from reconciler.runtime.shared.context import EXPECTED_MISSES, Context
from reconciler.runtime.shared.evictions import Eviction, Evictions
from reconciler.runtime.shared.patches import holds_quota, is_true, workload_status_write
from reconciler.runtime.shared.store import Key

__all__ = ["StoppedQueues"]

log = structlog.get_logger(__name__)

_STOP_REASONS = (LOCAL_QUEUE_STOPPED, CLUSTER_QUEUE_STOPPED)


class StoppedQueues:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.evictions = Evictions(ctx)
        # Each ClusterQueue's stopPolicy as last looked at.
        self._policies: dict[str, str | None] = {}
        # Each LocalQueue's ("namespace/name") stopPolicy as last looked at.
        self._lq_policies: dict[str, str | None] = {}

    def drain(self, workload: Workload) -> None:
        """An admitted Workload whose LocalQueue or ClusterQueue is HoldAndDrain is evicted (asked
        for once)."""
        admission = workload.status.admission
        if admission is None:
            return
        meta = workload.metadata
        lq = self.ctx.store.local_queues.get((meta.namespace, workload.spec.queue_name))
        lq_policy = lq.spec.stop_policy if lq is not None else None
        cause = drain_cause(lq_policy, self._stop_policy(admission.cluster_queue))
        if cause is None:
            return  # (the policies first: they are the rarer)
        conditions = workload.status.conditions
        if not is_true(conditions, "Admitted") or is_true(conditions, "Evicted"):
            return
        if self.evictions.evict(workload, Eviction(cause.reason, cause.message)):
            where = f"{meta.namespace}/{meta.name}"
            log.info("evicting: its queue is stopped", workload=where, reason=cause.reason)

    def restarting(self, key: Key, workload: Workload) -> bool:
        """A waiting Workload evicted by a stop whose queue runs again: Requeued=True
        LocalQueueRestarted or ClusterQueueRestarted is written (once). True while that is so:
        it waits meanwhile."""
        requeued = condition(workload.status.conditions, "Requeued")
        if requeued is None or requeued.status != "False" or requeued.reason not in _STOP_REASONS:
            return False
        ctx = self.ctx
        local_queue = ctx.store.local_queues.get((key[0], workload.spec.queue_name))
        if requeued.reason == LOCAL_QUEUE_STOPPED:
            exists, policy = local_queue is not None, local_queue.spec.stop_policy if local_queue else None
        else:
            name = local_queue.spec.cluster_queue if local_queue is not None else ""
            exists, policy = name in ctx.store.cluster_queues, self._stop_policy(name)
        cause = restart_for(requeued.reason, exists, policy)
        if cause is None:
            return False  # still stopped (or gone): it waits in its queue, which admits nothing
        if not ctx.workload_writes.in_flight(key, "requeue"):
            meta = workload.metadata
            conditions = set_condition(
                workload.status.conditions,
                "Requeued",
                "True",
                cause.reason,
                cause.message,
                ctx.clock(),
                meta.generation or None,
            )
            body = {
                "status": {"conditions": msgspec.to_builtins(conditions)},
                "metadata": {"resourceVersion": meta.resource_version},
            }
            ctx.write(workload_status_write("requeue", key, msgspec.json.encode(body), self._written))
        return True

    def cluster_queue_changed(self, name: str) -> None:
        """When its stopPolicy changed (or it is new), the ClusterQueue's admitted Workloads and
        those a stop evicted are looked at again (as Kueue reconciles its Workloads then)."""
        ctx = self.ctx
        policy = self._stop_policy(name)
        if name in self._policies and self._policies[name] == policy:
            return
        self._policies[name] = policy
        for key, workload in ctx.store.workloads.items():
            admission = workload.status.admission
            if holds_quota(workload) and admission is not None and admission.cluster_queue == name:
                ctx.dirty.workload(key)
                continue
            requeued = condition(workload.status.conditions, "Requeued")
            if requeued is not None and requeued.reason == CLUSTER_QUEUE_STOPPED:
                ctx.dirty.workload(key)

    def local_queue_changed(self, namespace: str, name: str) -> None:
        """When its stopPolicy changed (or it is new or gone), the LocalQueue's Workloads that hold
        quota or that a stop evicted are looked at again (Kueue reconciles its Workloads then)."""
        ctx = self.ctx
        lq = ctx.store.local_queues.get((namespace, name))
        policy = lq.spec.stop_policy if lq is not None else None
        remembered = f"{namespace}/{name}"
        if remembered in self._lq_policies and self._lq_policies[remembered] == policy:
            return
        self._lq_policies[remembered] = policy
        for key, workload in ctx.store.workloads.items():
            if key[0] != namespace or workload.spec.queue_name != name:
                continue
            requeued = condition(workload.status.conditions, "Requeued")
            if holds_quota(workload) or (requeued is not None and requeued.reason == LOCAL_QUEUE_STOPPED):
                ctx.dirty.workload(key)

    def _stop_policy(self, cluster_queue: str) -> str | None:
        cq = self.ctx.store.cluster_queues.get(cluster_queue)
        return cq.spec.stop_policy if cq is not None else None

    def _written(self, done: WriteDone) -> None:
        if done.ok and done.body is not None:
            self.ctx.apply_workload_write(done.key, done.body)
            self.ctx.dirty.workload(done.key, own_write=True)
        else:
            self.ctx.write_failed(done, expected=EXPECTED_MISSES)
