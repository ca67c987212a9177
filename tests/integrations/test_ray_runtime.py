"""RayClusters and RayJobs through the runtime with the in-memory API: a head and a GPU worker
group (2 pods, each a GPU from a ResourceClaimTemplate) admitted as one Workload charged through
deviceClassMappings while a second waits with Kueue's message, admitted once the first is
deleted; a RayJob's own RayCluster never admitted on its own; a RayJob finished from its
jobDeploymentStatus; a PodsReady timeout that suspends a RayCluster and restores its templates."""

from __future__ import annotations

import dataclasses
from typing import Any

from reconciler.api.ray import RAYCLUSTERS, RAYJOBS
from reconciler.api.resources import CLUSTER_QUEUES
from reconciler.config import parse_config
from reconciler.integrations import PODSET_LABEL
from tests.support.builders import cluster_queue_body
from tests.support.jobset_queues import condition, queues
from tests.support.memory_cluster import GPU, T0, Cluster
from tests.support.rays import raycluster_body, rayjob_body

# Kueue's AssignQueueLabelsForPods labels on an admitted Workload's pods (LocalQueue lq, ClusterQueue cq).
QUEUE_LABELS = {"kueue.x-k8s.io/local-queue-name": "lq", "kueue.x-k8s.io/cluster-queue-name": "cq"}

CONFIG = dataclasses.replace(
    parse_config(
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "waitForPodsReady": {"timeout": "60s", "requeuingStrategy": {"backoffBaseSeconds": 10}},
            "integrations": {"frameworks": ["batch/job", "ray.io/rayjob", "ray.io/raycluster"]},
            "resources": {"deviceClassMappings": [{"name": GPU, "deviceClassNames": ["gpu.nvidia.com"]}]},
        }
    ),
)
WAITING = (
    "couldn't assign flavors to pod set gpu-workers: insufficient unused quota for nvidia.com/gpu "
    "in flavor t4, 2 more needed"
)


def _worker_template(body: dict[str, Any], cluster_spec: str | None = None) -> dict[str, Any]:
    spec = body["spec"] if cluster_spec is None else body["spec"][cluster_spec]
    template: dict[str, Any] = spec["workerGroupSpecs"][0]["template"]
    return template


def test_two_rayclusters_one_admitted_the_other_waits_then_runs_when_the_first_is_deleted() -> None:
    c = Cluster(CONFIG)
    queues(c, gpus=2)
    c.api.add(RAYCLUSTERS, raycluster_body("first"))
    c.settle()
    first = c.workloads()["RayCluster/first"]
    assert [(ps["name"], ps["count"]) for ps in first["spec"]["podSets"]] == [("head", 1), ("gpu-workers", 2)]
    usage = {a["name"]: a["resourceUsage"] for a in first["status"]["admission"]["podSetAssignments"]}
    assert GPU not in usage["head"]
    assert usage["gpu-workers"][GPU] == "2"
    assert c.used_gpus() == 2
    started = c.api.get(RAYCLUSTERS, "ns", "first")
    assert started["spec"]["suspend"] is False
    assert _worker_template(started)["spec"]["nodeSelector"] == {"gpu": "t4"}
    assert _worker_template(started)["metadata"]["labels"] == {PODSET_LABEL: "gpu-workers", **QUEUE_LABELS}
    assert c.api.reasons("RayCluster", "first") == ["CreatedWorkload", "Started"]
    c.api.add(RAYCLUSTERS, raycluster_body("second"))
    c.settle()
    reserved = condition(c.workloads()["RayCluster/second"], "QuotaReserved")
    assert reserved is not None
    assert (reserved["status"], reserved["message"]) == ("False", WAITING)
    assert c.api.get(RAYCLUSTERS, "ns", "second")["spec"]["suspend"] is True
    c.api.delete(RAYCLUSTERS, "ns", "first")
    c.settle()
    assert c.api.get(RAYCLUSTERS, "ns", "second")["spec"]["suspend"] is False
    assert c.used_gpus() == 2


