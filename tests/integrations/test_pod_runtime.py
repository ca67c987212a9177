"""Plain pods (framework pod) through the runtime with the in-memory API (finalizers honoured):
a pod stored by the pod webhook (gated, managed, Kueue's finalizer) gets a Workload charged
through deviceClassMappings, is admitted, ungated with its flavor's node labels and tolerations
in one write, runs, succeeds, and its Workload finishes and its finalizer goes; a pod that does
not fit stays gated with Kueue's pending message until the quota comes back; a stopped pod is
deleted (pod groups: test_podgroup_runtime.py)."""

from __future__ import annotations

from reconciler.api.resources import JOBS, PODS, WORKLOADS
from reconciler.integrations import PODSET_LABEL
from reconciler.integrations.pods.pod import ADMISSION_GATE, POD_FINALIZER, TOPOLOGY_GATE
from reconciler.runtime.shared.watched import POD_JOBS_HANDLER
from tests.support.builders import job_body
from tests.support.memory_cluster import GPU
from tests.support.pod_queues import TAINT, condition, gates, pod_cluster, queues
from tests.support.pods import pod_body, stored_pod


def test_a_gated_pod_is_admitted_ungated_on_its_flavor_runs_and_finishes() -> None:
    c = pod_cluster()
    queues(c, gpus=1)
    c.api.add(PODS, stored_pod(pod_body("p1")))
    assert gates(c.pod("p1")) == [ADMISSION_GATE, TOPOLOGY_GATE]
    c.settle()
    workload = c.workloads()["Pod/p1"]
    assert [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]] == [("main", 1)]
    (assignment,) = workload["status"]["admission"]["podSetAssignments"]
    assert assignment["resourceUsage"] == {"cpu": "1", GPU: "1"}  # the claim's GPU, mapped
    assert c.used_gpus() == 1
    # Started in one write: the gate gone, the flavor's node labels and tolerations in.
    pod = c.pod("p1")
    assert gates(pod) == []
    assert pod["spec"]["nodeSelector"] == {"gpu": "t4"}
    assert pod["spec"]["tolerations"] == [TAINT]
    assert pod["metadata"]["labels"][PODSET_LABEL] == "main"
    assert pod["metadata"]["finalizers"] == [POD_FINALIZER]
    assert c.api.reasons("Pod", "p1") == ["CreatedWorkload", "Started"]
    starts = [a for a in c.settle() if a.purpose == "job-start"]
    assert starts == []  # written once
    # Ready: PodsReady True.
    ready = [{"type": "Ready", "status": "True"}]
    c.api.change(PODS, "ns", "p1", {"status": {"phase": "Running", "conditions": ready}})
    c.settle()
    pods_ready = condition(c.workloads()["Pod/p1"], "PodsReady")
    assert pods_ready is not None
    assert pods_ready["status"] == "True"
    # Succeeded: the Workload finishes, the quota returns, the finalizer goes.
    c.api.change(PODS, "ns", "p1", {"status": {"phase": "Succeeded", "message": "done"}})
    c.settle()
    finished = condition(c.workloads()["Pod/p1"], "Finished")
    assert finished is not None
    assert (finished["status"], finished["reason"], finished["message"]) == ("True", "Succeeded", "done")
    assert c.used_gpus() == 0
    assert c.pod("p1")["metadata"]["finalizers"] == []
    assert c.api.reasons("Pod", "p1")[-1] == "FinishedWorkload"


def test_a_pod_that_does_not_fit_stays_gated_with_kueues_message_until_quota_returns() -> None:
    c = pod_cluster()
    queues(c, gpus=1)
    c.api.add(PODS, stored_pod(pod_body("p1")))
    c.settle()
    c.api.add(PODS, stored_pod(pod_body("p2")))
    c.settle()
    waiting = c.workloads()["Pod/p2"]
    reserved = condition(waiting, "QuotaReserved")
    assert reserved is not None
    assert (reserved["status"], reserved["reason"]) == ("False", "Pending")
    assert reserved["message"] == (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
        "in flavor t4, 1 more needed"
    )
    assert gates(c.pod("p2")) == [ADMISSION_GATE, TOPOLOGY_GATE]
    assert "nodeSelector" not in c.pod("p2")["spec"]
    # The first fails: its quota returns and the second is admitted and ungated.
    c.api.change(PODS, "ns", "p1", {"status": {"phase": "Failed"}})
    c.settle()
    failed = condition(c.workloads()["Pod/p1"], "Finished")
    assert failed is not None
    assert failed["reason"] == "Failed"
    assert gates(c.pod("p2")) == []
    assert c.pod("p2")["spec"]["nodeSelector"] == {"gpu": "t4"}


