"""The wait estimates of a ClusterQueue's pending workloads, from what the leader holds in memory.

The inputs of ``core.scheduling.wait_estimate`` gathered with no API read: the ClusterQueue's
quota model, its admitted workloads' charges (the ledger) with their admission times and maximum
execution times (the latest Workload objects), the observed run times of its finished Workloads
still in the store (Admitted to Finished), and its pending workloads in queue order. Read on the
event loop (never while the reconciler mutates state), for the visibility API and for a scrape.
"""

from __future__ import annotations

from collections import defaultdict

from reconciler.core.model.workloads import WorkloadInfo
from reconciler.core.primitives.podrequests import Amounts
from reconciler.core.queueing.queues import pending_in_order
from reconciler.core.scheduling.max_execution import execution_deadline
from reconciler.core.scheduling.wait_estimate import (
    Estimate,
    Running,
    Waiting,
    admitted_since,
    estimate_starts,
    expected_end,
    finished_run_seconds,
    median_run_seconds,
)
from reconciler.runtime.shared.context import Context

__all__ = ["Estimator"]

Key = tuple[str, str]


def _requests(info: WorkloadInfo) -> Amounts:
    total: Amounts = {}
    for pod_set in info.pod_sets:
        for resource, amount in pod_set.total().items():
            total[resource] = total.get(resource, 0) + amount
    return total


class Estimator:
    """One pass over the stored Workloads (run times per ClusterQueue) at ``ctx.wall()``, then the
    estimates of any ClusterQueue."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.now = ctx.wall()
        observed: dict[str, list[float]] = defaultdict(list)
        for workload in ctx.store.workloads.values():
            admission = workload.status.admission
            seconds = None if admission is None else finished_run_seconds(workload.status.conditions)
            if admission is not None and seconds is not None:
                observed[admission.cluster_queue].append(seconds)
        self.medians = {name: median_run_seconds(times) for name, times in observed.items()}
        self.samples = {name: len(times) for name, times in observed.items()}

    def _max_exec(self, key: Key) -> int | None:
        workload = self.ctx.store.workloads.get(key)
        return None if workload is None else workload.spec.maximum_execution_time_seconds

    def _running(self, cluster_queue: str, median: float | None) -> list[Running]:
        ctx, running = self.ctx, []
        ledger = ctx.engine.cache.ledger
        for key in ledger.holders(cluster_queue):
            charge = ledger.charge_of(key)
            if charge is None:
                continue
            workload = ctx.store.workloads.get(key)
            since = deadline = None
            if workload is not None:
                conditions = workload.status.conditions
                since = admitted_since(conditions)
                accumulated = workload.status.accumulated_past_execution_time_seconds
                deadline = execution_deadline(
                    workload.spec.maximum_execution_time_seconds, accumulated, conditions
                )
            running.append(Running(charge.usage, expected_end(since, deadline, median, self.now)))
        return running

    def estimates(self, cluster_queue: str) -> dict[Key, Estimate]:
        """Each pending workload's estimate (by namespace and name); empty for an unknown queue."""
        model = self.ctx.engine.cache.cluster_queues.get(cluster_queue)
        infos = pending_in_order(self.ctx.engine.queues, cluster_queue)
        if model is None or not infos:
            return {}
        median = self.medians.get(cluster_queue)
        waiting = []
        for info in infos:
            maximum = self._max_exec(info.key)
            waiting.append(Waiting(_requests(info), float(maximum) if maximum is not None else median))
        found = estimate_starts(
            model.groups,
            self._running(cluster_queue, median),
            waiting,
            self.now,
            strict_fifo=model.strategy == "StrictFIFO",
        )
        return {info.key: estimate for info, estimate in zip(infos, found, strict=True)}
