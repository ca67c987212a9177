"""TrainJobs through the runtime with the in-memory API: a TrainJob naming a runtime not yet
known waits without a Workload; once the ClusterTrainingRuntime is there its Workload has the
runtime's pod set (numNodes pods, each charged a GPU through its ResourceClaimTemplate), it is
admitted and started through Kueue's runtime patch; the JobSet the trainer makes is its child,
never admitted on its own; a second TrainJob waits with Kueue's message until the first
completes and its quota returns."""

from __future__ import annotations

from typing import Any

from reconciler.api.resources import JOBSETS
from reconciler.api.trainer import CLUSTER_TRAINING_RUNTIMES, TRAINJOBS
from tests.support.jobset_queues import condition, queues
from tests.support.jobsets import jobset_body
from tests.support.memory_cluster import GPU, Cluster
from tests.support.trainjobs import node_job, runtime_body, trainjob_body, trainjob_cluster

# Kueue's AssignQueueLabelsForPods labels on an admitted Workload's pods (LocalQueue lq, ClusterQueue cq).
QUEUE_LABELS = {"kueue.x-k8s.io/local-queue-name": "lq", "kueue.x-k8s.io/cluster-queue-name": "cq"}


def kueue_jobs(c: Cluster, name: str) -> list[dict[str, Any]]:
    patches = c.api.get(TRAINJOBS, "ns", name)["spec"]["runtimePatches"]
    (kueue,) = [p for p in patches if p["manager"] == "kueue.x-k8s.io/manager"]
    jobs: list[dict[str, Any]] = kueue["trainingRuntimeSpec"]["template"]["spec"].get("replicatedJobs", [])
    return jobs


def trainer_jobset(c: Cluster, name: str) -> None:
    """The JobSet the trainer makes for a TrainJob: controlled by it, suspended like it."""
    owner = c.api.get(TRAINJOBS, "ns", name)["metadata"]
    body = jobset_body(name, [("node", 1, 2, 2, "gpu-a")], queue=None)
    body["spec"]["suspend"] = c.api.get(TRAINJOBS, "ns", name)["spec"]["suspend"]
    body["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "name": name,
            "uid": owner["uid"],
            "controller": True,
        }
    ]
    c.api.add(JOBSETS, body)


def test_trainjob_admitted_as_one_workload_started_through_kueues_patch_the_next_waits() -> None:
    c = trainjob_cluster()
    queues(c, gpus=2)
    c.api.add(TRAINJOBS, trainjob_body("first", num_nodes=2))
    c.settle()
    assert c.workloads() == {}  # its runtime is not known yet: no Workload
    c.api.add(
        CLUSTER_TRAINING_RUNTIMES,
        runtime_body(jobs=[node_job(gpu="gpu-a")], ml_policy={"numNodes": 1, "torch": {}}),
    )
    c.settle()
    first = c.workloads()["TrainJob/first"]
    assert [(ps["name"], ps["count"]) for ps in first["spec"]["podSets"]] == [("node", 2)]
    (assignment,) = first["status"]["admission"]["podSetAssignments"]
    assert assignment["resourceUsage"][GPU] == "2"
    started = c.api.get(TRAINJOBS, "ns", "first")
    assert started["spec"]["suspend"] is False
    (entry,) = kueue_jobs(c, "first")
    pod = entry["template"]["spec"]["template"]
    assert entry["name"] == "node"
    assert pod["spec"]["nodeSelector"] == {"gpu": "t4"}
    assert pod["metadata"]["labels"] == {"kueue.x-k8s.io/podset": "node", **QUEUE_LABELS}
    assert c.api.reasons("TrainJob", "first") == ["CreatedWorkload", "Started"]
    # The trainer's JobSet is the TrainJob's child: no Workload of its own, left running.
    trainer_jobset(c, "first")
    c.settle()
    assert sorted(c.workloads()) == ["TrainJob/first"]
    assert c.api.get(JOBSETS, "ns", "first")["spec"]["suspend"] is False
    # The second waits with Kueue's message.
    c.api.add(TRAINJOBS, trainjob_body("second", num_nodes=2))
    c.settle()
    reserved = condition(c.workloads()["TrainJob/second"], "QuotaReserved")
    assert reserved is not None
    assert reserved["message"] == (
        "couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu "
        "in flavor t4, 2 more needed"
    )
    assert c.api.get(TRAINJOBS, "ns", "second")["spec"]["suspend"] is True
    # The first completes: finished, the quota returns, the second starts.
    done = {
        "type": "Complete",
        "status": "True",
        "reason": "JobsCompleted",
        "message": "TrainJob is completed",
    }
    c.api.change(
        TRAINJOBS,
        "ns",
        "first",
        {"status": {"conditions": [done], "jobsStatus": [{"name": "node", "succeeded": 1}]}},
    )
    c.settle()
    finished = condition(c.workloads()["TrainJob/first"], "Finished")
    assert finished is not None
    assert (finished["status"], finished["message"]) == ("True", "TrainJob is completed")
    assert c.api.get(TRAINJOBS, "ns", "second")["spec"]["suspend"] is False
    assert c.used_gpus() == 2


def test_an_evicted_trainjob_is_suspended_and_kueues_patch_emptied_once_its_jobs_stop() -> None:
    c = trainjob_cluster()
    queues(c, gpus=2)
    c.api.add(CLUSTER_TRAINING_RUNTIMES, runtime_body(jobs=[node_job(gpu="gpu-a")]))
    c.api.add(TRAINJOBS, trainjob_body("first", num_nodes=2))
    c.settle()
    assert kueue_jobs(c, "first")
    running = {"jobsStatus": [{"name": "node", "active": 1}]}
    c.api.change(TRAINJOBS, "ns", "first", {"status": running})
    c.settle()
    # No pods ready within the timeout: evicted, suspended; the patch stays while a Job is active.
    c.tick(c.now + 61)
    assert c.api.get(TRAINJOBS, "ns", "first")["spec"]["suspend"] is True
    assert kueue_jobs(c, "first")
    c.api.change(TRAINJOBS, "ns", "first", {"status": {"jobsStatus": [{"name": "node", "active": 0}]}})
    c.settle()
    assert kueue_jobs(c, "first") == []
    evicted = condition(c.workloads()["TrainJob/first"], "Evicted")
    assert evicted is not None
    assert evicted["reason"] == "PodsReadyTimeout"
