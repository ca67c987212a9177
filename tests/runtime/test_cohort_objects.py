"""Cohort objects through the reconciler: the watch feeds the cohort tree, quota it holds admits."""

from __future__ import annotations

from reconciler.api import ClusterQueue, Cohort
from reconciler.api.resources import CLUSTER_QUEUES, COHORTS, WORKLOADS
from reconciler.runtime.loop.reconciler import WATCHED
from tests.support.builders import cluster_queue_body
from tests.support.priority_jobs import queued
from tests.support.reconciler_harness import GPU, Harness, decode, gpu_job, of, queues


def cohort(h: Harness, gpus: int | str) -> Cohort:
    quota = {"name": GPU, "nominalQuota": gpus}
    spec = {
        "resourceGroups": [{"coveredResources": [GPU], "flavors": [{"name": "t4", "resources": [quota]}]}]
    }
    result: Cohort = decode(
        {"metadata": {"name": "org", "resourceVersion": h.next_rv()}, "spec": spec}, Cohort
    )
    return result


def test_a_cohorts_quota_admits_a_member_without_quota_of_its_own() -> None:
    assert COHORTS in WATCHED
    h = Harness()
    queues(h, gpus=0)
    body = cluster_queue_body("cq", [("t4", {GPU: 0})], cohort="org")
    h.event("MODIFIED", CLUSTER_QUEUES, decode(body, ClusterQueue))
    h.sync_all()
    workload = queued(h, gpu_job(h, "job"))
    h.event("ADDED", WORKLOADS, workload)
    assert of(h.take(), "admit") == []
    h.event("ADDED", COHORTS, cohort(h, 1))
    (admit,) = of(h.take(), "admit")
    assert admit.name == workload.metadata.name


def test_a_cohort_that_cannot_be_used_lends_nothing_and_the_rest_keeps_serving() -> None:
    h = Harness()
    queues(h, gpus=0)
    body = cluster_queue_body("cq", [("t4", {GPU: 0})], cohort="org")
    h.event("MODIFIED", CLUSTER_QUEUES, decode(body, ClusterQueue))
    h.sync_all()
    h.event("ADDED", COHORTS, cohort(h, "lots"))
    workload = queued(h, gpu_job(h, "job"))
    h.event("ADDED", WORKLOADS, workload)
    assert of(h.take(), "admit") == []
    h.event("MODIFIED", COHORTS, cohort(h, 1))  # fixed
    assert len(of(h.take(), "admit")) == 1
