"""The `priority_class` label of Kueue's workload counters and wait-time histograms."""

from __future__ import annotations

import msgspec

from reconciler.api import ClusterQueue, Cohort, Workload
from reconciler.api.resources import CLUSTER_QUEUES, COHORTS, WORKLOADS
from reconciler.core.primitives.priority import priority_class_name
from reconciler.runtime.shared.writer import WriteDone
from tests.support.builders import cluster_queue_body
from tests.support.leader_metrics import leader_harness, with_creation
from tests.support.metrics import scrape, value
from tests.support.priority_jobs import add_class, labelled, queued
from tests.support.reconciler_harness import GPU, apply_patch, decode, of, queues


def test_admission_series_carry_the_workloads_priority_class() -> None:
    h, metrics = leader_harness(wait_seconds=3.0)
    queues(h)
    add_class(h, "high", 1000)
    h.sync_all()
    workload = with_creation(queued(h, labelled(h, "urgent", "high")), "2026-01-01T00:00:00Z")
    assert priority_class_name(workload) == "high"
    h.event("ADDED", WORKLOADS, workload)
    (admit,) = of(h.take(), "admit")
    admitted = apply_patch(h, workload, admit)
    h.reconciler.handle(WriteDone(admit, body=msgspec.json.encode(admitted)))
    _types, samples = scrape(metrics)
    labels = {"cluster_queue": "cq", "priority_class": "high", "replica_role": "leader"}
    assert value(samples, "kueue_admitted_workloads_total", **labels) == 1
    assert value(samples, "kueue_quota_reserved_workloads_total", **labels) == 1
    assert value(samples, "kueue_admission_wait_time_seconds_count", **labels) == 1
    assert value(samples, "kueue_quota_reserved_wait_time_seconds_sum", **labels) == 3.0


def test_no_class_is_the_empty_label() -> None:
    assert priority_class_name(None) == ""
    assert priority_class_name(msgspec.convert({"metadata": {"name": "w"}}, Workload)) == ""


def test_an_admission_counts_in_every_cohort_above_its_cluster_queue() -> None:
    h, metrics = leader_harness()
    queues(h)
    add_class(h, "high", 1000)
    body = cluster_queue_body("cq", [("t4", {GPU: 1})], cohort="team")
    h.event("MODIFIED", CLUSTER_QUEUES, decode(body, ClusterQueue))
    h.event("ADDED", COHORTS, decode({"metadata": {"name": "team"}, "spec": {"parentName": "org"}}, Cohort))
    h.sync_all()
    workload = queued(h, labelled(h, "urgent", "high"))
    h.event("ADDED", WORKLOADS, workload)
    (admit,) = of(h.take(), "admit")
    h.reconciler.handle(WriteDone(admit, body=msgspec.json.encode(apply_patch(h, workload, admit))))
    _types, samples = scrape(metrics)
    for cohort in ("org", "team"):
        labels = {"cohort": cohort, "priority_class": "high", "replica_role": "leader"}
        assert value(samples, "kueue_cohort_subtree_admitted_workloads_total", **labels) == 1
