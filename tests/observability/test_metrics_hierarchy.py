"""Kueue's scrape-time gauges of the cohort tree and of pending requests, and the preemption-skip
gauge, over the in-memory API: cluster_queue_info, cohort_info, cluster_queue_resource_pending,
cohort_subtree_quota, cohort_subtree_resource_reservations,
cohort_subtree_admitted_active_workloads and admission_cycle_preemption_skips."""

from __future__ import annotations

from typing import Any

from reconciler.api.resources import (
    CLUSTER_QUEUES,
    COHORTS,
    JOBS,
    LOCAL_QUEUES,
    NAMESPACES,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_FLAVORS,
)
from reconciler.observability.metrics import Metrics
from reconciler.runtime.loop.snapshot import state_snapshot
from tests.support.builders import cluster_queue_body, job_body
from tests.support.memory_cluster import GPU, Cluster, admitted, gpu_template
from tests.support.metrics import Samples, scrape, value

ROLE = {"replica_role": "leader"}


def cluster(queues: list[tuple[str, int, str | None, dict[str, Any]]]) -> tuple[Cluster, Metrics]:
    """ClusterQueues (name, GPUs, cohort, extra spec) each with a LocalQueue l<name> in ns."""
    c = Cluster()
    metrics = Metrics("leader")
    c.reconciler.metrics = metrics
    metrics.state_source = lambda: state_snapshot(c.reconciler)
    c.api.add(NAMESPACES, {"metadata": {"name": "ns", "labels": {"kubernetes.io/metadata.name": "ns"}}})
    c.api.add(RESOURCE_FLAVORS, {"metadata": {"name": "t4"}, "spec": {"nodeLabels": {"gpu": "t4"}}})
    for name, gpus, cohort, extra in queues:
        body = cluster_queue_body(name, [("t4", {GPU: gpus})], cohort=cohort)
        body["spec"].update(extra)
        c.api.add(CLUSTER_QUEUES, body)
        lq = {"metadata": {"name": f"l{name}", "namespace": "ns"}, "spec": {"clusterQueue": name}}
        c.api.add(LOCAL_QUEUES, lq)
    c.api.add(RESOURCE_CLAIM_TEMPLATES, gpu_template())
    c.api.add(RESOURCE_CLAIM_TEMPLATES, gpu_template("gpu2", count=2))
    c.api.sync()
    c.settle()
    return c, metrics


def job(c: Cluster, name: str, queue: str, template: str = "gpu") -> None:
    body = job_body(name, queue=queue, claims=[{"name": "g", "resourceClaimTemplateName": template}])
    c.api.add(JOBS, body)


def samples(metrics: Metrics) -> Samples:
    return scrape(metrics)[1]


def test_the_tree_gauges_name_each_place_and_sum_each_subtree() -> None:
    # child (a Cohort under root) holds cq (1 GPU) and other (2 GPUs, lends 1); solo has no cohort.
    lend_one = {"lendingLimit": 1}
    other = cluster_queue_body("other", [("t4", {GPU: 2})])["spec"]["resourceGroups"]
    other[0]["flavors"][0]["resources"][0].update(lend_one)
    c, metrics = cluster(
        [("cq", 1, "child", {}), ("other", 2, "child", {"resourceGroups": other}), ("solo", 1, None, {})]
    )
    c.api.add(COHORTS, {"metadata": {"name": "child"}, "spec": {"parentName": "root"}})
    for name in ("a", "b", "c"):
        job(c, name, "lcq")
        c.settle()
    assert admitted(c, "a")
    assert admitted(c, "b")  # borrowing the GPU other lends
    assert not admitted(c, "c")
    got = samples(metrics)
    info = "kueue_cluster_queue_info"
    assert value(got, info, cluster_queue="cq", parent_cohort="child", root_cohort="root", **ROLE) == 1
    assert value(got, info, cluster_queue="solo", parent_cohort="", root_cohort="", **ROLE) == 1
    cohort_info = "kueue_cohort_info"
    assert value(got, cohort_info, cohort="child", parent_cohort="root", root_cohort="root", **ROLE) == 1
    assert value(got, cohort_info, cohort="root", parent_cohort="", root_cohort="root", **ROLE) == 1
    pending = "kueue_cluster_queue_resource_pending"
    assert value(got, pending, cluster_queue="cq", resource=GPU, **ROLE) == 1  # c waits
    assert value(got, pending, cluster_queue="other", resource=GPU, **ROLE) == 0
    fr = {"flavor": "t4", "resource": GPU, **ROLE}
    # child: cq's 1 and the 1 other lends; root: what child lends it (all of it).
    assert value(got, "kueue_cohort_subtree_quota", cohort="child", **fr) == 2
    assert value(got, "kueue_cohort_subtree_quota", cohort="root", **fr) == 2
    reservations = "kueue_cohort_subtree_resource_reservations"
    assert value(got, reservations, cohort="child", **fr) == 2
    assert value(got, reservations, cohort="root", **fr) == 2
    active = "kueue_cohort_subtree_admitted_active_workloads"
    assert value(got, active, cohort="child", **ROLE) == 2
    assert value(got, active, cohort="root", **ROLE) == 2


def test_a_preemptor_whose_targets_another_claimed_in_the_cycle_is_a_skip() -> None:
    reclaim = {"preemption": {"reclaimWithinCohort": "Any"}}
    c, metrics = cluster([("x", 1, "pool", reclaim), ("y", 1, "pool", reclaim), ("z", 0, "pool", {})])
    job(c, "big", "lz", template="gpu2")  # z borrows x's and y's GPUs
    c.settle()
    assert admitted(c, "big")
    assert not [k for k in samples(metrics) if k[0] == "kueue_admission_cycle_preemption_skips"]
    # Both reclaim their GPU in the same cycle; both would evict big: the second is skipped.
    job(c, "p", "lx")
    job(c, "q", "ly")
    c.settle()
    skips = {
        dict(labels)["cluster_queue"]: v
        for (name, labels), v in samples(metrics).items()
        if name == "kueue_admission_cycle_preemption_skips"
    }
    assert list(skips.values()) == [1]
    assert set(skips) <= {"x", "y"}
