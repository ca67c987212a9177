"""This controller as a MultiKueue worker under a real Kueue v0.18.1 manager (issue 41).

Two control planes: the manager (a test-bed of its own without nodes) runs Kueue v0.18.1 with
MultiKueue, its ClusterQueue guarded by the MultiKueue AdmissionCheck over one worker; the worker
is the session test-bed (a node with a Tesla T4, the fake DRA driver) running this controller.
A GPU Job submitted on the manager is copied to the worker as Kueue's manager does it (the
Workload first, ownerless with the origin label; the Job after, naming it as its prebuilt
Workload); the worker admits the Workload (the GPU charged through deviceClassMappings), the Job
adopts it, runs with the worker pod label and completes; the manager sees the Workload finish
and mirrors the Job's status. `reconciler explain` on the worker names the manager. A JobSet
goes the same way, run on the worker by the real JobSet controller (none on the manager, where
JobSet's CRD is installed and Kueue's webhook hands the JobSet to MultiKueue by `spec.managedBy`).
The worker's controller killed once a copy has reached the worker: reserved once, run once.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.conformance.kueue import WEBHOOK_GROUPS
from e2e.support.deploy import ROOT, ControllerProcess
from e2e.support.jobset import install_jobset_crds
from e2e.support.multikueue import (
    ORIGIN,
    WORKER,
    Manager,
    manager_queues,
    running_manager,
    worker_with_jobset,
)
from e2e.support.queues import drop_queues, make_queues
from e2e.support.workloads import KUEUE
from e2e.testbed import KubeClient, Testbed, api_path
from e2e.testbed.names import RUN_SECONDS_ANNOTATION
from e2e.testbed.scenario import status_condition, wait_for
from reconciler.core.model.workloads import workload_name_for_job
from reconciler.integrations.batchjob import job_workload_name

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(420)]

Obj = dict[str, Any]
ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
WORKER_POD_LABEL = "kueue.x-k8s.io/multikueue-worker-workload-pod"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"


@pytest.fixture(scope="module")
def controller(testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerProcess]:
    """The worker (the session test-bed): this controller (batch/v1 Jobs and JobSets) and the
    real JobSet controller."""
    with worker_with_jobset(testbed, tmp_path_factory.mktemp("multikueue-worker")) as process:
        yield process


@pytest.fixture(scope="module")
def manager(
    testbed: Testbed,
    controller: ControllerProcess,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Manager]:
    """The manager's control plane and Kueue (batch/v1 Jobs and JobSets, JobSet's CRD), connected
    to the session test-bed as its worker, where this controller and JobSet's run (the
    `controller` fixture)."""
    with running_manager(
        tmp_path_factory.mktemp("multikueue"),
        {WORKER: testbed.kubeconfig},
        frameworks=("batch/job", "jobset.x-k8s.io/jobset"),
        webhook_groups=WEBHOOK_GROUPS | {"jobset.x-k8s.io"},
        install=install_jobset_crds,
    ) as running:
        yield running


def gpu_job(name: str, namespace: str, run_seconds: int) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "suspend": True,
            "template": {
                "metadata": {"annotations": {"testbed.dra-quota.dev/run-seconds": str(run_seconds)}},
                "spec": {
                    "restartPolicy": "Never",
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "gpu"}]},
                        }
                    ],
                },
            },
        },
    }


async def _condition(kube: KubeClient, path: str, kind: str) -> Obj | None:
    obj = await kube.get_or_none(path)
    if obj is None:
        return None
    cond = status_condition(obj, kind)
    return obj if cond.get("status") == "True" else None


async def _pods(kube: KubeClient, namespace: str) -> list[Obj] | None:
    """The worker Job's pods once one runs."""
    pods, _ = await kube.list_all(
        api_path("v1", "pods", namespace), {"labelSelector": "batch.kubernetes.io/job-name=a"}
    )
    return pods if any(p.get("status", {}).get("phase") == "Running" for p in pods) else None


async def _gone(kube: KubeClient, path: str) -> bool:
    return await kube.get_or_none(path) is None


