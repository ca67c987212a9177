"""The wait estimate through the reconciler and the in-memory API: the visibility API's entries
(draQuotaEstimatedStart / draQuotaNoEstimate) and the gauges a scrape computes, from the observed
run time of finished Workloads and from maximum execution times."""

from __future__ import annotations

from reconciler.api.resources import JOBS
from reconciler.api.times import rfc3339
from reconciler.core.scheduling.wait_estimate import HELD_FOR_EVER
from reconciler.observability.metrics import Metrics
from reconciler.runtime.loop.pending_source import ReconcilerPending
from reconciler.runtime.loop.snapshot import state_snapshot
from reconciler.visibility.summary import Page, cluster_queue_summary
from tests.support.builders import job_body
from tests.support.memory_cluster import T0, Cluster


def _submit(c: Cluster, name: str, max_exec: str | None = None) -> None:
    body = job_body(name, claims=[{"name": "g", "resourceClaimTemplateName": "gpu"}])
    if max_exec is not None:
        body["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] = max_exec
    c.api.add(JOBS, body)
    c.settle()


def _finish(c: Cluster, name: str) -> None:
    done = {"status": {"conditions": [{"type": "Complete", "status": "True", "message": "done"}]}}
    c.api.change(JOBS, "ns", name, done)
    c.settle()


def _starts(c: Cluster) -> dict[str, tuple[str | None, str]]:
    entries = ReconcilerPending(c.reconciler).pending("cq") or []
    return {e.name.split("-")[1]: (e.estimated_start, e.no_estimate) for e in entries}


def test_the_observed_median_run_time_dates_the_queue() -> None:
    c = Cluster()
    c.queues(gpus=1)
    _submit(c, "a")
    c.now = T0 + 100
    _finish(c, "a")  # ran 100 s: the ClusterQueue's observed median
    _submit(c, "b")  # admitted at T0+100
    c.now = T0 + 101
    _submit(c, "c")
    c.now = T0 + 102
    _submit(c, "d")
    c.now = T0 + 130
    assert _starts(c) == {"c": (rfc3339(T0 + 200), ""), "d": (rfc3339(T0 + 300), "")}
    (sample,) = state_snapshot(c.reconciler).cluster_queues
    assert dict(sample.estimated_wait) == {"head": 70.0, "last_estimated": 170.0}
    assert sample.without_estimate == 0
    metrics = Metrics()
    metrics.state_source = lambda: state_snapshot(c.reconciler)
    text = metrics.render().decode()
    assert (
        'dra_quota_pending_workloads_estimated_wait_seconds{cluster_queue="cq",workload="head"} 70.0' in text
    )
    assert 'dra_quota_pending_workloads_without_estimate{cluster_queue="cq"} 0.0' in text
    # The visibility API's item carries it, beside Kueue's fields.
    entries = ReconcilerPending(c.reconciler).pending("cq") or []
    first = cluster_queue_summary(entries, Page(), "v1beta2")["items"][0]
    assert first["draQuotaEstimatedStart"] == rfc3339(T0 + 200)
    assert first["positionInClusterQueue"] == 0
    assert "draQuotaNoEstimate" not in first
    # Older than the median: b is taken to end now.
    c.now = T0 + 250
    assert _starts(c)["c"] == (rfc3339(T0 + 250), "")


def test_maximum_execution_times_date_it_without_any_finished_workload() -> None:
    c = Cluster()
    c.queues(gpus=1)
    _submit(c, "a", max_exec="50")
    c.now = T0 + 1  # b is created before c: ahead of it in the queue
    _submit(c, "b", max_exec="40")
    c.now = T0 + 2
    _submit(c, "c")
    c.now = T0 + 10
    starts = _starts(c)
    assert starts["b"] == (rfc3339(T0 + 50), "")
    # c runs for ever as far as is known; it starts after b's 40 s.
    assert starts["c"] == (rfc3339(T0 + 90), "")


def test_without_run_times_it_says_why_there_is_no_estimate() -> None:
    c = Cluster()
    c.queues(gpus=1)
    _submit(c, "a")
    _submit(c, "b")
    assert _starts(c) == {"b": (None, HELD_FOR_EVER)}
    (sample,) = state_snapshot(c.reconciler).cluster_queues
    assert dict(sample.estimated_wait) == {}
    assert sample.without_estimate == 1
    entries = ReconcilerPending(c.reconciler).pending("cq") or []
    item = cluster_queue_summary(entries, Page(), "v1beta2")["items"][0]
    assert item["draQuotaNoEstimate"] == HELD_FOR_EVER
    assert "draQuotaEstimatedStart" not in item
