"""AppWrappers on the test-bed with the real AppWrapper controller (v1.2.2, the version Kueue
v0.18.1 pins, and its CRD, from its Go module: `e2e/build-binaries.sh --appwrapper`; see
e2e/support/appwrapper.py for how it runs) and this controller's AppWrapper and Job webhooks
(the shipped configurations on loopback, scoped to the test's namespace).

An AppWrapper wrapping a batch/v1 Job of one pod asking a GPU through a ResourceClaimTemplate is
admitted as one Workload (pod set ``<name>-0``) charged one GPU; started with its flavor's node
labels in its component's ``podSetInfos``, the AppWrapper controller creates the Job (which the
Job door leaves unsuspended and which gets no Workload: the AppWrapper is its controller) with
them in its pod template; the kube-scheduler places the pod on the GPU node with the claim
allocated, the node simulator runs it. A second AppWrapper waits with Kueue's message; when the
first's pod succeeds the AppWrapper controller ends it ``Succeeded``, its Workload finishes, and
the second is admitted and started. An AppWrapper whose Workload is deactivated while its pod runs
is suspended with its podSetInfos cleared; the AppWrapper controller deletes its Job and the quota
returns.
The session test-bed has one GPU and the ClusterQueue one GPU of quota.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio

from e2e.support.appwrapper import (
    APPWRAPPER_API,
    AppWrapperProcess,
    appwrapper_build,
    install_appwrapper_crds,
)
from e2e.support.served import Served, namespace_served, start_controller, stop_controller, workload_where
from e2e.support.workloads import KUEUE
from e2e.testbed import KubeClient, Testbed, api_path
from e2e.testbed.names import RUN_SECONDS_ANNOTATION
from e2e.testbed.scenario import status_condition, wait_for
from reconciler.core.model.workloads import workload_name_for_job

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(300)]

Obj = dict[str, Any]
OUR_WEBHOOKS = ("mappwrapper.kb.io", "vappwrapper.kb.io", "mjob.kb.io", "vjob.kb.io")
T4 = {"nvidia.com/gpu.product": "Tesla-T4"}
PODSET_LABEL = "kueue.x-k8s.io/podset"


@pytest.fixture(scope="module")
def appwrapper(testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppWrapperProcess]:
    """The AppWrapper controller with its CRD; stopped at the end of the module."""
    build = appwrapper_build()
    missing = build.missing()
    assert not missing, f"AppWrapper {build.version} is not built ({missing}): run e2e/setup.sh --appwrapper"
    process = AppWrapperProcess(build, testbed.kubeconfig, tmp_path_factory.mktemp("appwrapper"))

    async def up() -> None:
        async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
            await install_appwrapper_crds(kube, build)
            await process.write_configuration(kube)
            process.start()
            await process.wait_ready_async()

    asyncio.run(up())
    yield process
    process.stop()


@pytest.fixture(scope="module")
def controller(
    testbed: Testbed, appwrapper: AppWrapperProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """`reconciler run` with the AppWrapper framework and batch/job on (after the AppWrapper CRD),
    its webhooks on loopback, GPUs charged through DRA."""
    served = start_controller(
        testbed.kubeconfig,
        tmp_path_factory.mktemp("controller-appwrapper"),
        ["batch/job", "workload.codeflare.dev/appwrapper"],
        extra={"waitForPodsReady": {"timeout": "120s"}},
    )
    yield served
    stop_controller(served)


def wrapped_job(name: str, run_seconds: str) -> Obj:
    """A Job of one pod asking a GPU from `one-gpu` (the node simulator runs it `run_seconds`)."""
    container = {
        "name": "work",
        "image": "busybox:1.36",
        "resources": {"requests": {"cpu": "100m"}, "claims": [{"name": "gpu"}]},
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {RUN_SECONDS_ANNOTATION: run_seconds}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [container],
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                },
            },
        },
    }


def appwrapper_body(name: str, namespace: str, run_seconds: str = "forever") -> Obj:
    return {
        "apiVersion": APPWRAPPER_API,
        "kind": "AppWrapper",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {"components": [{"template": wrapped_job(f"{name}-job", run_seconds)}]},
    }


@pytest_asyncio.fixture
async def served(controller: Served, kube: KubeClient, namespace: str) -> AsyncIterator[str]:
    """Queues with 1 GPU, a one-GPU ResourceClaimTemplate, and the shipped AppWrapper and Job
    webhooks registered for this namespace only; waits until the API server calls them."""

    async def suspending() -> bool:
        created = await kube.request(
            "POST",
            api_path(APPWRAPPER_API, "appwrappers", namespace),
            params={"dryRun": "All"},
            body=appwrapper_body("probe", namespace),
        )
        return bool(created["spec"].get("suspend"))

    ready = ("the AppWrapper webhook to suspend", suspending)
    async with namespace_served(kube, controller, namespace, OUR_WEBHOOKS, gpus=1, ready=ready):
        yield namespace


async def create(kube: KubeClient, body: Obj) -> str:
    """Creates the AppWrapper; returns its Workload's name."""
    namespace = body["metadata"]["namespace"]
    created = await kube.create(api_path(APPWRAPPER_API, "appwrappers", namespace), body)
    name, uid = body["metadata"]["name"], created["metadata"]["uid"]
    return workload_name_for_job(name, uid, "AppWrapper", "workload.codeflare.dev")