def _child_cluster(c: Cluster, rayjob: str) -> None:
    """The RayCluster KubeRay makes for a RayJob: its labels copied, controlled by the RayJob."""
    owner = c.api.get(RAYJOBS, "ns", rayjob)
    body = raycluster_body(f"{rayjob}-raycluster-abcde", suspend=None)
    body["spec"] = dict(owner["spec"]["rayClusterSpec"])
    body["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayJob",
            "name": rayjob,
            "uid": owner["metadata"]["uid"],
            "controller": True,
        }
    ]
    c.api.add(RAYCLUSTERS, body)


def test_a_rayjob_is_admitted_with_its_submitter_its_cluster_is_its_child_and_it_finishes() -> None:
    c = Cluster(CONFIG)
    queues(c, gpus=2)
    # KubeRay's default submitter asks for memory too: the ClusterQueue covers it.
    memory = cluster_queue_body("cq", [("t4", {"cpu": 10, "memory": "16Gi", GPU: 2})])
    c.api.change(CLUSTER_QUEUES, "", "cq", {"spec": memory["spec"]})
    c.api.add(RAYJOBS, rayjob_body("rj"))
    c.settle()
    workload = c.workloads()["RayJob/rj"]
    submitter = {a["name"]: a["resourceUsage"] for a in workload["status"]["admission"]["podSetAssignments"]}
    assert submitter["submitter"] == {"cpu": "500m", "memory": "200Mi"}
    assert [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]] == [
        ("head", 1),
        ("gpu-workers", 2),
        ("submitter", 1),
    ]
    started = c.api.get(RAYJOBS, "ns", "rj")
    assert started["spec"]["suspend"] is False
    assert _worker_template(started, "rayClusterSpec")["spec"]["nodeSelector"] == {"gpu": "t4"}
    _child_cluster(c, "rj")
    c.settle()
    assert sorted(c.workloads()) == ["RayJob/rj"]  # the cluster holds no quota of its own
    assert c.api.get(RAYCLUSTERS, "ns", "rj-raycluster-abcde")["spec"].get("suspend") is not True
    c.api.change(
        RAYJOBS,
        "ns",
        "rj",
        {"status": {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED", "message": "done"}},
    )
    c.settle()
    finished = condition(c.workloads()["RayJob/rj"], "Finished")
    assert finished is not None
    assert (finished["reason"], finished["message"]) == ("Succeeded", "done")
    assert c.used_gpus() == 0


def test_a_rayjobs_cluster_is_suspended_while_the_rayjob_is_not_admitted() -> None:
    c = Cluster(CONFIG)
    queues(c, gpus=0)
    c.api.add(RAYJOBS, rayjob_body("rj"))
    c.settle()
    _child_cluster(c, "rj")
    c.settle()
    assert c.api.get(RAYCLUSTERS, "ns", "rj-raycluster-abcde")["spec"]["suspend"] is True
    assert sorted(c.workloads()) == ["RayJob/rj"]


def test_a_pods_ready_timeout_suspends_the_raycluster_and_restores_its_templates() -> None:
    c = Cluster(CONFIG)
    queues(c, gpus=2)
    body = raycluster_body("rc")
    c.api.add(RAYCLUSTERS, body)
    c.settle()
    assert c.api.get(RAYCLUSTERS, "ns", "rc")["spec"]["suspend"] is False
    c.tick(T0 + 61)
    evicted = condition(c.workloads()["RayCluster/rc"], "Evicted")
    assert evicted is not None
    assert evicted["reason"] == "PodsReadyTimeout"
    stopped = c.api.get(RAYCLUSTERS, "ns", "rc")
    assert stopped["spec"]["suspend"] is True
    assert _worker_template(stopped) == _worker_template(body)
    assert stopped["spec"]["headGroupSpec"]["template"] == body["spec"]["headGroupSpec"]["template"]
    # Not active (its state is not ready): the reservation ends, requeued after the backoff.
    requeued = condition(c.workloads()["RayCluster/rc"], "Requeued")
    assert requeued is not None
    assert requeued["status"] == "False"
    assert c.used_gpus() == 0
