"""The gauges a scrape computes from the runtime's state: the snapshot it hands over and the collector.

The runtime builds a :class:`StateSnapshot` on demand (one pass over its queues);
``StateCollector`` turns it into Kueue's gauge families (and the watch counters)
with the replica's role, at scrape time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from .hierarchy_metrics import CohortTreeSample, hierarchy_families

if TYPE_CHECKING:
    from .metrics import Metrics

__all__ = [
    "ClusterQueueSample",
    "CohortSample",
    "CohortTreeSample",
    "DeviceClassSample",
    "LocalQueueSample",
    "StateCollector",
    "StateSnapshot",
    "StateSource",
    "WatchSample",
]

ROLE = "replica_role"
NO_COHORT = ""


@dataclass(frozen=True, slots=True)
class ClusterQueueSample:
    name: str
    status: Literal["pending", "active", "terminating"]
    pending_active: int = 0
    pending_inadmissible: int = 0
    reserving: int = 0
    admitted: int = 0
    finished: int = 0
    # (flavor, resource) -> amount in the resource's base unit (cpu in cores, memory in bytes, GPUs)
    nominal: dict[tuple[str, str], float] = field(default_factory=dict)
    reserved: dict[tuple[str, str], float] = field(default_factory=dict)
    used: dict[tuple[str, str], float] = field(default_factory=dict)
    cohort: str = NO_COHORT
    # +Inf where no limit is set, as Kueue reports it.
    borrowing_limit: dict[tuple[str, str], float] = field(default_factory=dict)
    lending_limit: dict[tuple[str, str], float] = field(default_factory=dict)
    # Its weighted share while fair sharing is on (NaN for weight 0 and borrowing, as Kueue).
    weighted_share: float | None = None
    # Its cohort and the root of its tree ("" without a cohort, or when the tree has a cycle).
    parent_cohort: str = NO_COHORT
    root_cohort: str = NO_COHORT
    # resource -> what its pending Workloads request (0 for each resource it has quota for).
    pending_requests: dict[str, float] = field(default_factory=dict)
    # Preempting heads skipped in the last admission cycle that skipped any (None: never).
    preemption_skips: int | None = None
    # The estimated waits (seconds from now): "head" (the first in queue order) and
    # "last_estimated" (the latest estimated start); each absent without an estimate.
    estimated_wait: Mapping[str, float] = field(default_factory=dict)
    # Pending workloads that get no estimate (their quota held by workloads of unknown run time...).
    without_estimate: int = 0


@dataclass(frozen=True, slots=True)
class CohortSample:
    """A cohort's weighted share (fair sharing on)."""

    name: str
    weighted_share: float


@dataclass(frozen=True, slots=True)
class LocalQueueSample:
    namespace: str
    name: str
    pending_active: int = 0
    pending_inadmissible: int = 0
    admitted: int = 0


@dataclass(frozen=True, slots=True)
class WatchSample:
    kind: str
    restarts: int = 0
    relists: int = 0
    events: int = 0


@dataclass(frozen=True, slots=True)
class DeviceClassSample:
    """What Workloads ask of one DeviceClass: devices and claims, pending and admitted."""

    device_class: str
    pending_devices: int = 0
    admitted_devices: int = 0
    pending_claims: int = 0
    admitted_claims: int = 0
    # Pending Workloads that cannot be charged because this DeviceClass has no mapping.
    unmapped_workloads: int = 0
    # What admitted Workloads are charged for the class's device capacities (capacity mapping):
    # quota resource -> amount in base units (bytes, percent, ...).
    admitted_capacity: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StateSnapshot:
    cluster_queues: list[ClusterQueueSample] = field(default_factory=list)
    local_queues: list[LocalQueueSample] = field(default_factory=list)
    watches: list[WatchSample] = field(default_factory=list)
    inbox_depth: int = 0
    device_classes: list[DeviceClassSample] = field(default_factory=list)
    # Fair sharing on: every cohort's weighted share.
    cohorts: list[CohortSample] = field(default_factory=list)
    # Every cohort not in a cycle: its place in the tree and its subtree's figures.
    cohort_trees: list[CohortTreeSample] = field(default_factory=list)
    # Workloads a MultiKueue manager created here: (origin, cluster queue, status) -> count,
    # status "pending" or "admitted".
    multikueue: Mapping[tuple[str, str, str], int] = field(default_factory=dict)