def _explain(kubeconfig: str, ref: str) -> Obj:
    out = subprocess.run(
        [
            str(ROOT / ".venv/bin/reconciler"),
            "explain",
            "workload",
            ref,
            "--kubeconfig",
            kubeconfig,
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    result: Obj = json.loads(out.stdout)
    return result


@pytest.mark.asyncio
async def test_a_gpu_job_from_a_kueue_manager_runs_on_this_controllers_worker(
    manager: Manager,
    controller: ControllerProcess,
    kube: KubeClient,
    namespace: str,
) -> None:
    await make_queues(kube, namespace, gpus=1)
    try:
        async with KubeClient.from_kubeconfig(manager.bed.kubeconfig) as mk:
            device_class = await kube.get(
                api_path("resource.k8s.io/v1", "deviceclasses", name="gpu.nvidia.com")
            )
            await manager_queues(mk, namespace, device_class, gpus=2)
            job = await mk.create(api_path("batch/v1", "jobs", namespace), gpu_job("a", namespace, 12))
            # Kueue's webhook on the manager hands the Job to MultiKueue.
            assert job["spec"].get("managedBy") == "kueue.x-k8s.io/multikueue"
            name = job_workload_name("a", job["metadata"]["uid"])
            worker_wl = api_path(KUEUE, "workloads", namespace, name)
            # The worker admits the manager's copy; the Job that follows adopts it and runs.
            admitted = await wait_for(
                "the worker's Workload admitted", lambda: _condition(kube, worker_wl, "Admitted"), within=120
            )
            assert admitted["metadata"]["labels"][ORIGIN_LABEL] == ORIGIN
            usage = admitted["status"]["admission"]["podSetAssignments"][0]["resourceUsage"]
            assert usage["nvidia.com/gpu"] == "1"
            # While the Job runs (12 s): once the manager's Workload finishes, it deletes its copies.
            worker_job_path = api_path("batch/v1", "jobs", namespace, "a")
            pods = await wait_for("the worker's Job to run", lambda: _pods(kube, namespace), within=120)
            assert all(p["metadata"]["labels"].get(WORKER_POD_LABEL) == "true" for p in pods)
            running = await kube.get(worker_job_path)
            # (An annotation: Kueue's WorkloadIdentifierAnnotations, on by default in v0.18.1.)
            assert running["metadata"]["annotations"][PREBUILT] == name
            owned = await kube.get(worker_wl)
            assert [(r["kind"], r["uid"]) for r in owned["metadata"]["ownerReferences"]] == [
                ("Job", running["metadata"]["uid"])
            ]
            explained = await asyncio.to_thread(_explain, str(controller.kubeconfig), f"{namespace}/{name}")
            assert explained["origin"] == ORIGIN
            assert explained["state"] == "admitted"
            # The manager: its Workload finished from the worker's, the worker Job's status mirrored.
            manager_wl = api_path(KUEUE, "workloads", namespace, name)
            finished = await wait_for(
                "the manager's Workload to finish", lambda: _condition(mk, manager_wl, "Finished"), within=120
            )
            assert status_condition(finished, "Finished")["reason"] == "Succeeded"
            assert finished["status"]["clusterName"] == WORKER
            manager_job = api_path("batch/v1", "jobs", namespace, "a")
            await wait_for(
                "the manager's Job to complete", lambda: _condition(mk, manager_job, "Complete"), within=60
            )
            # Then the manager removes its copies from the worker: the Job, then the Workload.
            await wait_for("the worker's copies removed", lambda: _gone(kube, worker_wl), within=90)
    finally:
        await drop_queues(kube, namespace)


def gpu_jobset(name: str, namespace: str, run_seconds: int) -> Obj:
    pod = {
        "metadata": {"annotations": {RUN_SECONDS_ANNOTATION: str(run_seconds)}},
        "spec": {
            "restartPolicy": "Never",
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": "100m"}, "claims": [{"name": "gpu"}]},
                }
            ],
        },
    }
    job = {"parallelism": 1, "completions": 1, "backoffLimit": 0, "template": pod}
    return {
        "apiVersion": JOBSET_API,
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "suspend": True,
            "replicatedJobs": [{"name": "workers", "replicas": 1, "template": {"spec": job}}],
        },
    }


async def _running_pods(kube: KubeClient, namespace: str) -> list[Obj] | None:
    pods, _ = await kube.list_all(
        api_path("v1", "pods", namespace), {"labelSelector": "jobset.sigs.k8s.io/jobset-name=js"}
    )
    return pods if any(p.get("status", {}).get("phase") == "Running" for p in pods) else None


