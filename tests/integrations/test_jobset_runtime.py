"""JobSets through the runtime with the in-memory API: two replicated jobs asking for GPUs
through two ResourceClaimTemplates admitted as one Workload (charged per pod set through
deviceClassMappings) while a second JobSet waits with Kueue's message; the JobSet's own Jobs
never admitted on their own; a PodsReady timeout that suspends it and restores its templates;
and the quota back for the waiting JobSet when the first completes."""

from __future__ import annotations

from typing import Any

from reconciler.api.resources import JOBS, JOBSETS
from reconciler.integrations import PODSET_LABEL
from tests.support.jobset_queues import TWO, child_job, condition, jobset_cluster, queues, ready_pod
from tests.support.jobsets import jobset_body
from tests.support.memory_cluster import GPU, T0

# Kueue's AssignQueueLabelsForPods labels on an admitted Workload's pods (LocalQueue lq, ClusterQueue cq).
QUEUE_LABELS = {"kueue.x-k8s.io/local-queue-name": "lq", "kueue.x-k8s.io/cluster-queue-name": "cq"}


def pod_templates(jobset: dict[str, Any]) -> dict[str, Any]:
    return {rj["name"]: rj["template"]["spec"]["template"] for rj in jobset["spec"]["replicatedJobs"]}


def test_two_jobsets_one_admitted_as_one_workload_the_other_waits_then_runs() -> None:
    c = jobset_cluster()
    queues(c, gpus=3)
    c.api.add(JOBSETS, jobset_body("first", TWO, suspend=False))
    c.settle()
    workloads = c.workloads()
    first = workloads["JobSet/first"]
    assert [(ps["name"], ps["count"]) for ps in first["spec"]["podSets"]] == [("leader", 1), ("workers", 2)]
    # Charged per pod set through deviceClassMappings: 1 GPU for the leader, 2 for the workers.
    usage = {a["name"]: a["resourceUsage"] for a in first["status"]["admission"]["podSetAssignments"]}
    assert (usage["leader"][GPU], usage["workers"][GPU]) == ("1", "2")
    assert c.used_gpus() == 3
    # Started in one write: unsuspended, each replicated job's pod template on its flavor.
    started = c.jobset("first")
    assert started["spec"]["suspend"] is False
    templates = pod_templates(started)
    assert templates["workers"]["spec"]["nodeSelector"] == {"gpu": "t4"}
    assert templates["leader"]["metadata"]["labels"] == {PODSET_LABEL: "leader", **QUEUE_LABELS}
    assert c.api.reasons("JobSet", "first") == ["Suspended", "CreatedWorkload", "Started"]
    # The second waits with Kueue's message.
    c.api.add(JOBSETS, jobset_body("second", TWO))
    c.settle()
    second = c.workloads()["JobSet/second"]
    reserved = condition(second, "QuotaReserved")
    assert reserved is not None
    assert (reserved["status"], reserved["reason"]) == ("False", "Pending")
    # As Kueue: every pod set named, each counted after the ones before it (1, then 1 + 2).
    assert reserved["message"] == (
        "couldn't assign flavors to pod set leader: insufficient unused quota for nvidia.com/gpu "
        "in flavor t4, 1 more needed; couldn't assign flavors to pod set workers: insufficient "
        "unused quota for nvidia.com/gpu in flavor t4, 3 more needed"
    )
    # The first's Jobs (made by the JobSet controller) get no Workload of their own.
    child_job(c, "first", "workers", suspend=False)
    c.settle()
    assert sorted(c.workloads()) == ["JobSet/first", "JobSet/second"]
    assert c.api.get(JOBS, "ns", "first-workers-0")["spec"]["suspend"] is False
    # The first completes: its Workload is finished, the quota returns and the second starts.
    c.api.change(
        JOBSETS,
        "ns",
        "first",
        {"status": {"conditions": [{"type": "Completed", "status": "True", "message": "jobset completed"}]}},
    )
    c.settle()
    finished = condition(c.workloads()["JobSet/first"], "Finished")
    assert finished is not None
    assert (finished["reason"], finished["message"]) == ("Succeeded", "jobset completed")
    assert c.jobset("second")["spec"]["suspend"] is False
    assert c.used_gpus() == 3