StateSource = Callable[[], StateSnapshot | None]


class StateCollector(Collector):
    """Gauges (and the watch counters) computed at scrape time from the runtime's state."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def describe(self) -> Iterable[GaugeMetricFamily | CounterMetricFamily]:
        # Nothing to check at registration: kueue_finished_workloads is both a counter (its
        # samples are ``_total``) and this gauge, as in Kueue.
        return []

    def collect(self) -> Iterable[GaugeMetricFamily | CounterMetricFamily]:
        source = self._metrics.state_source
        return list(self._families(source() if source is not None else None))

    def _families(self, snap: StateSnapshot | None) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        role = self._metrics.role
        yield from _cluster_queue_families(snap.cluster_queues if snap else [], role)
        yield from _share_families(snap, role)
        yield from hierarchy_families(
            snap.cluster_queues if snap else [], snap.cohort_trees if snap else [], role
        )
        yield from _local_queue_families(snap.local_queues if snap else [], role)
        yield from _watch_families(snap)
        yield from _device_class_families(snap.device_classes if snap else [])
        yield _multikueue_family(snap.multikueue if snap else {})
        yield from _estimate_families(snap.cluster_queues if snap else [])


def _estimate_families(cqs: list[ClusterQueueSample]) -> Iterator[GaugeMetricFamily]:
    wait = GaugeMetricFamily(
        "dra_quota_pending_workloads_estimated_wait_seconds",
        "Estimated wait until a pending workload of the 'cluster_queue' starts (docs/visibility.md): "
        "'workload' head (the first in queue order) or last_estimated (the latest estimated start)",
        labels=["cluster_queue", "workload"],
    )
    unknown = GaugeMetricFamily(
        "dra_quota_pending_workloads_without_estimate",
        "Pending workloads of the 'cluster_queue' with no wait estimate (the visibility API's "
        "draQuotaNoEstimate says why)",
        labels=["cluster_queue"],
    )
    for cq in cqs:
        for which, seconds in sorted(cq.estimated_wait.items()):
            wait.add_metric([cq.name, which], seconds)
        unknown.add_metric([cq.name], cq.without_estimate)
    yield from (wait, unknown)


def _multikueue_family(counts: Mapping[tuple[str, str, str], int]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(
        "dra_quota_multikueue_workloads",
        "Workloads a MultiKueue manager created on this worker (label kueue.x-k8s.io/multikueue-origin), "
        "per 'origin' (the manager's multiKueue.origin), 'cluster_queue' and 'status' (pending or admitted)",
        labels=["origin", "cluster_queue", "status"],
    )
    for (origin, cluster_queue, status), count in sorted(counts.items()):
        family.add_metric([origin, cluster_queue, status], count)
    return family


def _gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=[*labels, ROLE])


def _cluster_queue_families(cqs: list[ClusterQueueSample], role: str) -> Iterator[GaugeMetricFamily]:
    pending = _gauge(
        "kueue_pending_workloads",
        "The number of pending workloads, per 'cluster_queue' and 'status' (active or inadmissible)",
        ["cluster_queue", "status"],
    )
    reserving = _gauge(
        "kueue_reserving_active_workloads",
        "The number of Workloads that are reserving quota, per 'cluster_queue'",
        ["cluster_queue"],
    )
    admitted = _gauge(
        "kueue_admitted_active_workloads",
        "The number of admitted Workloads that are active (unsuspended and not finished), "
        "per 'cluster_queue'",
        ["cluster_queue"],
    )
    finished = _gauge(
        "kueue_finished_workloads",
        "The number of finished workloads per 'cluster_queue'",
        ["cluster_queue"],
    )
    status = _gauge(
        "kueue_cluster_queue_status",
        "Reports 'cluster_queue' with its 'status' (pending, active or terminating): "
        "1 for the current one, 0 for the others",
        ["cluster_queue", "status"],
    )
    for cq in cqs:
        pending.add_metric([cq.name, "active", role], cq.pending_active)
        pending.add_metric([cq.name, "inadmissible", role], cq.pending_inadmissible)
        reserving.add_metric([cq.name, role], cq.reserving)
        admitted.add_metric([cq.name, role], cq.admitted)
        finished.add_metric([cq.name, role], cq.finished)
        for state in ("pending", "active", "terminating"):
            status.add_metric([cq.name, state, role], 1.0 if cq.status == state else 0.0)
    yield from (pending, reserving, admitted, finished, status)
    yield from _quota_families(cqs, role)


def _quota_families(cqs: list[ClusterQueueSample], role: str) -> Iterator[GaugeMetricFamily]:
    """Quota per cohort, ClusterQueue, flavor and resource: nominal, reserved, used and limits."""
    fr_labels = ["cohort", "cluster_queue", "flavor", "resource"]
    nominal = _gauge(
        "kueue_cluster_queue_nominal_quota",
        "Reports the cluster_queue's resource nominal quota within all the flavors (base units)",
        fr_labels,
    )
    reservation = _gauge(
        "kueue_cluster_queue_resource_reservation",
        "Reports the cluster_queue's total resource reservation within all the flavors (base units)",
        fr_labels,
    )
    usage = _gauge(
        "kueue_cluster_queue_resource_usage",
        "Reports the cluster_queue's total resource usage within all the flavors (base units)",
        fr_labels,
    )
    borrowing = _gauge(
        "kueue_cluster_queue_borrowing_limit",
        "Reports the cluster_queue's resource borrowing limit within all the flavors (+Inf when unset)",
        fr_labels,
    )
    lending = _gauge(
        "kueue_cluster_queue_lending_limit",
        "Reports the cluster_queue's resource lending limit within all the flavors (+Inf when unset)",
        fr_labels,
    )
    for cq in cqs:
        for family, amounts in (
            (nominal, cq.nominal),
            (reservation, cq.reserved),
            (usage, cq.used),
            (borrowing, cq.borrowing_limit),
            (lending, cq.lending_limit),
        ):
            for (flavor, resource), amount in sorted(amounts.items()):
                family.add_metric([cq.cohort, cq.name, flavor, resource, role], amount)
    yield from (nominal, reservation, usage, borrowing, lending)


def _share_families(snap: StateSnapshot | None, role: str) -> Iterator[GaugeMetricFamily]:
    """Kueue's fair-sharing gauges; left out while fair sharing is off (no samples)."""
    if snap is None:
        return
    if all(cq.weighted_share is None for cq in snap.cluster_queues) and not snap.cohorts:
        return
    cq_share = _gauge(
        "kueue_cluster_queue_weighted_share",
        "The ClusterQueue's dominant resource share: of each resource, what it uses beyond its "
        "nominal quota over what its cohort tree can lend, the largest ratio (x1000), divided by "
        "its fair-sharing weight; 0 within nominal quota, NaN with weight 0 while borrowing",
        ["cluster_queue", "cohort"],
    )
    cohort_share = _gauge(
        "kueue_cohort_weighted_share",
        "The Cohort's dominant resource share: of each resource, what its subtree uses beyond its "
        "subtree quota over what the tree above can lend, the largest ratio (x1000), divided by "
        "its fair-sharing weight; 0 within quota, +Inf with weight 0 while borrowing",
        ["cohort"],
    )
    for cq in snap.cluster_queues:
        if cq.weighted_share is not None:
            cq_share.add_metric([cq.name, cq.cohort, role], cq.weighted_share)
    for cohort in snap.cohorts:
        cohort_share.add_metric([cohort.name, role], cohort.weighted_share)
    yield from (cq_share, cohort_share)


