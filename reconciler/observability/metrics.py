"""Prometheus metrics: Kueue's names and labels, plus the controller's own (``dra_quota_``).

One ``Metrics`` object per process owns a dedicated ``CollectorRegistry``
(never the global one). Two kinds of series live in it:

- counters and histograms, incremented where the event happens (an admission
  written, a finish written, an eviction written, an API write answered);
  the reconciler and the writer call the methods below;
- gauges derived from the reconciler's in-memory state (pending, active,
  quota, usage, ClusterQueue status, watch counters, inbox depth), computed at
  scrape time by ``StateCollector`` (state_metrics.py) from a :class:`StateSnapshot` that the
  runtime builds on demand. No per-event bookkeeping: a scrape costs one pass
  over the ClusterQueues and LocalQueues (and one over Workloads for the
  finished count).

Every ``kueue_`` series carries ``replica_role`` (``leader``, ``follower`` or
``standalone``), read at the moment of the increment or the scrape. ``cohort``
is the ClusterQueue's cohortName; ``priority_class`` is the Workload's priority class name
(``""`` without one), on the series where Kueue v0.18 carries it.

Eviction hook: :meth:`Metrics.workload_evicted` is meant to be called where an
eviction is written (waitForPodsReady, later preemption); readiness timing
has :meth:`Metrics.workload_ready`.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterable
from typing import Literal

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

from .build_info import build_labels
from .eviction_metrics import EvictionMetrics
from .inventory_metrics import InventoryCollector, InventorySource
from .job_metrics import JobMetrics
from .state_metrics import (
    ClusterQueueSample,
    CohortSample,
    CohortTreeSample,
    DeviceClassSample,
    LocalQueueSample,
    StateCollector,
    StateSnapshot,
    StateSource,
    WatchSample,
)

__all__ = [
    "ClusterQueueSample",
    "CohortSample",
    "CohortTreeSample",
    "DeviceClassSample",
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

# The `_created` series are not part of Kueue's exposition (Go clients have none).
disable_created_metrics()  # type: ignore[no-untyped-call]


def kueue_buckets(count: int = 14) -> list[float]:
    """Kueue's wait-time buckets: 1, then 2.5 doubling (2.5, 5, 10, 20, ...): ``count`` in all."""
    return [1.0, *(2.5 * 2**i for i in range(count - 1))]


_BATCH_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