@pytest.mark.asyncio
async def test_an_appwrapped_gpu_job_runs_as_one_workload_and_the_next_waits_for_its_quota(
    served: str, kube: KubeClient
) -> None:
    namespace = served
    first = await create(kube, appwrapper_body("first", namespace, run_seconds="15"))
    admitted = await workload_where(kube, namespace, first, "Admitted", "True")
    assert [(ps["name"], ps["count"]) for ps in admitted["spec"]["podSets"]] == [("first-0", 1)]
    (assignment,) = admitted["status"]["admission"]["podSetAssignments"]
    assert assignment["resourceUsage"] == {"cpu": "100m", "nvidia.com/gpu": "1"}

    second = await create(kube, appwrapper_body("second", namespace))
    pending = await workload_where(kube, namespace, second, "QuotaReserved", "False")
    assert status_condition(pending, "QuotaReserved")["message"] == (
        "couldn't assign flavors to pod set second-0: insufficient unused quota for nvidia.com/gpu "
        f"in flavor t4-{namespace}, 1 more needed"
    )
    path = api_path(APPWRAPPER_API, "appwrappers", namespace, "second")
    assert (await kube.get(path))["spec"]["suspend"] is True

    # Started: the flavor's node labels in the component's podSetInfos; the AppWrapper controller
    # makes the Job with them, which gets no Workload and is not suspended.
    async def first_started() -> Obj | None:
        body = await kube.get(api_path(APPWRAPPER_API, "appwrappers", namespace, "first"))
        return None if body["spec"].get("suspend", False) else body  # (dropped when false: omitempty)

    started = await wait_for("the first AppWrapper to be started", first_started, within=60, interval=0.3)
    (info,) = started["spec"]["components"][0]["podSetInfos"]
    assert T4.items() <= info["nodeSelector"].items()
    assert info["labels"][PODSET_LABEL] == "first-0"
    job_path = api_path("batch/v1", "jobs", namespace, "first-job")
    job = await wait_for(
        "the AppWrapper controller to make the Job", lambda: kube.get_or_none(job_path), within=60
    )
    assert job["metadata"]["ownerReferences"][0]["kind"] == "AppWrapper"
    assert not job["spec"].get("suspend")

    async def running() -> Obj | None:
        pods, _ = await kube.list_all(
            api_path("v1", "pods", namespace), {"labelSelector": "workload.codeflare.dev/appwrapper=first"}
        )
        up = [p for p in pods if p["status"].get("phase") in ("Running", "Succeeded")]
        return up[0] if up else None

    pod = await wait_for("the first AppWrapper's pod to run", running, within=120, interval=0.5)
    assert pod["spec"]["nodeName"] == "gpu-node-1"
    assert T4.items() <= pod["spec"]["nodeSelector"].items()
    assert pod["status"]["resourceClaimStatuses"][0]["name"] == "gpu"
    ready = await workload_where(kube, namespace, first, "PodsReady", "True")
    assert status_condition(ready, "PodsReady")["reason"] == "Started"

    # Its pod succeeds: the AppWrapper controller ends it Succeeded, the Workload finishes, the
    # quota returns and the second is admitted and started.
    finished = await workload_where(kube, namespace, first, "Finished", "True", within=180)
    assert status_condition(finished, "Finished")["message"] == "AppWrapper finished successfully"
    assert (await kube.get(api_path(APPWRAPPER_API, "appwrappers", namespace, "first")))["status"][
        "phase"
    ] == "Succeeded"
    await workload_where(kube, namespace, second, "Admitted", "True")

    async def second_started() -> bool:
        return not (await kube.get(path))["spec"].get("suspend", False)

    await wait_for("the second AppWrapper to be started", second_started, within=60, interval=0.3)
    workloads, _ = await kube.list_all(api_path(KUEUE, "workloads", namespace))
    assert sorted(w["metadata"]["ownerReferences"][0]["kind"] for w in workloads) == [
        "AppWrapper",
        "AppWrapper",
    ]