def _local_queue_families(lqs: list[LocalQueueSample], role: str) -> Iterator[GaugeMetricFamily]:
    lq_pending = _gauge(
        "kueue_local_queue_pending_workloads",
        "The number of pending workloads, per 'local_queue' and 'status' (active or inadmissible)",
        ["name", "namespace", "status"],
    )
    lq_admitted = _gauge(
        "kueue_local_queue_admitted_active_workloads",
        "The number of admitted Workloads that are active, per 'local_queue'",
        ["name", "namespace"],
    )
    for lq in lqs:
        lq_pending.add_metric([lq.name, lq.namespace, "active", role], lq.pending_active)
        lq_pending.add_metric([lq.name, lq.namespace, "inadmissible", role], lq.pending_inadmissible)
        lq_admitted.add_metric([lq.name, lq.namespace, role], lq.admitted)
    yield from (lq_pending, lq_admitted)


def _watch_families(snap: StateSnapshot | None) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    watches = snap.watches if snap else []
    restarts = CounterMetricFamily(
        "dra_quota_watch_restarts",
        "Watches resumed from the last resourceVersion (no relist), per kind",
        labels=["kind"],
    )
    relists = CounterMetricFamily(
        "dra_quota_watch_relists",
        "Lists after the first (410 Gone, lost events), per kind",
        labels=["kind"],
    )
    events = CounterMetricFamily(
        "dra_quota_watch_events",
        "ADDED, MODIFIED and DELETED watch events received, per kind",
        labels=["kind"],
    )
    for w in watches:
        restarts.add_metric([w.kind], w.restarts)
        relists.add_metric([w.kind], w.relists)
        events.add_metric([w.kind], w.events)
    depth = GaugeMetricFamily("dra_quota_inbox_depth", "Items waiting in the reconciler's inbox")
    if snap is not None:
        depth.add_metric([], snap.inbox_depth)
    yield from (restarts, relists, events, depth)