def test_a_deactivated_pods_workload_deletes_the_pod_and_lets_it_go() -> None:
    c = pod_cluster()
    queues(c, gpus=1)
    c.api.add(PODS, stored_pod(pod_body("p1")))
    c.settle()
    c.api.change(PODS, "ns", "p1", {"status": {"phase": "Running"}})
    c.settle()
    name = c.workloads()["Pod/p1"]["metadata"]["name"]
    c.api.change(WORKLOADS, "ns", name, {"spec": {"active": False}})
    performed = c.settle()
    # Kueue stops a pod by deleting it (once): the finalizer is released and the pod is gone.
    assert [a.purpose for a in performed if a.purpose.startswith("job-")] == ["job-delete", "job-release"]
    assert ("pods", "ns", "p1") not in c.api.objects
    assert c.api.reasons("Pod", "p1") == ["CreatedWorkload", "Started", "Stopped"]
    assert c.used_gpus() == 0


def test_a_running_pod_deleted_by_its_user_lets_go_of_its_finalizer_and_its_workload_finishes() -> None:
    c = pod_cluster()
    queues(c, gpus=1)
    body = stored_pod(pod_body("p1"))
    body["metadata"]["finalizers"].insert(0, "example.com/keep")  # someone else's: it stays terminating
    c.api.add(PODS, body)
    c.settle()
    c.api.change(PODS, "ns", "p1", {"status": {"phase": "Running"}})
    c.settle()
    c.api.delete(PODS, "ns", "p1")
    c.settle()
    assert c.pod("p1")["metadata"]["finalizers"] == ["example.com/keep"]
    finished = condition(c.workloads()["Pod/p1"], "Finished")
    assert finished is not None
    assert (finished["reason"], finished["message"]) == (
        "OwnerNotFound",
        "The workload's owner no longer exists",
    )
    assert c.used_gpus() == 0


def test_a_gated_pod_whose_workload_is_deleted_is_deleted_too() -> None:
    c = pod_cluster()
    queues(c, gpus=0)
    c.api.add(PODS, stored_pod(pod_body("p1")))
    c.settle()
    name = c.workloads()["Pod/p1"]["metadata"]["name"]
    c.api.delete(WORKLOADS, "ns", name)
    c.settle()
    assert ("pods", "ns", "p1") not in c.api.objects
    assert c.workloads() == {}
    assert c.api.reasons("Pod", "p1") == ["CreatedWorkload", "Stopped"]


def test_an_unmanaged_pod_gets_no_workload() -> None:
    c = pod_cluster()
    queues(c, gpus=1)
    c.api.add(PODS, stored_pod(pod_body("plain", queue=None)))
    c.settle()
    assert c.workloads() == {}
    assert gates(c.pod("plain")) == []


def test_with_pods_on_pods_are_watched_once_and_a_jobs_pods_still_count_for_pods_ready() -> None:
    rows = [row for row in pod_cluster().reconciler.watched_kinds if row.resource == PODS]
    assert [(row.handler, row.label_selector) for row in rows] == [(POD_JOBS_HANDLER, None)]
    c = pod_cluster()
    queues(c, gpus=1)
    c.api.add(JOBS, job_body("j", requests={"cpu": "1"}))
    c.settle()
    job = c.api.get(JOBS, "ns", "j")
    assert job["spec"]["suspend"] is False
    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "j",
        "uid": job["metadata"]["uid"],
        "controller": True,
    }
    body = pod_body("j-abc", queue=None, claim_template=None)
    body["metadata"] |= {"labels": {PODSET_LABEL: "main"}, "ownerReferences": [owner]}
    body["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    c.api.add(PODS, body)
    c.settle()
    assert "Pod/j-abc" not in c.workloads()  # a Job's pod is not a job of its own
    ready = condition(c.workloads()["Job/j"], "PodsReady")
    assert ready is not None
    assert ready["status"] == "True"
