"""What a metrics scrape reads: the reconciler's in-memory state, summarised per queue.

Called on the event loop at scrape time (never concurrently with the
reconciler, which does not await while it mutates state), so the numbers are
one consistent instant. Quantities are given in their base unit: cpu in cores
(the ledger counts millicores), memory in bytes, GPUs as a count.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any, Literal

from reconciler.core.model.workloads import WorkloadInfo
from reconciler.core.primitives.quantity import CPU
from reconciler.core.status import condition
from reconciler.integrations.prebuilt import multikueue_origin
from reconciler.kube import Informer
from reconciler.observability.metrics import (
    ClusterQueueSample,
    CohortSample,
    DeviceClassSample,
    LocalQueueSample,
    StateSnapshot,
    WatchSample,
)
from reconciler.runtime.loop.estimates import Estimator
from reconciler.runtime.loop.reconciler import Reconciler
from reconciler.runtime.loop.snapshot_tree import cohort_tree_samples, pending_requests, tree_place

__all__ = ["state_snapshot", "watch_samples"]

_OBJECT_EVENTS = ("ADDED", "MODIFIED", "DELETED")


def base_units(resource: str, amount: int) -> float:
    """A ledger amount in the resource's base unit (the ledger keeps cpu in millicores)."""
    return amount / 1000 if resource == CPU else float(amount)


def _finished_by_cluster_queue(reconciler: Reconciler) -> Counter[str]:
    counts: Counter[str] = Counter()
    local_queues = reconciler.core.queues.local_queues
    for workload in reconciler.workloads.values():
        finished = condition(workload.status.conditions, "Finished")
        if finished is None or finished.status != "True":
            continue
        admission = workload.status.admission
        if admission is not None:
            counts[admission.cluster_queue] += 1
        else:
            cq = local_queues.get((workload.metadata.namespace, workload.spec.queue_name))
            if cq is not None:
                counts[cq] += 1
    return counts


def _waits(estimator: Estimator, name: str) -> tuple[dict[str, float], int]:
    """The estimated waits of the queue's head and of its latest estimated start, and how many
    pending workloads have no estimate."""
    estimates = list(estimator.estimates(name).values())
    starts = [e.start for e in estimates if e.start is not None]
    waits: dict[str, float] = {}
    if estimates and estimates[0].start is not None:
        waits["head"] = max(0.0, estimates[0].start - estimator.now)
    if starts:
        waits["last_estimated"] = max(0.0, max(starts) - estimator.now)
    return waits, len(estimates) - len(starts)


def _cluster_queue(
    reconciler: Reconciler, name: str, finished: int, pending: dict[str, float], estimator: Estimator
) -> ClusterQueueSample:
    core = reconciler.core
    cq = reconciler.cluster_queues.get(name)
    status: Literal["pending", "active", "terminating"]
    if cq is not None and cq.metadata.deletion_timestamp:
        status = "terminating"
    elif core.cache.cluster_queue_active(name)[0] == "True":
        status = "active"
    else:
        status = "pending"
    nominal: dict[tuple[str, str], float] = {}
    borrowing: dict[tuple[str, str], float] = {}
    lending: dict[tuple[str, str], float] = {}
    model = core.cache.cluster_queues.get(name)
    if model is not None:
        for group in model.groups:
            for quota in group.flavors:
                for resource in group.covered:
                    fr = (quota.name, resource)
                    nominal[fr] = base_units(resource, quota.nominal.get(resource, 0))
                    for limits, into in ((quota.borrowing_limit, borrowing), (quota.lending_limit, lending)):
                        limit = limits.get(resource)
                        into[fr] = math.inf if limit is None else base_units(resource, limit)
    used = {fr: 0.0 for fr in nominal}
    for (flavor, resource), amount in core.ledger.usage(name).items():
        used[(flavor, resource)] = base_units(resource, amount)
    active, inadmissible = core.queues.pending_counts(name)
    holders = core.ledger.holder_count(name)
    parent, root = tree_place(core, name)
    waits, unestimated = _waits(estimator, name)
    return ClusterQueueSample(
        name=name,
        status=status,
        pending_active=active,
        pending_inadmissible=inadmissible,
        reserving=holders,
        admitted=holders,
        finished=finished,
        nominal=nominal,
        reserved=used,  # no admission checks: a reservation is an admission
        used=used,
        cohort=(model.cohort or "") if model is not None else "",
        borrowing_limit=borrowing,
        lending_limit=lending,
        weighted_share=_cq_share(reconciler, name),
        parent_cohort=parent,
        root_cohort=root,
        pending_requests=pending,
        preemption_skips=core.preemption_skips.get(name),
        estimated_wait=waits,
        without_estimate=unestimated,
    )


