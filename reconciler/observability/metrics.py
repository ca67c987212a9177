"""Prometheus metrics: Kueue's names and labels, plus the controller's own (``dra_quota_``).

One ``Metrics`` object per process owns a dedicated ``CollectorRegistry``
(never the global one). Two kinds of series live in it:

- counters and histograms, incremented where the event happens (an admission
  written, a finish written, an eviction written, an API write answered);
  the reconciler and the writer call the methods below;
- gauges derived from the reconciler's in-memory state (pending, active,
  quota, usage, ClusterQueue status, watch counters, inbox depth), computed at
  scrape time by ``_StateCollector`` from a :class:`StateSnapshot` that the
  runtime builds on demand. No per-event bookkeeping: a scrape costs one pass
  over the ClusterQueues and LocalQueues (and one over Workloads for the
  finished count).

Every ``kueue_`` series carries ``replica_role`` (``leader``, ``follower`` or
``standalone``), read at the moment of the increment or the scrape. ``cohort``
is the ClusterQueue's cohortName; ``priority_class`` is not reported yet (``""``).

Eviction hook: :meth:`Metrics.workload_evicted` is meant to be called where an
eviction is written (waitForPodsReady, later preemption); readiness timing
has :meth:`Metrics.workload_ready`.
"""

from __future__ import annotations

import datetime as dt
import platform
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

__all__ = [
    "ClusterQueueSample",
    "LocalQueueSample",
    "Metrics",
    "ReplicaRole",
    "StateSnapshot",
    "WatchSample",
    "kueue_buckets",
]

ReplicaRole = Literal["leader", "follower", "standalone"]
ROLE = "replica_role"
NO_PRIORITY = ""
NO_COHORT = ""

# The `_created` series are not part of Kueue's exposition (Go clients have none).
disable_created_metrics()  # type: ignore[no-untyped-call]


def kueue_buckets(count: int = 14) -> list[float]:
    """Kueue's wait-time buckets: 1, then 2.5 doubling (2.5, 5, 10, 20, ...): ``count`` in all."""
    return [1.0, *(2.5 * 2**i for i in range(count - 1))]


_BATCH_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


# --- the state the scrape reads ---------------------------------------------------------------------


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
class StateSnapshot:
    cluster_queues: list[ClusterQueueSample] = field(default_factory=list)
    local_queues: list[LocalQueueSample] = field(default_factory=list)
    watches: list[WatchSample] = field(default_factory=list)
    inbox_depth: int = 0


StateSource = Callable[[], StateSnapshot | None]


class _StateCollector(Collector):
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
        cqs = snap.cluster_queues if snap else []
        lqs = snap.local_queues if snap else []

        def gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, doc, labels=[*labels, ROLE])

        pending = gauge(
            "kueue_pending_workloads",
            "The number of pending workloads, per 'cluster_queue' and 'status' (active or inadmissible)",
            ["cluster_queue", "status"],
        )
        reserving = gauge(
            "kueue_reserving_active_workloads",
            "The number of Workloads that are reserving quota, per 'cluster_queue'",
            ["cluster_queue"],
        )
        admitted = gauge(
            "kueue_admitted_active_workloads",
            "The number of admitted Workloads that are active (unsuspended and not finished), "
            "per 'cluster_queue'",
            ["cluster_queue"],
        )
        finished = gauge(
            "kueue_finished_workloads",
            "The number of finished workloads per 'cluster_queue'",
            ["cluster_queue"],
        )
        status = gauge(
            "kueue_cluster_queue_status",
            "Reports 'cluster_queue' with its 'status' (pending, active or terminating): "
            "1 for the current one, 0 for the others",
            ["cluster_queue", "status"],
        )
        fr_labels = ["cohort", "cluster_queue", "flavor", "resource"]
        nominal = gauge(
            "kueue_cluster_queue_nominal_quota",
            "Reports the cluster_queue's resource nominal quota within all the flavors (base units)",
            fr_labels,
        )
        reservation = gauge(
            "kueue_cluster_queue_resource_reservation",
            "Reports the cluster_queue's total resource reservation within all the flavors (base units)",
            fr_labels,
        )
        usage = gauge(
            "kueue_cluster_queue_resource_usage",
            "Reports the cluster_queue's total resource usage within all the flavors (base units)",
            fr_labels,
        )
        borrowing = gauge(
            "kueue_cluster_queue_borrowing_limit",
            "Reports the cluster_queue's resource borrowing limit within all the flavors (+Inf when unset)",
            fr_labels,
        )
        lending = gauge(
            "kueue_cluster_queue_lending_limit",
            "Reports the cluster_queue's resource lending limit within all the flavors (+Inf when unset)",
            fr_labels,
        )
        for cq in cqs:
            pending.add_metric([cq.name, "active", role], cq.pending_active)
            pending.add_metric([cq.name, "inadmissible", role], cq.pending_inadmissible)
            reserving.add_metric([cq.name, role], cq.reserving)
            admitted.add_metric([cq.name, role], cq.admitted)
            finished.add_metric([cq.name, role], cq.finished)
            for state in ("pending", "active", "terminating"):
                status.add_metric([cq.name, state, role], 1.0 if cq.status == state else 0.0)
            for family, amounts in (
                (nominal, cq.nominal),
                (reservation, cq.reserved),
                (usage, cq.used),
                (borrowing, cq.borrowing_limit),
                (lending, cq.lending_limit),
            ):
                for (flavor, resource), amount in sorted(amounts.items()):
                    family.add_metric([cq.cohort, cq.name, flavor, resource, role], amount)
        yield from (
            pending,
            reserving,
            admitted,
            finished,
            status,
            nominal,
            reservation,
            usage,
            borrowing,
            lending,
        )

        lq_pending = gauge(
            "kueue_local_queue_pending_workloads",
            "The number of pending workloads, per 'local_queue' and 'status' (active or inadmissible)",
            ["name", "namespace", "status"],
        )
        lq_admitted = gauge(
            "kueue_local_queue_admitted_active_workloads",
            "The number of admitted Workloads that are active, per 'local_queue'",
            ["name", "namespace"],
        )
        for lq in lqs:
            lq_pending.add_metric([lq.name, lq.namespace, "active", role], lq.pending_active)
            lq_pending.add_metric([lq.name, lq.namespace, "inadmissible", role], lq.pending_inadmissible)
            lq_admitted.add_metric([lq.name, lq.namespace, role], lq.admitted)
        yield from (lq_pending, lq_admitted)

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


