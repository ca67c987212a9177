"""``kueue_workload_creation_latency_seconds{job_kind}``: when this controller's Workload for a job
has been created, the seconds from the job's creation to the Workload's (both as the API server
stamped them, to the second). As in Kueue, only for a job still at generation 1 (or none): a job
changed since it was created is not measured."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Histogram

from reconciler.api import ObjectMeta, Workload

__all__ = ["JobMetrics"]

# Kueue's buckets for it: 10 ms doubling, eleven of them (up to 10.24 s).
_BUCKETS = [0.01 * 2**i for i in range(11)]


def _seconds(stamp: str | None) -> float | None:
    if not stamp:
        return None
    try:
        return dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC).timestamp()
    except ValueError:
        return None


class JobMetrics:
    def __init__(self, registry: CollectorRegistry, role: Callable[[], str]) -> None:
        self._role = role
        self.creation = Histogram(
            "kueue_workload_creation_latency_seconds",
            "Seconds from a job's creation to the creation of its Workload, per 'job_kind'; only "
            "for jobs not changed since they were created (generation 1)",
            ["job_kind", "replica_role"],
            buckets=_BUCKETS,
            registry=registry,
        )

    def workload_created(self, job_kind: str, job: ObjectMeta, workload: Workload | None) -> None:
        """HOOK: the Workload of a job of `job_kind` was created (the create answered)."""
        if job.generation > 1 or workload is None:
            return
        start, end = _seconds(job.creation_timestamp), _seconds(workload.metadata.creation_timestamp)
        if start is not None and end is not None:
            self.creation.labels(job_kind, self._role()).observe(end - start)