def _cq_share(reconciler: Reconciler, name: str) -> float | None:
    core = reconciler.core
    if not core.fair_sharing:
        return None
    share = core.share("cq", name).precise()
    return math.nan if share == math.inf else share  # Kueue's gauge shows NaN there


def _cohort_samples(reconciler: Reconciler) -> list[CohortSample]:
    core = reconciler.core
    if not core.fair_sharing:
        return []
    return [CohortSample(name, core.share("cohort", name).precise()) for name in core.cohort_names()]


def watch_samples(informers: Sequence[Informer[Any]]) -> list[WatchSample]:
    return [
        WatchSample(
            kind=informer.resource.kind,
            restarts=informer.stats.watch_restarts,
            relists=informer.stats.relists,
            events=sum(informer.stats.events[kind] for kind in _OBJECT_EVENTS),
        )
        for informer in informers
    ]


def state_snapshot(
    reconciler: Reconciler, informers: Sequence[Informer[Any]] = (), inbox_depth: int = 0
) -> StateSnapshot:
    finished = _finished_by_cluster_queue(reconciler)
    pending = pending_requests(reconciler.core)
    estimator = Estimator(reconciler.ctx)
    cluster_queues = [
        _cluster_queue(reconciler, name, finished[name], pending.get(name, {}), estimator)
        for name in sorted(reconciler.cluster_queues)
    ]
    local_queues = []
    for namespace, name in sorted(reconciler.local_queues):
        active, inadmissible = reconciler.core.queues.local_queue_pending_counts(namespace, name)
        _waiting, admitted = reconciler.core.local_queue_members(namespace, name)
        local_queues.append(LocalQueueSample(namespace, name, active, inadmissible, len(admitted)))
    return StateSnapshot(
        cluster_queues,
        local_queues,
        watch_samples(informers),
        inbox_depth,
        device_class_samples(reconciler),
        _cohort_samples(reconciler),
        cohort_tree_samples(reconciler.core),
        _multikueue_counts(reconciler),
    )


def _multikueue_counts(reconciler: Reconciler) -> Counter[tuple[str, str, str]]:
    """The Workloads a MultiKueue manager created here, by origin, ClusterQueue and status (those
    the core holds: admitted, or pending in a queue)."""
    core = reconciler.core
    counts: Counter[tuple[str, str, str]] = Counter()
    for key, workload in reconciler.workloads.items():
        origin = multikueue_origin(workload)
        if origin is None:
            continue
        if key in core.cache.workloads:
            admission = workload.status.admission
            cq = admission.cluster_queue if admission is not None else ""
            counts[(origin, cq, "admitted")] += 1
        elif key in core.queues.workloads:
            cq = core.queues.local_queues.get((workload.metadata.namespace, workload.spec.queue_name), "")
            counts[(origin, cq, "pending")] += 1
    return counts


def device_class_samples(reconciler: Reconciler) -> list[DeviceClassSample]:
    """Devices and claims per DeviceClass of the Workloads the core knows, pending and admitted."""
    core = reconciler.core
    counts: dict[str, Counter[str]] = {}

    def add(info: WorkloadInfo, status: str) -> None:
        for device_class, devices, claims in info.device_classes:
            row = counts.setdefault(device_class, Counter())
            row[f"{status}_devices"] += devices
            row[f"{status}_claims"] += claims

    for info in core.queues.workloads.values():
        add(info, "pending")
        problem = info.problem
        if problem is not None and problem.unmapped_class:
            counts.setdefault(problem.unmapped_class, Counter())["unmapped_workloads"] += 1
    capacity: dict[str, dict[str, float]] = {}
    class_capacities = reconciler.ctx.config.class_capacities
    for key, info in core.cache.workloads.items():
        add(info, "admitted")
        charge = core.ledger.charge_of(key)
        if charge is None:
            continue
        for device_class in {dc for dc, _, _ in info.device_classes}:
            for _name, resource in class_capacities.get(device_class, ()):
                amount = sum(a for (_flavor, r), a in charge.usage.items() if r == resource)
                if amount:
                    row = capacity.setdefault(device_class, {})
                    row[resource] = row.get(resource, 0.0) + base_units(resource, amount)
    names = sorted(counts.keys() | capacity.keys())
    return [
        DeviceClassSample(name, **dict(counts.get(name, Counter())), admitted_capacity=capacity.get(name, {}))
        for name in names
    ]