# --- the state the scrape reads ---------------------------------------------------------------------


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
        git_commit: str | None = None,
        build_date: str | None = None,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.role: ReplicaRole = role
        self.state_source: StateSource | None = None
        # The device inventory gauges (inventory_metrics.py), set by the runtime when the mode is on.
        self.inventory_source: InventorySource | None = None
        self._now = wall_clock
        self._declare_admission_counters(self.registry)
        self._declare_wait_histograms(self.registry)
        self._declare_process_metrics(self.registry, version, git_commit, build_date)
        r = self.registry
        self.evictions = EvictionMetrics(r, lambda: self.role)
        self.jobs = JobMetrics(r, lambda: self.role)
        r.register(StateCollector(self))
        r.register(InventoryCollector(lambda: self.inventory_source))
        self.set_role(role)

    def _declare_admission_counters(self, r: CollectorRegistry) -> None:
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
        self._cohort_admitted = Counter(
            "kueue_cohort_subtree_admitted_workloads",
            "The total number of admitted workloads per cohort's subtree",
            ["cohort", "priority_class", ROLE],
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
            "(InClusterQueue, InCohortReclamation, InCohortReclaimWhileBorrowing)",
            ["preempting_cluster_queue", "reason", ROLE],
            registry=r,
        )

    def _declare_wait_histograms(self, r: CollectorRegistry) -> None:
        cq_prio = ["cluster_queue", "priority_class", ROLE]
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
            buckets=kueue_buckets(16),  # two more than the others, as Kueue's
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

    def _declare_process_metrics(
        self, r: CollectorRegistry, version: str, git_commit: str | None, build_date: str | None
    ) -> None:
        self._build = Gauge(
            "kueue_build_info",
            "Build information: 1 labelled by version, commit, build date, runtime, compiler, platform",
            ["git_version", "git_commit", "build_date", "go_version", "compiler", "platform", ROLE],
            registry=r,
        )
        # None: what the build says (build_info.py: the image's environment, else the installed package).
        self._build_labels = build_labels(version, git_commit, build_date)
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
        self._config_ignored = Gauge(
            "dra_quota_config_ignored_fields",
            "1 for each Configuration field given but without effect in this controller (see the log)",
            ["field"],
            registry=r,
        )
        self._batch = Histogram(
            "dra_quota_reconcile_batch_seconds",
            "Time the reconciler spent on one inbox batch (apply events, decide, write status)",
            buckets=_BATCH_BUCKETS,
            registry=r,
        )
        self._config_reloads = Counter(
            "dra_quota_config_reload",
            "Changes of the configuration file seen by the running controller, per result: applied "
            "(new DeviceClass mappings in use), unchanged (no field that applies live changed), "
            "invalid (refused; the running configuration is kept)",
            ["result"],
            registry=r,
        )
        self._config_generation = Gauge(
            "dra_quota_config_generation",
            "How many configurations this process has used: 1 at start, +1 for each applied reload",
            registry=r,
        )
        self._config_generation.set(1)
        self._config_info = Gauge(
            "dra_quota_config_info",
            "1, labelled by the sha256 (first 16 hex digits) of the configuration file in use",
            ["hash"],
            registry=r,
        )

    # --- role -------------------------------------------------------------------------------------

    def set_role(self, role: ReplicaRole) -> None:
        self._build.clear()
        self.role = role
        self._build.labels(*self._build_labels, role).set(1)
        self._leader.set(0 if role == "follower" else 1)

    def config_ignored(self, fields: Iterable[str]) -> None:
        """The Configuration fields that were given but have no effect (reconciler.config)."""
        self._config_ignored.clear()
        for name in fields:
            self._config_ignored.labels(name).set(1)

    def render(self) -> bytes:
        """The exposition in Prometheus text format."""
        return generate_latest(self.registry)

    # --- events -----------------------------------------------------------------------------------

    def admission_attempt(self, admitted: bool, seconds: float) -> None:
        result = "success" if admitted else "inadmissible"
        self._attempts.labels(result, self.role).inc()
        self._attempt_seconds.labels(result, self.role).observe(seconds)

    def quota_reserved(
        self, cluster_queue: str, created: str | None, priority_class: str = NO_PRIORITY
    ) -> None:
        """A Workload's admission was written (quota reserved and admitted at once: no checks)."""
        self._reserved.labels(cluster_queue, priority_class, self.role).inc()
        self._admitted.labels(cluster_queue, priority_class, self.role).inc()
        since = _parse_time(created)
        if since is not None:
            wait = max(0.0, self._now() - since)
            self._reserved_wait.labels(cluster_queue, priority_class, self.role).observe(wait)
            self._admission_wait.labels(cluster_queue, priority_class, self.role).observe(wait)

    def admitted_in_cohorts(self, cohorts: list[str], priority_class: str = NO_PRIORITY) -> None:
        """A Workload was admitted by a ClusterQueue under these cohorts (its parent up to the root)."""
        for cohort in cohorts:
            self._cohort_admitted.labels(cohort, priority_class, self.role).inc()

    def workload_finished(self, cluster_queue: str, priority_class: str = NO_PRIORITY) -> None:
        self._finished.labels(cluster_queue, priority_class, self.role).inc()

    def workload_evicted(
        self,
        cluster_queue: str,
        reason: str,
        underlying_cause: str = "",
        priority_class: str = NO_PRIORITY,
        *,
        workload_uid: str | None = None,
        pods_ready_since: str | None = None,
        evicted_at: str | None = None,
    ) -> None:
        """HOOK: call where an eviction is written (e.g. reason ``PodsReadyTimeout``). With the
        Workload's UID it counts in the once-per-reason counter; with the time PodsReady turned True
        (it was True at the eviction) and the eviction's time, the ready-to-evicted histogram."""
        self._evicted.labels(cluster_queue, reason, underlying_cause, priority_class, self.role).inc()
        ready, evicted = _parse_time(pods_ready_since), _parse_time(evicted_at)
        self.evictions.evicted(
            cluster_queue,
            reason,
            underlying_cause,
            priority_class,
            workload_uid=workload_uid,
            ready_seconds=None if ready is None or evicted is None else evicted - ready,
        )

    def eviction_released(self, cluster_queue: str, reason: str, evicted_at: str | None) -> None:
        """HOOK: an evicted Workload's quota reservation ended (Evicted=True since `evicted_at`)."""
        since = _parse_time(evicted_at)
        if since is not None:
            self.evictions.released(cluster_queue, reason, self._now() - since)

    def workload_preempted(self, preempting_cluster_queue: str, reason: str) -> None:
        """HOOK: call where a preemption's eviction is written."""
        self._preempted.labels(preempting_cluster_queue, reason, self.role).inc()

    def workload_ready(
        self,
        cluster_queue: str,
        created: str | None,
        admitted: str | None,
        priority_class: str = NO_PRIORITY,
    ) -> None:
        """HOOK: call when a Workload's PodsReady turns True (waitForPodsReady)."""
        now = self._now()
        since_created, since_admitted = _parse_time(created), _parse_time(admitted)
        if since_created is not None:
            self._ready_wait.labels(cluster_queue, priority_class, self.role).observe(
                max(0.0, now - since_created)
            )
        if since_admitted is not None:
            self._admitted_until_ready.labels(cluster_queue, priority_class, self.role).observe(
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

    def config_reload(self, result: str) -> None:
        self._config_reloads.labels(result).inc()

    def config_in_use(self, digest: str, *, bump: bool) -> None:
        """The configuration file with this content is in use (`bump`: newly applied)."""
        self._config_info.clear()
        self._config_info.labels(digest[:16]).set(1)
        if bump:
            self._config_generation.inc()
