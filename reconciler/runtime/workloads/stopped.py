"""A ClusterQueue's spec.stopPolicy as Kueue's workload controller applies it to Workloads.

`Hold` is the ClusterQueue's Active=False (the core admits nothing there); `HoldAndDrain` also
evicts every admitted Workload of it (Evicted=True ClusterQueueStopped, "The ClusterQueue is
stopped"; Requeued=False with the same reason), and its Job is stopped. Once the ClusterQueue
runs again (stopPolicy None), a Workload so evicted is given Requeued=True ClusterQueueRestarted
before it is queued again; until that lands it waits, as Kueue keeps it out of the queue while
Requeued is False.
"""

from __future__ import annotations

import msgspec
import structlog

from reconciler.api import Workload
from reconciler.core.status import condition, set_condition
from reconciler.runtime.shared.actions import WriteDone
from reconciler.runtime.shared.context import EXPECTED_MISSES, Context
from reconciler.runtime.shared.evictions import Eviction, Evictions
from reconciler.runtime.shared.patches import holds_quota, is_true, workload_status_write
from reconciler.runtime.shared.store import Key

__all__ = ["CLUSTER_QUEUE_STOPPED", "RESTARTED", "RESTARTED_MESSAGE", "STOPPED_MESSAGE", "StoppedQueues"]

log = structlog.get_logger(__name__)

CLUSTER_QUEUE_STOPPED = "ClusterQueueStopped"
STOPPED_MESSAGE = "The ClusterQueue is stopped"
RESTARTED = "ClusterQueueRestarted"
RESTARTED_MESSAGE = "The ClusterQueue was restarted after being stopped"
HOLD_AND_DRAIN = "HoldAndDrain"


class StoppedQueues:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.evictions = Evictions(ctx)
        # Each ClusterQueue's stopPolicy as last looked at.
        self._policies: dict[str, str | None] = {}

    def drain(self, workload: Workload) -> None:
        """An admitted Workload whose ClusterQueue is HoldAndDrain is evicted (asked for once)."""
        admission = workload.status.admission
        if admission is None or self._stop_policy(admission.cluster_queue) != HOLD_AND_DRAIN:
            return  # (the policy first: it is the rarer)
        conditions = workload.status.conditions
        if not is_true(conditions, "Admitted") or is_true(conditions, "Evicted"):
            return
        if self.evictions.evict(workload, Eviction(CLUSTER_QUEUE_STOPPED, STOPPED_MESSAGE)):
            meta = workload.metadata
            log.info("evicting: its ClusterQueue is stopped", workload=f"{meta.namespace}/{meta.name}")

    def restarting(self, key: Key, workload: Workload) -> bool:
        """A waiting Workload evicted by the stop whose ClusterQueue runs again: Requeued=True
        ClusterQueueRestarted is written (once). True while that is so: it waits meanwhile."""
        requeued = condition(workload.status.conditions, "Requeued")
        if requeued is None or requeued.status != "False" or requeued.reason != CLUSTER_QUEUE_STOPPED:
            return False
        ctx = self.ctx
        local_queue = ctx.store.local_queues.get((key[0], workload.spec.queue_name))
        name = local_queue.spec.cluster_queue if local_queue is not None else ""
        if name not in ctx.store.cluster_queues or self._stop_policy(name) not in (None, "None"):
            return False  # still stopped (or gone): it waits in its queue, which admits nothing
        if not ctx.workload_writes.in_flight(key, "requeue"):
            meta = workload.metadata
            conditions = set_condition(
                workload.status.conditions,
                "Requeued",
                "True",
                RESTARTED,
                RESTARTED_MESSAGE,
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

    def _stop_policy(self, cluster_queue: str) -> str | None:
        cq = self.ctx.store.cluster_queues.get(cluster_queue)
        return cq.spec.stop_policy if cq is not None else None

    def _written(self, done: WriteDone) -> None:
        if done.ok and done.body is not None:
            self.ctx.apply_workload_write(done.key, done.body)
            self.ctx.dirty.workload(done.key, own_write=True)
        else:
            self.ctx.write_failed(done, expected=EXPECTED_MISSES)
