"""A JobSet dispatched by a real Kueue v0.18.1 MultiKueue manager to a worker running this
controller and the real JobSet controller (issue 41). The manager (a control plane of its own,
JobSet's CRD installed, no JobSet controller: Kueue's webhook hands the JobSet to MultiKueue with
`spec.managedBy`) copies its Workload to the worker, then the JobSet naming it; the worker admits
the Workload (its GPU charged through `deviceClassMappings`), the JobSet adopts it and its pods
run with the worker pod label; the manager finishes its Workload, mirrors the JobSet's status and
removes its copies."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from e2e.conformance.kueue import WEBHOOK_GROUPS
from e2e.support.deploy import ControllerProcess
from e2e.support.jobset import install_jobset_crds
from e2e.support.multikueue import ORIGIN, WORKER, Manager, manager_queues, running_manager
from e2e.support.queues import drop_queues, make_queues
from e2e.support.workloads import KUEUE
from e2e.test_controller_jobset import controller, jobset_manager  # noqa: F401  (the worker's)
from e2e.testbed import KubeClient, Testbed, api_path
from e2e.testbed.names import RUN_SECONDS_ANNOTATION
from e2e.testbed.scenario import status_condition, wait_for
from reconciler.core.model.workloads import workload_name_for_job

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(420)]

Obj = dict[str, Any]
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
WORKER_POD_LABEL = "kueue.x-k8s.io/multikueue-worker-workload-pod"


@pytest.fixture(scope="module")
def manager(
    testbed: Testbed,
    controller: ControllerProcess,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Manager]:
    """The manager with the jobset framework and JobSet's CRD, over the session test-bed."""
    with running_manager(
        tmp_path_factory.mktemp("multikueue-jobset"),
        testbed.kubeconfig,
        frameworks=("batch/job", "jobset.x-k8s.io/jobset"),
        webhook_groups=WEBHOOK_GROUPS | {"jobset.x-k8s.io"},
        install=install_jobset_crds,
    ) as running:
        yield running


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


async def _true(kube: KubeClient, path: str, kind: str) -> Obj | None:
    obj = await kube.get_or_none(path)
    return obj if obj is not None and status_condition(obj, kind).get("status") == "True" else None


async def _running_pods(kube: KubeClient, namespace: str) -> list[Obj] | None:
    pods, _ = await kube.list_all(
        api_path("v1", "pods", namespace), {"labelSelector": "jobset.sigs.k8s.io/jobset-name=js"}
    )
    return pods if any(p.get("status", {}).get("phase") == "Running" for p in pods) else None


async def _gone(kube: KubeClient, path: str) -> bool:
    return await kube.get_or_none(path) is None


@pytest.mark.asyncio
async def test_a_jobset_from_a_kueue_manager_runs_on_this_controllers_worker(
    manager: Manager,
    controller: ControllerProcess,  # noqa: F811
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
                api_path(JOBSET_API, "jobsets", namespace), gpu_jobset("js", namespace, 15)
            )
            assert created["spec"].get("managedBy") == "kueue.x-k8s.io/multikueue"
            name = workload_name_for_job("js", created["metadata"]["uid"], "JobSet", "jobset.x-k8s.io")
            worker_wl = api_path(KUEUE, "workloads", namespace, name)
            admitted = await wait_for(
                "the worker's Workload admitted", lambda: _true(kube, worker_wl, "Admitted"), within=120
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
                "the manager's Workload to finish", lambda: _true(mk, manager_wl, "Finished"), within=120
            )
            assert status_condition(finished, "Finished")["reason"] == "Succeeded"
            assert finished["status"]["clusterName"] == WORKER
            manager_js = api_path(JOBSET_API, "jobsets", namespace, "js")
            await wait_for(
                "the manager's JobSet completed", lambda: _true(mk, manager_js, "Completed"), within=60
            )
            await wait_for("the worker's copies removed", lambda: _gone(kube, worker_wl), within=90)
    finally:
        await drop_queues(kube, namespace)
