"""Kubeflow jobs through the runtime with the in-memory API: a PyTorchJob with a master and GPU
workers (claims from ResourceClaimTemplates) admitted as one Workload of two pod sets charged
through deviceClassMappings, started in one write; a second waits with Kueue's message and is
admitted once the first succeeds; a PodsReady timeout suspends it with its templates restored;
an MPIJob's launcher Job (mpi-operator makes it) never gets a Workload of its own."""

from __future__ import annotations

import dataclasses
from typing import Any

from reconciler.api.kubeflow import MPIJOBS, PYTORCHJOBS
from reconciler.api.resources import JOBS
from reconciler.config import parse_config
from reconciler.integrations import PODSET_LABEL
from tests.support.builders import job_body
from tests.support.jobset_queues import condition, queues
from tests.support.kubeflow_jobs import mpijob_body, pytorchjob_body
from tests.support.memory_cluster import GPU, T0, Cluster

# Kueue's AssignQueueLabelsForPods labels on an admitted Workload's pods (LocalQueue lq, ClusterQueue cq).
QUEUE_LABELS = {"kueue.x-k8s.io/local-queue-name": "lq", "kueue.x-k8s.io/cluster-queue-name": "cq"}

CONFIG = dataclasses.replace(
    parse_config(
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "waitForPodsReady": {"timeout": "60s", "requeuingStrategy": {"backoffBaseSeconds": 10}},
            "integrations": {"frameworks": ["batch/job", "kubeflow.org/pytorchjob", "kubeflow.org/mpijob"]},
            "resources": {"deviceClassMappings": [{"name": GPU, "deviceClassNames": ["gpu.nvidia.com"]}]},
        }
    ),
)
# A master with one GPU (template gpu-a), two workers with one GPU each (template gpu-b).
TRAIN = [("Master", 1, "gpu-a"), ("Worker", 2, "gpu-b")]


def replica_templates(job: dict[str, Any], field: str) -> dict[str, Any]:
    return {rt: spec["template"] for rt, spec in job["spec"][field].items()}


def test_a_pytorchjob_is_admitted_as_one_workload_and_the_next_waits_for_its_quota() -> None:
    c = Cluster(CONFIG)
    queues(c, gpus=3)
    c.api.add(PYTORCHJOBS, pytorchjob_body("first", TRAIN))
    c.settle()
    first = c.workloads()["PyTorchJob/first"]
    assert [(ps["name"], ps["count"]) for ps in first["spec"]["podSets"]] == [("master", 1), ("worker", 2)]
    usage = {a["name"]: a["resourceUsage"] for a in first["status"]["admission"]["podSetAssignments"]}
    assert (usage["master"][GPU], usage["worker"][GPU]) == ("1", "2")
    assert c.used_gpus() == 3
    started = c.api.get(PYTORCHJOBS, "ns", "first")
    assert started["spec"]["runPolicy"]["suspend"] is False
    templates = replica_templates(started, "pytorchReplicaSpecs")
    assert templates["Worker"]["spec"]["nodeSelector"] == {"gpu": "t4"}
    assert templates["Master"]["metadata"]["labels"] == {PODSET_LABEL: "master", **QUEUE_LABELS}
    assert c.api.reasons("PyTorchJob", "first") == ["CreatedWorkload", "Started"]

    c.api.add(PYTORCHJOBS, pytorchjob_body("second", TRAIN))
    c.settle()
    reserved = condition(c.workloads()["PyTorchJob/second"], "QuotaReserved")
    assert reserved is not None
    assert (reserved["status"], reserved["reason"]) == ("False", "Pending")
    assert reserved["message"] == (
        "couldn't assign flavors to pod set master: insufficient unused quota for nvidia.com/gpu "
        "in flavor t4, 1 more needed; couldn't assign flavors to pod set worker: insufficient "
        "unused quota for nvidia.com/gpu in flavor t4, 3 more needed"
    )
    # Running is PodsReady, as Kueue reads it.
    running = [{"type": "Running", "status": "True", "reason": "Running", "message": "running"}]
    c.api.change(PYTORCHJOBS, "ns", "first", {"status": {"conditions": running}})
    c.settle()
    ready = condition(c.workloads()["PyTorchJob/first"], "PodsReady")
    assert ready is not None
    assert ready["status"] == "True"
    # The first succeeds: its Workload finishes with the condition's message, the second starts.
    done = [
        {"type": "Running", "status": "False", "reason": "Succeeded", "message": ""},
        {
            "type": "Succeeded",
            "status": "True",
            "reason": "Succeeded",
            "message": "PyTorchJob first is successfully completed.",
        },
    ]
    c.api.change(PYTORCHJOBS, "ns", "first", {"status": {"conditions": done}})
    c.settle()
    finished = condition(c.workloads()["PyTorchJob/first"], "Finished")
    assert finished is not None
    assert (finished["reason"], finished["message"]) == (
        "Succeeded",
        "PyTorchJob first is successfully completed.",
    )
    assert c.api.get(PYTORCHJOBS, "ns", "second")["spec"]["runPolicy"]["suspend"] is False
    assert c.used_gpus() == 3


