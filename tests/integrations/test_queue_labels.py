"""Kueue's AssignQueueLabelsForPods (beta, on by default in v0.18.1): the pods of an admitted
Workload are labelled with its LocalQueue's and ClusterQueue's names (seen in the conformance
scenarios with JobSet's webhooks, where Kueue's started JobSets carry both labels)."""

from __future__ import annotations

from typing import Any

from reconciler.integrations.decide import (
    CLUSTER_QUEUE_POD_LABEL,
    LOCAL_QUEUE_POD_LABEL,
    queue_pod_labels,
    start_pod_labels,
)
from reconciler.integrations.prebuilt import MULTIKUEUE_ORIGIN_LABEL
from tests.support.builders import workload_of


def _workload(cluster_queue: str | None, labels: dict[str, str] | None = None) -> Any:
    body: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "wl", "namespace": "ns", "labels": labels or {}},
        "spec": {"queueName": "lq", "podSets": []},
    }
    if cluster_queue is not None:
        body["status"] = {"admission": {"clusterQueue": cluster_queue, "podSetAssignments": []}}
    return workload_of(body)


def test_an_admitted_workloads_pods_are_labelled_with_its_queues() -> None:
    assert queue_pod_labels(_workload("cq-a")) == {
        LOCAL_QUEUE_POD_LABEL: "lq",
        CLUSTER_QUEUE_POD_LABEL: "cq-a",
    }
    assert LOCAL_QUEUE_POD_LABEL == "kueue.x-k8s.io/local-queue-name"
    assert CLUSTER_QUEUE_POD_LABEL == "kueue.x-k8s.io/cluster-queue-name"


def test_a_cluster_queue_name_that_is_no_label_value_is_left_out_as_kueue_leaves_it() -> None:
    # A ClusterQueue's name is a DNS subdomain: dots, or more than 63 characters, make no label.
    assert queue_pod_labels(_workload("gpu.pool")) == {LOCAL_QUEUE_POD_LABEL: "lq"}
    assert queue_pod_labels(_workload("q" * 64)) == {LOCAL_QUEUE_POD_LABEL: "lq"}
    assert queue_pod_labels(_workload("q" * 63))[CLUSTER_QUEUE_POD_LABEL] == "q" * 63


def test_a_managers_workload_gets_the_worker_pod_label_and_the_queue_labels() -> None:
    labels = start_pod_labels(_workload("cq", {MULTIKUEUE_ORIGIN_LABEL: "manager"}))
    assert labels[LOCAL_QUEUE_POD_LABEL] == "lq"
    assert labels[CLUSTER_QUEUE_POD_LABEL] == "cq"
    assert len(labels) == 3  # and the worker pod label
