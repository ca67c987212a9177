"""Kueue's eviction series beyond the plain count, driven end to end over the in-memory API:
the once-per-reason counter, PodsReady-to-eviction time and the eviction latency (the time from
Evicted=True until the quota reservation ends), each at the moment Kueue v0.18.1 observes it; and
the job-to-Workload creation latency."""

from __future__ import annotations

import pytest

from reconciler.api.resources import JOBS
from reconciler.observability.metrics import Metrics
from tests.support.builders import job_body
from tests.support.memory_cluster import T0, Cluster, admitted, condition
from tests.support.metrics import Samples, scrape, value

ROLE = {"replica_role": "leader"}
STOPPED = {"cluster_queue": "cq", "reason": "ClusterQueueStopped", **ROLE}


def running_cluster() -> tuple[Cluster, Metrics]:
    """Job a admitted at T0, its pod ready at T0 + 10 (PodsReady True)."""
    c = Cluster()
    metrics = Metrics("leader", wall_clock=lambda: c.now)
    c.reconciler.metrics = metrics
    c.queues(gpus=1)
    c.submit("a")
    assert admitted(c, "a")
    c.now = T0 + 10
    c.api.change(JOBS, "ns", "a", {"status": {"ready": 1, "active": 1}})
    c.settle()
    assert (condition(c.workload("a"), "PodsReady") or ("",))[0] == "True"
    return c, metrics


def samples(metrics: Metrics) -> Samples:
    return scrape(metrics)[1]


def test_eviction_of_a_ready_workload_observes_its_ready_time_and_once_counter() -> None:
    c, metrics = running_cluster()
    c.now = T0 + 40
    c.stop_policy("HoldAndDrain")
    assert (condition(c.workload("a"), "Evicted") or ("",))[:2] == ("True", "ClusterQueueStopped")
    got = samples(metrics)
    cause = {**STOPPED, "underlying_cause": ""}
    # Ready at T0 + 10, evicted at T0 + 40: 30 s, in the 40 s bucket and not the 20 s one.
    name = "kueue_pods_ready_to_evicted_time_seconds"
    assert value(got, f"{name}_count", **cause) == 1
    assert value(got, f"{name}_sum", **cause) == pytest.approx(30.0)
    assert value(got, f"{name}_bucket", le="20.0", **cause) == 0
    assert value(got, f"{name}_bucket", le="40.0", **cause) == 1
    assert value(got, "kueue_evicted_workloads_once_total", priority_class="", **cause) == 1


def test_the_latency_is_observed_when_the_reservation_ends_not_at_the_eviction() -> None:
    c, metrics = running_cluster()
    c.now = T0 + 40
    c.stop_policy("HoldAndDrain")
    name = "kueue_workload_eviction_latency_seconds"
    # Its job still runs: the reservation is kept, nothing observed yet.
    assert c.workload("a")["status"].get("admission") is not None
    assert value(samples(metrics), f"{name}_count", **STOPPED) is None
    c.now = T0 + 47
    c.api.change(JOBS, "ns", "a", {"status": {"ready": 0, "active": 0}})
    c.settle()
    assert c.workload("a")["status"].get("admission") is None
    got = samples(metrics)
    assert value(got, f"{name}_count", **STOPPED) == 1
    assert value(got, f"{name}_sum", **STOPPED) == pytest.approx(7.0)


def test_a_second_eviction_for_the_same_reason_is_not_counted_once_again() -> None:
    c, metrics = running_cluster()
    c.now = T0 + 40
    c.stop_policy("HoldAndDrain")
    c.api.change(JOBS, "ns", "a", {"status": {"ready": 0, "active": 0}})
    c.settle()
    c.now = T0 + 50
    c.stop_policy("None")
    assert admitted(c, "a")
    c.api.change(JOBS, "ns", "a", {"status": {"ready": 1, "active": 1}})
    c.settle()
    c.now = T0 + 60
    c.stop_policy("HoldAndDrain")
    got = samples(metrics)
    labels = {**STOPPED, "underlying_cause": "", "priority_class": ""}
    assert value(got, "kueue_evicted_workloads_total", **labels) == 2
    assert value(got, "kueue_evicted_workloads_once_total", **labels) == 1


def test_a_created_workload_observes_the_time_since_its_job_was_created() -> None:
    c = Cluster()
    metrics = Metrics("leader", wall_clock=lambda: c.now)
    c.reconciler.metrics = metrics
    c.queues(gpus=2)
    body = job_body("a", claims=[{"name": "g", "resourceClaimTemplateName": "gpu"}])
    changed = job_body("b", claims=[{"name": "g", "resourceClaimTemplateName": "gpu"}])
    changed["metadata"]["generation"] = 2  # changed since its creation: not measured, as in Kueue
    c.api.add(JOBS, body)
    c.api.add(JOBS, changed)
    c.now = T0 + 2  # the Workloads are created two seconds after the Jobs
    c.settle()
    assert admitted(c, "a")
    assert admitted(c, "b")
    got = samples(metrics)
    labels = {"job_kind": "Job", **ROLE}
    assert value(got, "kueue_workload_creation_latency_seconds_count", **labels) == 1
    assert value(got, "kueue_workload_creation_latency_seconds_sum", **labels) == pytest.approx(2.0)
    assert value(got, "kueue_workload_creation_latency_seconds_bucket", le="1.28", **labels) == 0
    assert value(got, "kueue_workload_creation_latency_seconds_bucket", le="2.56", **labels) == 1
