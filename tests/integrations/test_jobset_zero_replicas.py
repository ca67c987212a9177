"""A JobSet whose replicated job has `replicas: 0`, as Kueue v0.18.1 takes it: the pod set is
counted replicas x pods per replica, so it is 0 pods charged nothing (the Workload's pod set count
may be 0); the JobSet is admitted and started with the other replicated jobs charged as usual.
A JobSet of only such replicated jobs is admitted charging nothing (Kueue's too: the JobSet
controller then makes no Jobs)."""

from __future__ import annotations

from reconciler.api.resources import JOBSETS
from tests.support.jobset_queues import condition, jobset_cluster, queues
from tests.support.jobsets import jobset_body


def test_a_replicated_job_of_zero_replicas_is_a_pod_set_of_zero_pods_charged_nothing() -> None:
    c = jobset_cluster()
    queues(c, gpus=1)
    c.api.add(JOBSETS, jobset_body("js", [("leader", 1, 1, 1, "gpu-a"), ("workers", 0, 1, 1, "gpu-b")]))
    c.settle()
    workload = c.workloads()["JobSet/js"]
    assert [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]] == [
        ("leader", 1),
        ("workers", 0),
    ]
    admitted = condition(workload, "Admitted")
    assert admitted is not None
    assert admitted["status"] == "True"
    assert c.jobset("js")["spec"]["suspend"] is False
    assert c.used_gpus() == 1


def test_a_jobset_of_zero_replicas_only_is_admitted_charging_nothing() -> None:
    c = jobset_cluster()
    queues(c, gpus=1)
    c.api.add(JOBSETS, jobset_body("empty", [("workers", 0, 1, 1, "gpu-b")]))
    c.settle()
    workload = c.workloads()["JobSet/empty"]
    assert [ps["count"] for ps in workload["spec"]["podSets"]] == [0]
    admitted = condition(workload, "Admitted")
    assert admitted is not None
    assert admitted["status"] == "True"
    assert c.used_gpus() == 0
    # The quota it does not hold is there for the next one.
    c.api.add(JOBSETS, jobset_body("next", [("leader", 1, 1, 1, "gpu-a")]))
    c.settle()
    assert c.jobset("next")["spec"]["suspend"] is False
