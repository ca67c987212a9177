"""The eviction and PodsReady hooks, driven through the reconciler's waitForPodsReady flow."""

from __future__ import annotations

import pytest
from reconciler.api.resources import JOBS
from reconciler.api.resources import PODS
from reconciler.observability.metrics import Metrics

from tests.support.metrics import scrape
from tests.support.metrics import value
from tests.support.pods_ready_harness import T0
from tests.support.pods_ready_harness import Clocked
from tests.support.pods_ready_harness import admitted_job
from tests.support.pods_ready_harness import ready_pod
from tests.support.pods_ready_harness import started
from tests.support.reconciler_harness import of
from tests.support.reconciler_harness import queues


def clocked_with_metrics() -> tuple[Clocked, Metrics]:
    h = Clocked()
    metrics = Metrics("leader", wall_clock=lambda: h.now)
    h.reconciler.metrics = metrics
    queues(h)
    h.sync_all()
    return h, metrics


def test_a_written_pods_ready_timeout_eviction_is_counted_with_its_cause() -> None:
    h, metrics = clocked_with_metrics()
    job, workload, _ = admitted_job(h, "a")
    h.event("MODIFIED", JOBS, started(h, job))
    h.take()
    (evict,) = of(h.tick(T0 + 61), "evict")
    labels = {
        "cluster_queue": "cq",
        "reason": "PodsReadyTimeout",
        "underlying_cause": "WaitForStart",
        "priority_class": "",
        "replica_role": "leader",
    }
    # Counted when the eviction is written, not when it is decided.
    assert value(scrape(metrics)[1], "kueue_evicted_workloads_total", **labels) is None
    h.land(evict, workload)
    assert value(scrape(metrics)[1], "kueue_evicted_workloads_total", **labels) == 1


def test_pods_ready_written_true_observes_the_time_since_admission() -> None:
    h, metrics = clocked_with_metrics()
    job, workload, _ = admitted_job(h, "a")  # admitted at T0
    h.event("MODIFIED", JOBS, started(h, job))
    h.take()
    h.now = T0 + 30
    h.event("ADDED", PODS, ready_pod("a"))
    (ready,) = of(h.take(), "pods-ready")
    h.land(ready, workload)
    samples = scrape(metrics)[1]
    labels = {"cluster_queue": "cq", "priority_class": "", "replica_role": "leader"}
    assert value(samples, "kueue_admitted_until_ready_wait_time_seconds_count", **labels) == 1
    assert value(samples, "kueue_admitted_until_ready_wait_time_seconds_sum", **labels) == pytest.approx(30.0)
    assert value(samples, "kueue_admitted_until_ready_wait_time_seconds_bucket", le="20.0", **labels) == 0
    assert value(samples, "kueue_admitted_until_ready_wait_time_seconds_bucket", le="40.0", **labels) == 1
