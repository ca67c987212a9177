"""Fair sharing through the reconciler: status.fairSharing.weightedShare on ClusterQueues and
Cohort objects, written by the queue status writer, and Kueue's weighted-share gauges."""

from __future__ import annotations

import json
import math
from typing import Any

from reconciler.api import ClusterQueue, ClusterQueueStatus, Cohort, FairSharingStatus
from reconciler.api.resources import CLUSTER_QUEUES, COHORTS, WORKLOADS
from reconciler.config import parse_config
from reconciler.runtime.shared.patches import cluster_queue_status_patch, status_patch
from tests.support.builders import cluster_queue_body, t4_group
from tests.support.metrics import leader_metrics, scrape, value
from tests.support.priority_jobs import queued
from tests.support.reconciler_harness import CONFIG, GPU, Harness, decode, gpu_job, of, queues

FAIR = parse_config(
    {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "resources": {"deviceClassMappings": [{"name": GPU, "deviceClassNames": ["gpu.nvidia.com"]}]},
        "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]},
    }
)


def cohort(h: Harness, name: str, gpus: int, parent: str | None = None) -> Cohort:
    spec: dict[str, Any] = {"resourceGroups": t4_group({"name": GPU, "nominalQuota": gpus})}
    if parent:
        spec["parentName"] = parent
    result: Cohort = decode(
        {"metadata": {"name": name, "resourceVersion": h.next_rv()}, "spec": spec}, Cohort
    )
    return result


def tree(h: Harness) -> None:
    """org (4 GPUs) <- team <- cq (none of its own); one 1-GPU job admitted in cq."""
    queues(h, gpus=0)
    body = cluster_queue_body("cq", [("t4", {GPU: 0})], cohort="team")
    h.event("MODIFIED", CLUSTER_QUEUES, decode(body, ClusterQueue))
    h.event("ADDED", COHORTS, cohort(h, "org", 4))
    h.event("ADDED", COHORTS, cohort(h, "team", 0, parent="org"))
    h.sync_all()
    h.event("ADDED", WORKLOADS, queued(h, gpu_job(h, "job")))


def status_writes(h: Harness) -> list[Any]:
    """What a status tick writes after the batch."""
    actions = h.take()
    h.reconciler.flush_status()
    return actions + h.take()


def patches(actions: list[Any], purpose: str) -> dict[str, Any]:
    return {a.name: json.loads(a.patch)["status"] for a in of(actions, purpose)}


def test_weighted_shares_are_written_to_cluster_queues_and_cohorts() -> None:
    h = Harness(FAIR)
    tree(h)
    actions = status_writes(h)
    assert len(of(actions, "admit")) == 1
    # cq borrows 1 of the 4 org can lend: 250; so does team (its subtree quota is 0); org is the root.
    assert patches(actions, "cq-status")["cq"]["fairSharing"] == {"weightedShare": 250}
    assert patches(actions, "cohort-status") == {
        "org": {"fairSharing": {"weightedShare": 0}},
        "team": {"fairSharing": {"weightedShare": 250}},
    }
    (write,) = [a for a in of(actions, "cohort-status") if a.name == "team"]
    assert (write.resource, write.subresource) == (COHORTS, "status")


def test_nothing_is_written_with_fair_sharing_off() -> None:
    h = Harness(CONFIG)
    tree(h)
    actions = status_writes(h)
    assert "fairSharing" not in patches(actions, "cq-status")["cq"]
    assert of(actions, "cohort-status") == []


def test_a_status_shown_after_fair_sharing_was_turned_off_is_removed() -> None:
    shown = ClusterQueueStatus(fair_sharing=FairSharingStatus(weighted_share=7))
    assert "fairSharing" not in json.loads(status_patch(ClusterQueueStatus()))["status"]
    body = json.loads(cluster_queue_status_patch(ClusterQueueStatus(), shown))
    assert body["status"]["fairSharing"] is None


def test_weighted_share_gauges() -> None:
    h = Harness(FAIR)
    metrics = leader_metrics(h)
    tree(h)
    h.take()
    types, samples = scrape(metrics)
    assert types["kueue_cluster_queue_weighted_share"] == "gauge"
    cq = value(
        samples,
        "kueue_cluster_queue_weighted_share",
        cluster_queue="cq",
        cohort="team",
        replica_role="leader",
    )
    assert cq == 250
    assert value(samples, "kueue_cohort_weighted_share", cohort="team", replica_role="leader") == 250
    assert value(samples, "kueue_cohort_weighted_share", cohort="org", replica_role="leader") == 0


def test_weight_zero_borrowing_shows_nan_for_a_cluster_queue() -> None:
    h = Harness(FAIR)
    metrics = leader_metrics(h)
    tree(h)
    body = cluster_queue_body("cq", [("t4", {GPU: 0})], cohort="team")
    body["spec"]["fairSharing"] = {"weight": "0"}
    h.event("MODIFIED", CLUSTER_QUEUES, decode(body, ClusterQueue))
    actions = status_writes(h)
    assert patches(actions, "cq-status")["cq"]["fairSharing"] == {"weightedShare": 2**63 - 1}
    _types, samples = scrape(metrics)
    cq = value(
        samples,
        "kueue_cluster_queue_weighted_share",
        cluster_queue="cq",
        cohort="team",
        replica_role="leader",
    )
    assert cq is not None
    assert math.isnan(cq)


def test_the_gauges_are_left_out_with_fair_sharing_off() -> None:
    h = Harness(CONFIG)
    metrics = leader_metrics(h)
    tree(h)
    h.take()
    types, _samples = scrape(metrics)
    assert "kueue_cluster_queue_weighted_share" not in types
    assert "kueue_cohort_weighted_share" not in types