@pytest.mark.asyncio
async def test_an_evicted_appwrapper_is_suspended_its_pod_set_infos_cleared_and_its_job_deleted(
    served: str, kube: KubeClient
) -> None:
    """The Workload deactivated while the AppWrapper's pod runs: evicted, the AppWrapper suspended
    with its podSetInfos cleared (its components as created), the AppWrapper controller deletes
    the Job and ends in the Suspended phase, the quota returns."""
    namespace = served
    created = appwrapper_body("long", namespace)
    name = await create(kube, created)
    await workload_where(kube, namespace, name, "Admitted", "True")
    path = api_path(APPWRAPPER_API, "appwrappers", namespace, "long")

    async def running() -> bool:
        pods, _ = await kube.list_all(
            api_path("v1", "pods", namespace), {"labelSelector": "workload.codeflare.dev/appwrapper=long"}
        )
        return any(p["status"].get("phase") == "Running" for p in pods)

    await wait_for("the AppWrapper's pod to run", running, within=120, interval=0.5)
    await kube.patch(api_path(KUEUE, "workloads", namespace, name), {"spec": {"active": False}})
    evicted = await workload_where(kube, namespace, name, "Evicted", "True")
    assert status_condition(evicted, "Evicted")["reason"] == "Deactivated"

    async def suspended() -> Obj | None:
        body = await kube.get(path)
        return (
            body
            if body["spec"].get("suspend") and body.get("status", {}).get("phase") == "Suspended"
            else None
        )

    stopped = await wait_for("the AppWrapper suspended", suspended, within=90, interval=0.5)
    assert stopped["spec"]["components"] == created["spec"]["components"]
    job_path = api_path("batch/v1", "jobs", namespace, "long-job")

    async def job_gone() -> bool:
        return await kube.get_or_none(job_path) is None

    await wait_for("the AppWrapper controller to delete the Job", job_gone, within=90, interval=0.5)

    async def released() -> bool:
        cq = await kube.get(api_path(KUEUE, "clusterqueues", name=f"cq-{namespace}"))
        usage = (cq.get("status") or {}).get("flavorsUsage") or []
        return all(r["total"] in ("0", 0) for f in usage for r in f["resources"])

    await wait_for("the quota to be released", released, within=60, interval=0.3)
