"""Beyond Kueue: a managed parent's children running more pods than its Workload was charged
for (a JobSet's Job whose parallelism was raised past the webhook, or given pods of its own)
are found by counting the Workload's running pods against its pod sets; the Workload is evicted
(reason PodsExceedCharge), the JobSet stopped and requeued after Kueue's backoff, and the Events
name the child."""

from __future__ import annotations

import copy
from typing import Any

from reconciler.api.resources import JOBSETS, PODS
from reconciler.integrations import PODSET_LABEL
from tests.support.jobset_queues import TWO, child_job, condition, jobset_cluster, queues, ready_pod
from tests.support.jobsets import jobset_body
from tests.support.memory_api import merge
from tests.support.memory_cluster import T0, Cluster


def _started(c: Cluster) -> None:
    queues(c, gpus=3)
    c.api.add(JOBSETS, jobset_body("js", TWO))
    c.settle()
    assert c.jobset("js")["spec"]["suspend"] is False
    child_job(c, "js", "leader", suspend=False)
    child_job(c, "js", "workers", suspend=False)
    ready_pod(c, "js-leader-0", "leader", "leader-pod")
    ready_pod(c, "js-workers-0", "workers", "worker-pod-0")
    ready_pod(c, "js-workers-0", "workers", "worker-pod-1")
    active = [{"name": "leader", "active": 1}, {"name": "workers", "active": 2}]
    c.api.change(JOBSETS, "ns", "js", {"status": {"replicatedJobsStatus": active}})
    c.settle()


def _pod_like(c: Cluster, model: str, name: str, change: dict[str, Any]) -> None:
    """A pod of the same Job as `model`, as it is first seen (ended, or being deleted)."""
    body = copy.deepcopy(c.api.get(PODS, "ns", model))
    body["metadata"] = {k: body["metadata"][k] for k in ("namespace", "labels", "ownerReferences")}
    body["metadata"]["name"] = name
    c.api.add(PODS, merge(body, change))


def test_a_child_running_more_pods_than_charged_stops_and_requeues_its_parent() -> None:
    c = jobset_cluster()
    _started(c)
    assert condition(c.workloads()["JobSet/js"], "Evicted") is None
    # A pod that ended and one being deleted hold nothing for long: not an excess.
    _pod_like(c, "worker-pod-0", "worker-pod-done", {"status": {"phase": "Succeeded"}})
    _pod_like(
        c, "worker-pod-0", "worker-pod-going", {"metadata": {"deletionTimestamp": "2026-12-07T00:00:00Z"}}
    )
    c.settle()
    assert condition(c.workloads()["JobSet/js"], "Evicted") is None
    # The workers' Job raised from 2 pods to 3 (parallelism edited while the webhook was away).
    ready_pod(c, "js-workers-0", "workers", "worker-pod-2")
    c.settle()
    workload = c.workloads()["JobSet/js"]
    evicted = condition(workload, "Evicted")
    assert evicted is not None
    assert (evicted["status"], evicted["reason"]) == ("True", "PodsExceedCharge")
    name = workload["metadata"]["name"]
    assert evicted["message"] == (
        f"3 pods run for pod set workers of Workload ns/{name}, which is admitted for 2 (by "
        "Job/js-workers-0): stopped and requeued; a managed job's children may not run more than "
        "its Workload was charged for"
    )
    # Stopped: the JobSet suspended, with an Event naming the child; requeued once stopped.
    assert c.jobset("js")["spec"]["suspend"] is True
    stopped = [
        e["message"]
        for e in c.api.events
        if e["reason"] == "Stopped" and e["involvedObject"]["kind"] == "JobSet"
    ]
    assert stopped == [evicted["message"]]
    assert "EvictedDueToPodsExceedCharge" in c.api.reasons("Workload", name)
    # Its quota is kept while its Jobs still run; once they no longer do, it is requeued and
    # admitted again (the JobSet controller makes its Jobs afresh from its own template).
    assert c.used_gpus() == 3
    for pod in (
        "leader-pod",
        "worker-pod-0",
        "worker-pod-1",
        "worker-pod-2",
        "worker-pod-going",
        "worker-pod-done",
    ):
        c.api.delete(PODS, "ns", pod)
    c.api.change(JOBSETS, "ns", "js", {"status": {"replicatedJobsStatus": []}})
    c.settle()
    # Requeued after Kueue's backoff (60 s at first), not at once: the parent's controller may
    # keep the edited child, and an immediate readmission would run it again.
    assert c.used_gpus() == 0
    requeue = c.workloads()["JobSet/js"]["status"]["requeueState"]
    assert requeue == {"count": 1, "requeueAt": "2026-01-01T00:01:00Z"}
    c.tick(T0 + 30)
    assert c.jobset("js")["spec"]["suspend"] is True
    c.tick(T0 + 61)
    assert c.jobset("js")["spec"]["suspend"] is False
    again = condition(c.workloads()["JobSet/js"], "Evicted")
    assert again is not None
    assert (again["status"], again["reason"]) == ("False", "QuotaReserved")


def test_pods_without_a_pod_set_label_count_against_the_whole_charge() -> None:
    c = jobset_cluster()
    _started(c)
    pod = c.api.get(PODS, "ns", "leader-pod")
    extra = {
        "metadata": {
            "name": "extra",
            "namespace": "ns",
            "ownerReferences": pod["metadata"]["ownerReferences"],
        },
        "spec": pod["spec"],
        "status": {"phase": "Pending"},
    }
    assert PODSET_LABEL not in extra["metadata"]
    c.api.add(PODS, extra)
    c.settle()
    evicted = condition(c.workloads()["JobSet/js"], "Evicted")
    assert evicted is not None
    assert evicted["reason"] == "PodsExceedCharge"
    assert evicted["message"].startswith("4 pods run for its pod sets of Workload ")
    assert "(by Job/js-leader-0, Job/js-workers-0)" in evicted["message"]
