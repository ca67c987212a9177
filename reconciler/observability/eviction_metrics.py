"""Kueue's eviction series beyond the plain count, and the admission-checks wait.

- ``kueue_evicted_workloads_once_total``: an eviction counted only the first time a Workload is
  evicted with that (reason, underlying cause). Kueue keeps that tally in the Workload's
  ``status.schedulingStats.evictions``; this controller does not write that field, so it keeps
  the tally in memory per Workload UID (a restart forgets it: a Workload evicted before the
  restart and again after, for the same reason, is counted once more).
- ``kueue_pods_ready_to_evicted_time_seconds``: at an eviction of a Workload whose PodsReady was
  True, the seconds from PodsReady turning True to the eviction.
- ``kueue_workload_eviction_latency_seconds``: when an evicted Workload's quota reservation ends
  (it is pending again with Evicted=True), the seconds since Evicted turned True.
- ``kueue_admission_checks_wait_time_seconds``: registered with Kueue's labels and buckets but
  never observed: this controller has no admission checks, and Kueue observes it only for
  Workloads that have some.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Histogram

__all__ = ["EvictionMetrics"]

ROLE = "replica_role"
# How many Workloads' first evictions are remembered (oldest forgotten first).
_ONCE_MEMORY = 100_000


def _buckets(count: int) -> list[float]:
    return [1.0, *(2.5 * 2**i for i in range(count - 1))]


class EvictionMetrics:
    def __init__(self, registry: CollectorRegistry, role: Callable[[], str]) -> None:
        self._role = role
        self._seen: OrderedDict[tuple[str, str, str], None] = OrderedDict()
        self.once = Counter(
            "kueue_evicted_workloads_once",
            "Evictions counted once per Workload and (reason, underlying_cause): a Workload evicted "
            "again for the same reason and cause is not counted again",
            ["cluster_queue", "reason", "underlying_cause", "priority_class", ROLE],
            registry=registry,
        )
        self.ready_to_evicted = Histogram(
            "kueue_pods_ready_to_evicted_time_seconds",
            "Seconds from a Workload's PodsReady turning True to its eviction, observed at "
            "evictions of Workloads whose PodsReady is True, per 'cluster_queue', 'reason' and "
            "'underlying_cause'",
            ["cluster_queue", "reason", "underlying_cause", ROLE],
            buckets=_buckets(14),
            registry=registry,
        )
        self.latency = Histogram(
            "kueue_workload_eviction_latency_seconds",
            "Seconds from a Workload's Evicted condition turning True to its quota reservation "
            "ending (pending again), per 'cluster_queue' (the admission it had) and 'reason' "
            "(the Evicted condition's)",
            ["cluster_queue", "reason", ROLE],
            buckets=_buckets(14),
            registry=registry,
        )
        self.checks_wait = Histogram(
            "kueue_admission_checks_wait_time_seconds",
            "Seconds from quota reservation to admission of Workloads with admission checks, per "
            "'cluster_queue'; never observed here: this controller has no admission checks",
            ["cluster_queue", "priority_class", ROLE],
            buckets=_buckets(14),
            registry=registry,
        )

    def evicted(
        self,
        cluster_queue: str,
        reason: str,
        underlying_cause: str,
        priority_class: str,
        *,
        workload_uid: str | None,
        ready_seconds: float | None,
    ) -> None:
        role = self._role()
        if workload_uid:
            seen = (workload_uid, reason, underlying_cause)
            if seen not in self._seen:
                self._seen[seen] = None
                if len(self._seen) > _ONCE_MEMORY:
                    self._seen.popitem(last=False)
                self.once.labels(cluster_queue, reason, underlying_cause, priority_class, role).inc()
        if ready_seconds is not None:
            self.ready_to_evicted.labels(cluster_queue, reason, underlying_cause, role).observe(
                max(0.0, ready_seconds)
            )

    def released(self, cluster_queue: str, reason: str, seconds: float) -> None:
        self.latency.labels(cluster_queue, reason, self._role()).observe(max(0.0, seconds))
