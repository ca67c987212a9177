"""Cohort metrics: the cohort label on quota gauges, borrowing and lending limits (+Inf when unset)."""

from __future__ import annotations

import math

from reconciler.api import ClusterQueue
from reconciler.api.resources import CLUSTER_QUEUES
from tests.support.builders import cluster_queue_body
from tests.support.metrics import leader_metrics, scrape, value
from tests.support.reconciler_harness import GPU, Harness, decode, queues


def test_quota_gauges_carry_the_cohort_and_its_limits() -> None:
    h = Harness()
    metrics = leader_metrics(h)
    queues(h)
    body = cluster_queue_body(
        "cq", [("t4", {GPU: 2})], cohort="pool", limits={("t4", GPU): {"borrowingLimit": 1}}
    )
    h.event("MODIFIED", CLUSTER_QUEUES, decode(body, ClusterQueue))
    h.sync_all()
    types, samples = scrape(metrics)
    labels = {
        "cohort": "pool",
        "cluster_queue": "cq",
        "flavor": "t4",
        "resource": GPU,
        "replica_role": "leader",
    }
    assert types["kueue_cluster_queue_borrowing_limit"] == "gauge"
    assert value(samples, "kueue_cluster_queue_nominal_quota", **labels) == 2
    assert value(samples, "kueue_cluster_queue_borrowing_limit", **labels) == 1
    lending = value(samples, "kueue_cluster_queue_lending_limit", **labels)
    assert lending is not None
    assert math.isinf(lending)