@pytest.mark.asyncio
async def test_a_jobset_from_a_kueue_manager_runs_on_this_controllers_worker(
    manager: Manager,
    controller: ControllerProcess,
    kube: KubeClient,
    namespace: str,
) -> None:
    await make_queues(kube, namespace, gpus=1)
    try:
        async with KubeClient.from_kubeconfig(manager.bed.kubeconfig) as mk:
            device_class = await kube.get(
                api_path("resource.k8s.io/v1", "deviceclasses", name="gpu.nvidia.com")
            )
            await manager_queues(mk, namespace, device_class, gpus=2)
            created = await mk.create(
                api_path(JOBSET_API, "jobsets", namespace), gpu_jobset("js", namespace, 8)
            )
            assert created["spec"].get("managedBy") == "kueue.x-k8s.io/multikueue"
            name = workload_name_for_job("js", created["metadata"]["uid"], "JobSet", "jobset.x-k8s.io")
            worker_wl = api_path(KUEUE, "workloads", namespace, name)
            admitted = await wait_for(
                "the worker's Workload admitted", lambda: _condition(kube, worker_wl, "Admitted"), within=120
            )
            assert admitted["metadata"]["labels"]["kueue.x-k8s.io/multikueue-origin"] == ORIGIN
            (assignment,) = admitted["status"]["admission"]["podSetAssignments"]
            assert assignment["resourceUsage"]["nvidia.com/gpu"] == "1"
            pods = await wait_for(
                "the worker's JobSet to run", lambda: _running_pods(kube, namespace), within=120
            )
            assert all(p["metadata"]["labels"].get(WORKER_POD_LABEL) == "true" for p in pods)
            running = await kube.get(api_path(JOBSET_API, "jobsets", namespace, "js"))
            assert running["metadata"]["annotations"][PREBUILT] == name
            owned = await kube.get(worker_wl)
            assert [(r["kind"], r["uid"]) for r in owned["metadata"]["ownerReferences"]] == [
                ("JobSet", running["metadata"]["uid"])
            ]
            manager_wl = api_path(KUEUE, "workloads", namespace, name)
            finished = await wait_for(
                "the manager's Workload to finish", lambda: _condition(mk, manager_wl, "Finished"), within=120
            )
            assert status_condition(finished, "Finished")["reason"] == "Succeeded"
            assert finished["status"]["clusterName"] == WORKER
            manager_js = api_path(JOBSET_API, "jobsets", namespace, "js")
            await wait_for(
                "the manager's JobSet completed", lambda: _condition(mk, manager_js, "Completed"), within=60
            )
            await wait_for("the worker's copies removed", lambda: _gone(kube, worker_wl), within=90)
    finally:
        await drop_queues(kube, namespace)


async def _reasons(kube: KubeClient, namespace: str, name: str) -> list[str]:
    """The reasons of the Events about Workload `name` on the worker (repeated by their count)."""
    events, _ = await kube.list_all(
        api_path("v1", "events", namespace), {"fieldSelector": f"involvedObject.name={name}"}
    )
    return [
        e["reason"]
        for e in events
        if e["involvedObject"].get("kind") == "Workload"
        for _ in range(e.get("count") or 1)
    ]


@pytest.mark.asyncio
async def test_the_workers_controller_killed_during_a_dispatch_admits_once_and_loses_nothing(
    manager: Manager,
    controller: ControllerProcess,
    kube: KubeClient,
    namespace: str,
) -> None:
    await make_queues(kube, namespace, gpus=1)
    try:
        async with KubeClient.from_kubeconfig(manager.bed.kubeconfig) as mk:
            device_class = await kube.get(
                api_path("resource.k8s.io/v1", "deviceclasses", name="gpu.nvidia.com")
            )
            await manager_queues(mk, namespace, device_class, gpus=2)
            job = await mk.create(api_path("batch/v1", "jobs", namespace), gpu_job("k", namespace, 8))
            name = job_workload_name("k", job["metadata"]["uid"])
            worker_wl = api_path(KUEUE, "workloads", namespace, name)
            # The manager's copy has reached the worker: the worker's controller dies (SIGKILL).
            await wait_for(
                "the manager's copy on the worker", lambda: kube.get_or_none(worker_wl), within=120
            )
            await asyncio.to_thread(controller.kill)
            await asyncio.sleep(1.0)
            await asyncio.to_thread(controller.start)
            await controller.wait_ready_async()
            manager_wl = api_path(KUEUE, "workloads", namespace, name)
            finished = await wait_for(
                "the manager's Workload to finish", lambda: _condition(mk, manager_wl, "Finished"), within=180
            )
            assert status_condition(finished, "Finished")["reason"] == "Succeeded"
            assert finished["status"]["clusterName"] == WORKER
            done = await wait_for(
                "the manager's Job to complete",
                lambda: _condition(mk, api_path("batch/v1", "jobs", namespace, "k"), "Complete"),
                within=60,
            )
            # Its one pod ran once, on the worker; the worker reserved quota for it once. Events
            # are fire and forget (here as in Kueue): one queued when the kill landed is lost, so
            # "once" is at most one QuotaReserved and no eviction, which a second would need.
            assert (done["status"].get("succeeded"), done["status"].get("failed", 0)) == (1, 0)
            reasons = await _reasons(kube, namespace, name)
            assert reasons.count("QuotaReserved") <= 1, reasons
            assert not [r for r in reasons if r.startswith(("EvictedDueTo", "Preempted"))], reasons
    finally:
        await drop_queues(kube, namespace)
