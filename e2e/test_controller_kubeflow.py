"""Kubeflow jobs on the test-bed with the real operators (`e2e/build-binaries.sh --kubeflow`): the
training-operator v1.9.3 manager (its CRDs and validating webhooks from its Go module, see
e2e/support/kubeflow.py for what its cert rotator needs) and mpi-operator v0.8.0 (its MPIJob
CRD).

A PyTorchJob with a CPU-only master and two workers each asking for a GPU through a
ResourceClaimTemplate is admitted as one Workload of two pod sets; the training-operator makes
its pods, which get their claims allocated by the scheduler and run on the node simulator (one
GPU on the node: the workers run one after the other); a second PyTorchJob waits with Kueue's
message and is admitted once the first succeeds and its quota returns. An MPIJob with a launcher
and two GPU workers is admitted; mpi-operator makes the workers and the launcher Job, which gets
no Workload of its own; all run and the MPIJob's Workload finishes.
A PyTorchJob whose Workload is deactivated while it runs is suspended with its templates
restored (the training-operator's webhook accepts the writes), its pods deleted by the
training-operator, and its quota returned.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio

from e2e.support.kubeflow import KubeflowOperators, install_kubeflow_crds
from e2e.support.queues import drop_queues, make_queues
from e2e.support.served import Served, claim_template, start_controller, stop_controller, workload_where
from e2e.support.webhooks import unregister
from e2e.support.workloads import KUEUE
from e2e.testbed import KubeClient, Testbed, api_path
from e2e.testbed.names import RUN_SECONDS_ANNOTATION
from e2e.testbed.scenario import status_condition, wait_for
from reconciler.core.model.workloads import workload_name_for_job

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(300)]

KUBEFLOW_V1 = "kubeflow.org/v1"
MPI_API = "kubeflow.org/v2beta1"
Obj = dict[str, Any]


@pytest.fixture(scope="module")
def operators(testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeflowOperators]:
    """The training-operator (its webhooks registered) and mpi-operator, with their CRDs."""
    operators = KubeflowOperators(testbed.kubeconfig, tmp_path_factory.mktemp("kubeflow"))

    async def up() -> list[Obj]:
        async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
            await install_kubeflow_crds(kube)
            return await operators.start(kube)

    hooks = asyncio.run(up())
    yield operators

    async def down() -> None:
        async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
            await unregister(kube, hooks)

    asyncio.run(down())
    operators.stop()


@pytest.fixture(scope="module")
def controller(
    testbed: Testbed, operators: KubeflowOperators, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """`reconciler run` with the PyTorchJob and MPIJob frameworks on, GPUs charged through DRA."""
    frameworks = ["batch/job", "kubeflow.org/pytorchjob", "kubeflow.org/mpijob"]
    folder = tmp_path_factory.mktemp("controller-kubeflow")
    served = start_controller(testbed.kubeconfig, folder, frameworks, webhooks=False)
    yield served
    stop_controller(served)


@pytest_asyncio.fixture
async def queues(kube: KubeClient, namespace: str) -> AsyncIterator[str]:
    """Queues with 2 GPUs of quota, and the workers' ResourceClaimTemplate."""
    await make_queues(kube, namespace, gpus=2)
    try:
        await claim_template(kube, namespace, "worker-gpu")
        yield namespace
    finally:
        await drop_queues(kube, namespace)


def replica(container: str, count: int, run_seconds: str, gpu: bool) -> Obj:
    resources: Obj = {"requests": {"cpu": "100m"}}
    spec: Obj = {"containers": [{"name": container, "image": "busybox", "resources": resources}]}
    if gpu:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "worker-gpu"}]
        resources["claims"] = [{"name": "gpu"}]
    template = {"metadata": {"annotations": {RUN_SECONDS_ANNOTATION: run_seconds}}, "spec": spec}
    return {"replicas": count, "restartPolicy": "Never", "template": template}


def pytorchjob(name: str, namespace: str) -> Obj:
    return {
        "apiVersion": KUBEFLOW_V1,
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "runPolicy": {"suspend": True},
            "pytorchReplicaSpecs": {
                "Master": replica("pytorch", 1, "8", gpu=False),
                "Worker": replica("pytorch", 2, "2", gpu=True),
            },
        },
    }