def test_a_jobsets_running_job_is_suspended_while_its_jobset_is_not_admitted() -> None:
    c = jobset_cluster()
    queues(c, gpus=0)
    c.api.add(JOBSETS, jobset_body("js", TWO))
    c.settle()
    assert condition(c.workloads()["JobSet/js"], "QuotaReserved") is not None
    child_job(c, "js", "leader", suspend=False)
    c.settle()
    assert c.api.get(JOBS, "ns", "js-leader-0")["spec"]["suspend"] is True
    assert c.api.reasons("Job", "js-leader-0") == ["Suspended"]
    assert [e["message"] for e in c.api.events if e["involvedObject"]["name"] == "js-leader-0"] == [
        "Kueue managed child job suspended"
    ]
    assert sorted(c.workloads()) == ["JobSet/js"]


def test_a_jobset_without_a_queue_name_leaves_its_jobs_on_their_own() -> None:
    c = jobset_cluster()
    queues(c, gpus=3)
    c.api.add(JOBSETS, jobset_body("js", TWO, queue=None, suspend=False))
    child_job(c, "js", "leader", suspend=False)  # the Job names the queue itself
    c.settle()
    assert sorted(c.workloads()) == ["Job/js-leader-0"]
    assert c.jobset("js")["spec"]["suspend"] is False


def test_a_pods_ready_timeout_suspends_the_jobset_and_restores_its_templates() -> None:
    c = jobset_cluster()
    queues(c, gpus=3)
    c.api.add(JOBSETS, jobset_body("js", TWO, suspend=True))
    recorded = pod_templates(c.jobset("js"))
    c.settle()
    assert c.jobset("js")["spec"]["suspend"] is False
    # One of the three Jobs ready: not all pods ready.
    c.api.change(JOBSETS, "ns", "js", {"status": {"replicatedJobsStatus": [{"name": "workers", "ready": 1}]}})
    c.settle()
    ready = condition(c.workloads()["JobSet/js"], "PodsReady")
    assert ready is not None
    assert ready["status"] == "False"
    c.tick(T0 + 61)
    evicted = condition(c.workloads()["JobSet/js"], "Evicted")
    assert evicted is not None
    assert (evicted["status"], evicted["reason"]) == ("True", "PodsReadyTimeout")
    stopped = c.jobset("js")
    assert stopped["spec"]["suspend"] is True
    assert pod_templates(stopped) == recorded
    assert c.used_gpus() == 0
    # Requeued after the backoff, started again; every Job ready: PodsReady True.
    c.tick(T0 + 61 + 30)
    assert c.jobset("js")["spec"]["suspend"] is False
    all_ready = [{"name": "leader", "ready": 1}, {"name": "workers", "ready": 2}]
    c.api.change(JOBSETS, "ns", "js", {"status": {"replicatedJobsStatus": all_ready}})
    c.settle()
    ready = condition(c.workloads()["JobSet/js"], "PodsReady")
    assert ready is not None
    assert ready["status"] == "True"


def test_the_pods_of_a_jobsets_jobs_make_its_workload_pods_ready() -> None:
    """PodsReady from the pods themselves, found through the JobSet's Jobs (before the JobSet's
    own status counts them)."""
    c = jobset_cluster()
    queues(c, gpus=3)
    c.api.add(JOBSETS, jobset_body("js", [("leader", 1, 1, 1, "gpu-a"), ("workers", 1, 2, 2, "gpu-b")]))
    c.settle()
    child_job(c, "js", "leader", suspend=False)
    child_job(c, "js", "workers", suspend=False)
    ready_pod(c, "js-leader-0", "leader", "leader-pod")
    ready_pod(c, "js-workers-0", "workers", "worker-pod-0")
    c.settle()
    ready = condition(c.workloads()["JobSet/js"], "PodsReady")
    assert ready is not None
    assert ready["status"] == "False"  # 2 of its 3 pods
    ready_pod(c, "js-workers-0", "workers", "worker-pod-1")
    c.settle()
    ready = condition(c.workloads()["JobSet/js"], "PodsReady")
    assert ready is not None
    assert ready["status"] == "True"