def test_a_pods_ready_timeout_suspends_the_pytorchjob_and_restores_its_templates() -> None:
    c = Cluster(CONFIG)
    queues(c, gpus=3)
    c.api.add(PYTORCHJOBS, pytorchjob_body("p", TRAIN))
    recorded = replica_templates(c.api.get(PYTORCHJOBS, "ns", "p"), "pytorchReplicaSpecs")
    c.settle()
    assert c.api.get(PYTORCHJOBS, "ns", "p")["spec"]["runPolicy"]["suspend"] is False
    c.tick(T0 + 61)
    evicted = condition(c.workloads()["PyTorchJob/p"], "Evicted")
    assert evicted is not None
    assert (evicted["status"], evicted["reason"]) == ("True", "PodsReadyTimeout")
    stopped = c.api.get(PYTORCHJOBS, "ns", "p")
    assert stopped["spec"]["runPolicy"]["suspend"] is True
    assert replica_templates(stopped, "pytorchReplicaSpecs") == recorded
    assert c.used_gpus() == 0


def launcher_job(c: Cluster, mpijob: str, *, suspend: bool) -> None:
    """The launcher Job mpi-operator makes: controlled by the MPIJob."""
    owner = c.api.get(MPIJOBS, "ns", mpijob)["metadata"]
    body = job_body(f"{mpijob}-launcher", requests={"cpu": "1"})
    body["spec"]["suspend"] = suspend
    body["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "name": mpijob,
            "uid": owner["uid"],
            "controller": True,
        }
    ]
    c.api.add(JOBS, body)


def test_an_mpijobs_launcher_job_is_its_child_never_admitted_on_its_own() -> None:
    c = Cluster(CONFIG)
    queues(c, gpus=2)
    c.api.add(MPIJOBS, mpijob_body("mpi", [("Launcher", 1, None), ("Worker", 2, "gpu-b")]))
    c.settle()
    workload = c.workloads()["MPIJob/mpi"]
    assert [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]] == [
        ("launcher", 1),
        ("worker", 2),
    ]
    assert condition(workload, "Admitted") is not None
    launcher_job(c, "mpi", suspend=False)
    c.settle()
    assert sorted(c.workloads()) == ["MPIJob/mpi"]
    assert c.api.get(JOBS, "ns", "mpi-launcher")["spec"]["suspend"] is False
    # A second MPIJob waits; its running launcher Job is suspended as Kueue suspends a child.
    c.api.add(MPIJOBS, mpijob_body("waits", [("Launcher", 1, None), ("Worker", 2, "gpu-b")]))
    c.settle()
    launcher_job(c, "waits", suspend=False)
    c.settle()
    assert c.api.get(JOBS, "ns", "waits-launcher")["spec"]["suspend"] is True
    assert sorted(c.workloads()) == ["MPIJob/mpi", "MPIJob/waits"]