def _device_class_families(samples: list[DeviceClassSample]) -> Iterator[GaugeMetricFamily]:
    devices = GaugeMetricFamily(
        "dra_quota_device_class_requested_devices",
        "Devices requested through DRA claims by pending and admitted Workloads, per 'device_class' "
        "and 'status' (pending or admitted; a shared claim counts once per Workload)",
        labels=["device_class", "status"],
    )
    claims = GaugeMetricFamily(
        "dra_quota_device_class_claims",
        "ResourceClaims (one per pod for a template, one per Workload for a shared claim) of pending "
        "and admitted Workloads that request a 'device_class', per 'status'",
        labels=["device_class", "status"],
    )
    unmapped = GaugeMetricFamily(
        "dra_quota_device_class_unmapped_workloads",
        "Pending Workloads that cannot be charged because their 'device_class' is not in deviceClassMappings",
        labels=["device_class"],
    )
    capacity = GaugeMetricFamily(
        "dra_quota_device_class_admitted_capacity",
        "Quota charged to admitted Workloads for a 'device_class''s device capacities (the capacity "
        "mapping: GPU memory, cores...), per quota 'resource', in base units",
        labels=["device_class", "resource"],
    )
    for sample in samples:
        for resource, amount in sorted(sample.admitted_capacity.items()):
            capacity.add_metric([sample.device_class, resource], amount)
        devices.add_metric([sample.device_class, "pending"], sample.pending_devices)
        devices.add_metric([sample.device_class, "admitted"], sample.admitted_devices)
        claims.add_metric([sample.device_class, "pending"], sample.pending_claims)
        claims.add_metric([sample.device_class, "admitted"], sample.admitted_claims)
        if sample.unmapped_workloads:
            unmapped.add_metric([sample.device_class], sample.unmapped_workloads)
    yield from (devices, claims, unmapped, capacity)