def mpijob(name: str, namespace: str) -> Obj:
    return {
        "apiVersion": MPI_API,
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "runPolicy": {"suspend": True},
            "slotsPerWorker": 1,
            "mpiReplicaSpecs": {
                "Launcher": replica("launcher", 1, "10", gpu=False),
                "Worker": replica("worker", 2, "3", gpu=True),
            },
        },
    }


async def finished_pods(kube: KubeClient, namespace: str, selector: str, count: int) -> list[Obj]:
    async def probe() -> list[Obj] | None:
        pods, _ = await kube.list_all(api_path("v1", "pods", namespace), {"labelSelector": selector})
        done = [p for p in pods if p["status"].get("phase") == "Succeeded"]
        return done if len(done) >= count else None

    found: list[Obj] = await wait_for(
        f"{count} pods of {selector} to succeed", probe, within=150, interval=0.5
    )
    return found


@pytest.mark.asyncio
async def test_a_pytorchjob_runs_as_one_workload_and_the_next_waits_for_its_quota(
    controller: Served, kube: KubeClient, queues: str
) -> None:
    namespace = queues
    path = api_path(KUBEFLOW_V1, "pytorchjobs", namespace)
    created = await kube.create(path, pytorchjob("first", namespace))
    first = workload_name_for_job("first", created["metadata"]["uid"], "PyTorchJob", "kubeflow.org")
    admitted = await workload_where(kube, namespace, first, "Admitted", "True")
    assert [(ps["name"], ps["count"]) for ps in admitted["spec"]["podSets"]] == [("master", 1), ("worker", 2)]
    usage = {a["name"]: a["resourceUsage"] for a in admitted["status"]["admission"]["podSetAssignments"]}
    assert usage == {"master": {"cpu": "100m"}, "worker": {"cpu": "200m", "nvidia.com/gpu": "2"}}

    created = await kube.create(path, pytorchjob("second", namespace))
    second = workload_name_for_job("second", created["metadata"]["uid"], "PyTorchJob", "kubeflow.org")
    pending = await workload_where(kube, namespace, second, "QuotaReserved", "False")
    assert status_condition(pending, "QuotaReserved")["message"] == (
        "couldn't assign flavors to pod set worker: insufficient unused quota for nvidia.com/gpu "
        f"in flavor t4-{namespace}, 2 more needed"
    )

    # The training-operator makes the pods; the workers get their GPUs allocated, one at a time.
    pods = await finished_pods(kube, namespace, "training.kubeflow.org/job-name=first", 3)
    kinds = sorted(p["metadata"]["labels"]["training.kubeflow.org/replica-type"] for p in pods)
    assert kinds == ["master", "worker", "worker"]
    assert all(p["spec"]["nodeName"] == "gpu-node-1" for p in pods)
    assert all(p["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "Tesla-T4"} for p in pods)
    workers = [p for p in pods if p["metadata"]["labels"]["training.kubeflow.org/replica-type"] == "worker"]
    assert all(p["status"]["resourceClaimStatuses"][0]["name"] == "gpu" for p in workers)

    finished = await workload_where(kube, namespace, first, "Finished", "True")
    assert status_condition(finished, "Finished")["reason"] == "Succeeded"
    await workload_where(kube, namespace, second, "Admitted", "True")

    async def second_started() -> bool:
        job = await kube.get(api_path(KUBEFLOW_V1, "pytorchjobs", namespace, "second"))
        return job["spec"]["runPolicy"]["suspend"] is False

    await wait_for("the second PyTorchJob to be unsuspended", second_started, within=60, interval=0.3)


@pytest.mark.asyncio
async def test_an_mpijob_runs_its_launcher_and_gpu_workers_under_one_workload(
    controller: Served, kube: KubeClient, queues: str
) -> None:
    namespace = queues
    created = await kube.create(api_path(MPI_API, "mpijobs", namespace), mpijob("mpi", namespace))
    name = workload_name_for_job("mpi", created["metadata"]["uid"], "MPIJob", "kubeflow.org")
    admitted = await workload_where(kube, namespace, name, "Admitted", "True")
    assert [(ps["name"], ps["count"]) for ps in admitted["spec"]["podSets"]] == [
        ("launcher", 1),
        ("worker", 2),
    ]
    usage = {a["name"]: a["resourceUsage"] for a in admitted["status"]["admission"]["podSetAssignments"]}
    assert usage == {"launcher": {"cpu": "100m"}, "worker": {"cpu": "200m", "nvidia.com/gpu": "2"}}

    # mpi-operator makes the workers and the launcher Job; each runs on the GPU node.
    workers = await finished_pods(
        kube, namespace, "training.kubeflow.org/job-name=mpi,training.kubeflow.org/job-role=worker", 2
    )
    assert all(p["status"]["resourceClaimStatuses"][0]["name"] == "gpu" for p in workers)
    finished = await workload_where(kube, namespace, name, "Finished", "True")
    assert status_condition(finished, "Finished")["reason"] == "Succeeded"
    launcher = await kube.get(api_path("batch/v1", "jobs", namespace, "mpi-launcher"))
    assert launcher["spec"]["template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "Tesla-T4"}
    # Only the MPIJob has a Workload: its launcher Job was never admitted on its own.
    workloads, _ = await kube.list_all(api_path(KUEUE, "workloads", namespace))
    owners = sorted(
        (w["metadata"]["ownerReferences"][0]["kind"], w["metadata"]["ownerReferences"][0]["name"])
        for w in workloads
    )
    assert owners == [("MPIJob", "mpi")]


@pytest.mark.asyncio
async def test_an_evicted_pytorchjob_is_suspended_with_its_templates_restored_and_its_pods_gone(
    controller: Served, kube: KubeClient, queues: str
) -> None:
    """The Workload deactivated while the PyTorchJob runs: evicted, the job suspended and its pod
    templates given back as created (the training-operator's webhook accepts the writes), its pods
    deleted by the training-operator, the quota back."""
    namespace = queues
    body = pytorchjob("long", namespace)
    for spec in body["spec"]["pytorchReplicaSpecs"].values():
        spec["template"]["metadata"]["annotations"][RUN_SECONDS_ANNOTATION] = "forever"
    created = await kube.create(api_path(KUBEFLOW_V1, "pytorchjobs", namespace), body)
    path = api_path(KUBEFLOW_V1, "pytorchjobs", namespace, "long")
    name = workload_name_for_job("long", created["metadata"]["uid"], "PyTorchJob", "kubeflow.org")
    await workload_where(kube, namespace, name, "Admitted", "True")

    async def running() -> bool:
        pods, _ = await kube.list_all(
            api_path("v1", "pods", namespace), {"labelSelector": "training.kubeflow.org/job-name=long"}
        )
        return any(p["status"].get("phase") == "Running" for p in pods)

    await wait_for("a pod of the PyTorchJob to run", running, within=60, interval=0.3)
    await kube.patch(api_path(KUEUE, "workloads", namespace, name), {"spec": {"active": False}})
    evicted = await workload_where(kube, namespace, name, "Evicted", "True")
    assert status_condition(evicted, "Evicted")["reason"] == "Deactivated"

    def templates(job: Obj) -> dict[str, Obj]:
        return {rt: spec["template"] for rt, spec in job["spec"]["pytorchReplicaSpecs"].items()}

    async def restored() -> bool:
        current = await kube.get(path)
        return bool(current["spec"]["runPolicy"].get("suspend")) and templates(current) == templates(created)

    await wait_for("the PyTorchJob suspended with its templates restored", restored, within=60, interval=0.3)

    async def pods_gone() -> bool:
        pods, _ = await kube.list_all(
            api_path("v1", "pods", namespace), {"labelSelector": "training.kubeflow.org/job-name=long"}
        )
        return not [p for p in pods if not p["metadata"].get("deletionTimestamp")]

    await wait_for(
        "the training-operator to delete the suspended job's pods", pods_gone, within=60, interval=0.3
    )

    async def released() -> bool:
        cq = await kube.get(api_path(KUEUE, "clusterqueues", name=f"cq-{namespace}"))
        usage = (cq.get("status") or {}).get("flavorsUsage") or []
        return all(r["total"] in ("0", 0) for f in usage for r in f["resources"])

    await wait_for("the quota to be released", released, within=60, interval=0.3)