def _parse_time(stamp: str | None) -> float | None:
    if not stamp:
        return None
    try:
        return dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC).timestamp()
    except ValueError:
        return None


class Metrics:
    """The process's metrics. Methods are cheap and never raise; call them from the event loop."""

    def __init__(
        self,
        role: ReplicaRole = "standalone",
        *,
        wall_clock: Callable[[], float] = time.time,
        version: str = "0+unknown",
        git_commit: str = "",
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.role: ReplicaRole = role
        self.state_source: StateSource | None = None
        self._now = wall_clock
        r = self.registry
        self._attempts = Counter(
            "kueue_admission_attempts",
            "The total number of attempts to admit workloads; 'success' when at least one was admitted",
            ["result", ROLE],
            registry=r,
        )
        self._attempt_seconds = Histogram(
            "kueue_admission_attempt_duration_seconds",
            "The latency of an admission attempt, per 'result'",
            ["result", ROLE],
            registry=r,
        )
        cq_prio = ["cluster_queue", "priority_class", ROLE]
        self._reserved = Counter(
            "kueue_quota_reserved_workloads",
            "The total number of quota reserved workloads per 'cluster_queue'",
            cq_prio,
            registry=r,
        )
        self._admitted = Counter(
            "kueue_admitted_workloads",
            "The total number of admitted workloads per 'cluster_queue'",
            cq_prio,
            registry=r,
        )
        self._finished = Counter(
            "kueue_finished_workloads",
            "The total number of finished workloads per 'cluster_queue'",
            cq_prio,
            registry=r,
        )
        self._evicted = Counter(
            "kueue_evicted_workloads",
            "The number of evicted workloads per 'cluster_queue', 'reason' and 'underlying_cause'",
            ["cluster_queue", "reason", "underlying_cause", "priority_class", ROLE],
            registry=r,
        )
        self._preempted = Counter(
            "kueue_preempted_workloads",
            "The number of preempted workloads per 'preempting_cluster_queue' and 'reason' "
            "(InClusterQueue, InCohortReclamation)",
            ["preempting_cluster_queue", "reason", ROLE],
            registry=r,
        )
        buckets = kueue_buckets(14)
        self._reserved_wait = Histogram(
            "kueue_quota_reserved_wait_time_seconds",
            "The time between a workload was created or requeued until it got quota reservation",
            cq_prio,
            buckets=buckets,
            registry=r,
        )
        self._admission_wait = Histogram(
            "kueue_admission_wait_time_seconds",
            "The time between a workload was created or requeued until admission",
            cq_prio,
            buckets=buckets,
            registry=r,
        )
        self._ready_wait = Histogram(
            "kueue_ready_wait_time_seconds",
            "The time between a workload was created or requeued until ready",
            cq_prio,
            buckets=buckets,
            registry=r,
        )
        self._admitted_until_ready = Histogram(
            "kueue_admitted_until_ready_wait_time_seconds",
            "The time between a workload was admitted until ready",
            cq_prio,
            buckets=buckets,
            registry=r,
        )
        self._build = Gauge(
            "kueue_build_info",
            "Build information: 1 labelled by version, commit, build date, runtime, compiler, platform",
            ["git_version", "git_commit", "build_date", "go_version", "compiler", "platform", ROLE],
            registry=r,
        )
        self._build_labels = (
            version,
            git_commit,
            "",
            f"python{platform.python_version()}",
            sys.implementation.name,
            f"{sys.platform}/{platform.machine()}",
        )
        self._api_seconds = Histogram(
            "dra_quota_api_request_duration_seconds",
            "Duration of the controller's API writes (and Lease calls), per verb and resource",
            ["verb", "resource"],
            registry=r,
        )
        self._api_errors = Counter(
            "dra_quota_api_request_errors",
            "API requests that failed, per verb, resource and HTTP code ('transport' without an answer)",
            ["verb", "resource", "code"],
            registry=r,
        )
        self._rebuild = Gauge(
            "dra_quota_ledger_rebuild_seconds",
            "How long the last rebuild of the quota ledger from admitted Workloads took",
            registry=r,
        )
        self._leader = Gauge(
            "dra_quota_leader", "1 when this replica is the one that decides and writes", registry=r
        )
        self._batch = Histogram(
            "dra_quota_reconcile_batch_seconds",
            "Time the reconciler spent on one inbox batch (apply events, decide, write status)",
            buckets=_BATCH_BUCKETS,
            registry=r,
        )
        r.register(_StateCollector(self))
        self.set_role(role)

    # --- role -------------------------------------------------------------------------------------

    def set_role(self, role: ReplicaRole) -> None:
        self._build.clear()
        self.role = role
        self._build.labels(*self._build_labels, role).set(1)
        self._leader.set(0 if role == "follower" else 1)

    def render(self) -> bytes:
        """The exposition in Prometheus text format."""
        return generate_latest(self.registry)

    # --- events -----------------------------------------------------------------------------------

    def admission_attempt(self, admitted: bool, seconds: float) -> None:
        result = "success" if admitted else "inadmissible"
        self._attempts.labels(result, self.role).inc()
        self._attempt_seconds.labels(result, self.role).observe(seconds)

    def quota_reserved(self, cluster_queue: str, created: str | None) -> None:
        """A Workload's admission was written (quota reserved and admitted at once: no checks)."""
        self._reserved.labels(cluster_queue, NO_PRIORITY, self.role).inc()
        self._admitted.labels(cluster_queue, NO_PRIORITY, self.role).inc()
        since = _parse_time(created)
        if since is not None:
            wait = max(0.0, self._now() - since)
            self._reserved_wait.labels(cluster_queue, NO_PRIORITY, self.role).observe(wait)
            self._admission_wait.labels(cluster_queue, NO_PRIORITY, self.role).observe(wait)

    def workload_finished(self, cluster_queue: str) -> None:
        self._finished.labels(cluster_queue, NO_PRIORITY, self.role).inc()

    def workload_evicted(self, cluster_queue: str, reason: str, underlying_cause: str = "") -> None:
        """HOOK: call where an eviction is written (e.g. reason ``PodsReadyTimeout``)."""
        self._evicted.labels(cluster_queue, reason, underlying_cause, NO_PRIORITY, self.role).inc()

    def workload_preempted(self, preempting_cluster_queue: str, reason: str) -> None:
        """HOOK: call where a preemption's eviction is written."""
        self._preempted.labels(preempting_cluster_queue, reason, self.role).inc()

    def workload_ready(self, cluster_queue: str, created: str | None, admitted: str | None) -> None:
        """HOOK: call when a Workload's PodsReady turns True (waitForPodsReady)."""
        now = self._now()
        since_created, since_admitted = _parse_time(created), _parse_time(admitted)
        if since_created is not None:
            self._ready_wait.labels(cluster_queue, NO_PRIORITY, self.role).observe(
                max(0.0, now - since_created)
            )
        if since_admitted is not None:
            self._admitted_until_ready.labels(cluster_queue, NO_PRIORITY, self.role).observe(
                max(0.0, now - since_admitted)
            )

    def api_request(self, verb: str, resource: str, seconds: float, error_code: str | None = None) -> None:
        self._api_seconds.labels(verb, resource).observe(seconds)
        if error_code is not None:
            self._api_errors.labels(verb, resource, error_code).inc()

    def ledger_rebuilt(self, seconds: float) -> None:
        self._rebuild.set(seconds)

    def reconcile_batch(self, seconds: float) -> None:
        self._batch.observe(seconds)
