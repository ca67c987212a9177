"""The two-pod-set TrainingRun (tests/support/trainingrun.py) through the runtime, end to end:
the reconciler watches it from its table row, creates its Workload with both pod sets, admits it,
starts it with each pod set's node labels, evicts it on a PodsReady timeout (its pods found
through their owner references), suspends and restores it, starts it again and finishes it.

The runtime has no knowledge of the kind: the test enables it by registering it (the registry
passed to the Reconciler) and naming its framework in integrations.frameworks.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import msgspec
import pytest

from reconciler.api.resources import (
    CLUSTER_QUEUES,
    JOBS,
    LOCAL_QUEUES,
    NAMESPACES,
    PODS,
    RESOURCE_FLAVORS,
    WORKLOAD_PRIORITY_CLASSES,
    WORKLOADS,
)
from reconciler.config import parse_config
from reconciler.integrations import PODSET_LABEL
from reconciler.kube import Backoff, Informer, KubeClient, WatchEvent
from reconciler.runtime.loop.reconciler import Reconciler
from tests.support.builders import cluster_queue_body, job_body
from tests.support.fake_apiserver import FakeApiServer, page, stream
from tests.support.informers import until
from tests.support.memory_cluster import T0, Cluster
from tests.support.trainingrun import REGISTRY_WITH_TRAINING_RUN, TRAINING_RUN, training_run

# Kueue's AssignQueueLabelsForPods labels on an admitted Workload's pods (LocalQueue lq, ClusterQueue cq).
QUEUE_LABELS = {"kueue.x-k8s.io/local-queue-name": "lq", "kueue.x-k8s.io/cluster-queue-name": "cq"}

GPU = "nvidia.com/gpu"
ROLES = [("leader", 1, {"cpu": "1"}), ("workers", 2, {"cpu": "1", GPU: "1"})]
RUNS = TRAINING_RUN.resource
CONFIG = dataclasses.replace(
    parse_config(
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "waitForPodsReady": {"timeout": "60s", "requeuingStrategy": {"backoffBaseSeconds": 10}},
        }
    ),
    frameworks=("batch/job", TRAINING_RUN.framework),
)


def training_cluster() -> Cluster:
    """The cluster with the TrainingRun registered and its framework on."""
    return Cluster(CONFIG, registry=REGISTRY_WITH_TRAINING_RUN)


def stored_run(c: Cluster) -> dict[str, Any]:
    return c.api.get(RUNS, "ns", "r")


def templates(run: dict[str, Any]) -> dict[str, Any]:
    return {role["name"]: role["template"] for role in run["spec"]["roles"]}


def condition(workload: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in workload.get("status", {}).get("conditions", []) if c["type"] == kind), None)


def queues(c: Cluster) -> None:
    c.api.add(NAMESPACES, {"metadata": {"name": "ns", "labels": {"kubernetes.io/metadata.name": "ns"}}})
    c.api.add(RESOURCE_FLAVORS, {"metadata": {"name": "small"}, "spec": {"nodeLabels": {"pool": "cpu"}}})
    c.api.add(RESOURCE_FLAVORS, {"metadata": {"name": "big"}, "spec": {"nodeLabels": {"pool": "gpu"}}})
    c.api.add(
        CLUSTER_QUEUES, cluster_queue_body("cq", [("small", {"cpu": 4, GPU: 0}), ("big", {"cpu": 4, GPU: 2})])
    )
    c.api.add(LOCAL_QUEUES, {"metadata": {"name": "lq", "namespace": "ns"}, "spec": {"clusterQueue": "cq"}})


def pod(c: Cluster, name: str, role: str, *, ready: bool) -> None:
    run = stored_run(c)
    owner = {
        "apiVersion": "example.com/v1",
        "kind": "TrainingRun",
        "name": "r",
        "uid": run["metadata"]["uid"],
        "controller": True,
    }
    c.api.add(
        PODS,
        {
            "metadata": {
                "name": name,
                "namespace": "ns",
                "labels": {PODSET_LABEL: role},
                "ownerReferences": [owner],
            },
            "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "busybox"}]},
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            },
        },
    )


def test_a_training_run_from_creation_through_a_pods_ready_eviction_to_finish() -> None:
    c = training_cluster()
    queues(c)
    c.api.sync()
    original = msgspec.json.decode(msgspec.json.encode(training_run("r", ROLES, suspend=False)))
    c.api.add(RUNS, original)
    recorded = templates(stored_run(c))
    c.settle()
    # Suspended, its Workload created with both pod sets and owned by the TrainingRun, admitted
    # with a flavor per pod set, and started with each pod set's node labels.
    workload = c.only_workload()
    assert [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]] == [
        ("leader", 1),
        ("workers", 2),
    ]
    (owner,) = workload["metadata"]["ownerReferences"]
    assert (owner["apiVersion"], owner["kind"], owner["name"]) == ("example.com/v1", "TrainingRun", "r")
    flavors = {a["name"]: a["flavors"] for a in workload["status"]["admission"]["podSetAssignments"]}
    assert flavors == {"leader": {"cpu": "small"}, "workers": {"cpu": "big", GPU: "big"}}
    assert (c.used("small", "cpu"), c.used("big", "cpu"), c.used("big", GPU)) == (1000, 2000, 2)
    run = stored_run(c)
    assert run["spec"]["suspend"] is False
    started = templates(run)
    assert started["leader"]["spec"]["nodeSelector"] == {"pool": "cpu"}
    assert started["workers"]["spec"]["nodeSelector"] == {"pool": "gpu"}
    assert started["workers"]["metadata"]["labels"] == {PODSET_LABEL: "workers", **QUEUE_LABELS}
    assert c.api.reasons("TrainingRun", "r") == ["Suspended", "CreatedWorkload", "Started"]
    # Its pods (found through their owner references) are not all ready: PodsReady False.
    pod(c, "r-leader-0", "leader", ready=True)
    pod(c, "r-workers-0", "workers", ready=True)
    pod(c, "r-workers-1", "workers", ready=False)
    c.settle()
    ready = condition(c.only_workload(), "PodsReady")
    assert ready is not None
    assert ready["status"] == "False"
    # The timeout passes: evicted, the TrainingRun stopped, suspended and its templates restored.
    c.tick(T0 + 61)
    evicted = condition(c.only_workload(), "Evicted")
    assert evicted is not None
    assert (evicted["status"], evicted["reason"]) == ("True", "PodsReadyTimeout")
    assert c.used("big", GPU) == 0
    run = stored_run(c)
    assert run["spec"]["suspend"] is True
    assert templates(run) == recorded
    assert "Stopped" in c.api.reasons("TrainingRun", "r")
    # After the backoff it is admitted and started again; with every pod ready, PodsReady True.
    c.tick(T0 + 61 + 30)
    assert stored_run(c)["spec"]["suspend"] is False
    assert templates(stored_run(c))["workers"]["spec"]["nodeSelector"] == {"pool": "gpu"}
    assert c.used("big", GPU) == 2
    c.api.change(PODS, "ns", "r-workers-1", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    c.settle()
    ready = condition(c.only_workload(), "PodsReady")
    assert ready is not None
    assert ready["status"] == "True"
    # It succeeds: its Workload is declared finished and the quota returns.
    c.api.change(
        RUNS,
        "ns",
        "r",
        {"status": {"conditions": [{"type": "Succeeded", "status": "True", "message": "ok"}]}},
    )
    c.settle()
    finished = condition(c.only_workload(), "Finished")
    assert finished is not None
    assert (finished["status"], finished["reason"], finished["message"]) == ("True", "Succeeded", "ok")
    assert (c.used("small", "cpu"), c.used("big", GPU)) == (0, 0)
    assert c.api.reasons("TrainingRun", "r")[-1] == "FinishedWorkload"


def test_its_table_row_is_the_integrations_own() -> None:
    c = training_cluster()
    rows = {row.resource.plural: row for row in c.reconciler.watched_kinds}
    assert rows["trainingruns"].projection is TRAINING_RUN.projection
    assert rows["jobs"].resource.kind == "Job"
    # Not enabled by integrations.frameworks: not watched, though registered.
    only_jobs = Reconciler(parse_config(CONFIG_DOC), lambda a: None, registry=REGISTRY_WITH_TRAINING_RUN)
    assert "trainingruns" not in {r.resource.plural for r in only_jobs.watched_kinds}


CONFIG_DOC = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}


@pytest.mark.asyncio
async def test_the_informer_from_its_row_lists_and_watches_training_runs(fake: FakeApiServer) -> None:
    """From the wire: the API server lists one TrainingRun and the watch shows it suspended; the
    reconciler, fed by an Informer made from its table row, queues its Workload with both pod sets."""
    c = training_cluster()
    queues(c)
    row = next(r for r in c.reconciler.watched_kinds if r.resource == RUNS)
    body = msgspec.json.decode(msgspec.json.encode(training_run("r", ROLES, suspend=True)))
    body["metadata"]["resourceVersion"] = "5"
    path = RUNS.list_path()
    fake.script(("LIST", path), page([body], 5))
    fake.fallback(("WATCH", path), stream(end="hang"))
    events: list[WatchEvent[Any]] = []
    client = KubeClient(fake.url, token="t0ken", retry_backoff=Backoff(initial=0.01, maximum=0.04))
    informer = Informer(client, row.resource, row.projection, events.append)
    task = asyncio.create_task(informer.run())
    try:
        await until(lambda: any(e.kind == "SYNCED" for e in events))
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.close()
    for resource in c.reconciler.watched:
        if resource != RUNS:
            c.reconciler.handle(WatchEvent("SYNCED", resource, ("", ""), None))
    for event in events:
        c.reconciler.handle(event)
    (create,) = [a for a in c.take() if a.purpose == "create-workload"]
    assert create.resource == WORKLOADS
    created = msgspec.json.decode(getattr(create, "body", b"{}"))
    assert [ps["name"] for ps in created["spec"]["podSets"]] == ["leader", "workers"]
    assert created["metadata"]["ownerReferences"][0]["kind"] == "TrainingRun"
    assert [r.path for r in fake.recorded("GET")][:1] == [path]


def test_a_job_and_a_training_run_of_one_name_are_two_jobs() -> None:
    """Jobs are kept per kind: a batch/v1 Job and a TrainingRun both named r get a Workload each,
    each owned by its own kind."""
    c = training_cluster()
    queues(c)
    c.api.sync()
    c.api.add(RUNS, msgspec.json.decode(msgspec.json.encode(training_run("r", ROLES, suspend=True))))
    c.api.add(JOBS, job_body("r", requests={"cpu": "1"}))
    c.settle()
    owners = sorted(
        (ref["kind"], ref["name"])
        for (plural, _, _), body in c.api.objects.items()
        if plural == WORKLOADS.plural
        for ref in body["metadata"]["ownerReferences"]
    )
    assert owners == [("Job", "r"), ("TrainingRun", "r")]
    assert set(c.reconciler.store.by_kind) >= {"Job", "TrainingRun"}
    assert c.reconciler.store.of_kind("Job")[("ns", "r")].kind == "Job"


def test_a_running_training_run_is_preempted_by_a_higher_priority_job() -> None:
    """Preemption through the runtime: the TrainingRun's Workload is evicted, the run stopped,
    suspended and its templates restored; the Job that preempted it starts on the GPUs."""
    c = training_cluster()
    queues(c)
    body = cluster_queue_body("cq", [("small", {"cpu": 4, GPU: 0}), ("big", {"cpu": 4, GPU: 2})])
    body["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    c.api.change(CLUSTER_QUEUES, "", "cq", {"spec": body["spec"]})
    for name, value in (("low", 10), ("high", 1000)):
        c.api.add(WORKLOAD_PRIORITY_CLASSES, {"metadata": {"name": name}, "value": value})
    c.api.sync()
    run = msgspec.json.decode(msgspec.json.encode(training_run("r", ROLES, suspend=False)))
    run["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "low"
    c.api.add(RUNS, run)
    recorded = templates(stored_run(c))
    c.settle()
    assert stored_run(c)["spec"]["suspend"] is False
    assert c.used("big", GPU) == 2
    urgent = job_body("urgent", requests={"cpu": "1", GPU: "2"})
    urgent["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "high"
    urgent["spec"]["suspend"] = True
    c.api.add(JOBS, urgent)
    c.settle()
    workloads = {
        b["metadata"]["ownerReferences"][0]["kind"]: b
        for (plural, _, _), b in c.api.objects.items()
        if plural == WORKLOADS.plural
    }
    evicted = condition(workloads["TrainingRun"], "Evicted")
    assert evicted is not None
    assert (evicted["status"], evicted["reason"]) == ("True", "Preempted")
    assert stored_run(c)["spec"]["suspend"] is True
    assert templates(stored_run(c)) == recorded
    assert "Stopped" in c.api.reasons("TrainingRun", "r")
    assert workloads["Job"]["status"]["admission"]["podSetAssignments"][0]["flavors"] == {
        "cpu": "big",
        GPU: "big",
    }
    assert c.api.get(JOBS, "ns", "urgent")["spec"]["suspend"] is False
    assert c.used("big", GPU) == 2
