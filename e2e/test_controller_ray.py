"""RayClusters and RayJobs on the test-bed with the real KubeRay operator (ray-operator v1.6.1,
the version Kueue v0.18.1 pins, and its CRDs, from its Go module: `e2e/build-binaries.sh
--kuberay`) and this controller's ray and Job webhooks (the shipped configurations on loopback,
scoped to the test's namespace).

A RayCluster of a head (CPU) and a GPU worker group (one pod asking a GPU through a
ResourceClaimTemplate) is admitted as one Workload with a `head` and a `gpu` pod set; KubeRay
makes its pods, the kube-scheduler places them on the GPU node with the claim allocated, the
node simulator runs them, KubeRay reports the cluster `ready` and the Workload gets PodsReady. A
second RayCluster waits with Kueue's message; deleting the first returns its quota and the second
is admitted and started.

A RayJob needs no real Ray to end: in K8sJobMode KubeRay makes its RayCluster (which the door
leaves unsuspended and the controller leaves to the RayJob), then a submitter Job (which gets no
Workload either); a submitter that fails (the node simulator fails its pod) ends the RayJob
`Failed`, its Workload finishes, and the next RayJob is admitted.
The session test-bed has one GPU and the ClusterQueue one GPU of quota.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio

from e2e.support.deploy import ROOT
from e2e.support.kuberay import RAY_API, KubeRayProcess, install_kuberay_crds, kuberay_build
from e2e.support.served import Served, namespace_served, start_controller, stop_controller, workload_where
from e2e.support.workloads import KUEUE
from e2e.testbed import ApiError, KubeClient, Testbed, api_path
from e2e.testbed.names import FAIL_ANNOTATION, RUN_SECONDS_ANNOTATION
from e2e.testbed.scenario import status_condition, wait_for
from reconciler.core.model.workloads import workload_name_for_job

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(300)]

Obj = dict[str, Any]
OUR_WEBHOOKS = (
    "mraycluster.kb.io",
    "vraycluster.kb.io",
    "mrayjob.kb.io",
    "vrayjob.kb.io",
    "mjob.kb.io",
    "vjob.kb.io",
)
T4 = {"nvidia.com/gpu.product": "Tesla-T4"}


@pytest.fixture(scope="module")
def kuberay(testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeRayProcess]:
    """KubeRay's operator with its CRDs; stopped at the end of the module."""
    build = kuberay_build()
    missing = build.missing()
    assert not missing, f"KubeRay {build.version} is not built ({missing}): run e2e/setup.sh --kuberay"
    process = KubeRayProcess(build, testbed.kubeconfig, tmp_path_factory.mktemp("kuberay"))

    async def up() -> None:
        async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
            await install_kuberay_crds(kube, build)
            process.start()
            await process.wait_ready_async()

    asyncio.run(up())
    yield process
    process.stop()


@pytest.fixture(scope="module")
def controller(
    testbed: Testbed, kuberay: KubeRayProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """`reconciler run` with the ray frameworks and batch/job on (after KubeRay's CRDs), its
    webhooks on loopback, GPUs charged through DRA."""
    served = start_controller(
        testbed.kubeconfig,
        tmp_path_factory.mktemp("controller-ray"),
        ["batch/job", "ray.io/rayjob", "ray.io/raycluster"],
        extra={"waitForPodsReady": {"timeout": "120s"}},
    )
    yield served
    stop_controller(served)


def pod_template(*, gpu: bool, annotations: Obj | None = None) -> Obj:
    """A Ray pod (serving: runs until deleted); with a GPU claim from `one-gpu` when `gpu`."""
    resources: Obj = {"requests": {"cpu": "100m"}}
    spec: Obj = {"containers": [{"name": "ray", "image": "rayproject/ray:2.46.0", "resources": resources}]}
    if gpu:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
        resources["claims"] = [{"name": "gpu"}]
    return {"metadata": {"annotations": annotations or {RUN_SECONDS_ANNOTATION: "forever"}}, "spec": spec}


def cluster_spec() -> Obj:
    return {
        "headGroupSpec": {"rayStartParams": {}, "template": pod_template(gpu=False)},
        "workerGroupSpecs": [
            {
                "groupName": "gpu",
                "replicas": 1,
                "minReplicas": 1,
                "maxReplicas": 1,
                "rayStartParams": {},
                "template": pod_template(gpu=True),
            }
        ],
    }


def _meta(name: str, namespace: str) -> Obj:
    return {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "lq"}}


def raycluster(name: str, namespace: str) -> Obj:
    return {
        "apiVersion": RAY_API,
        "kind": "RayCluster",
        "metadata": _meta(name, namespace),
        "spec": cluster_spec(),
    }


def rayjob(name: str, namespace: str) -> Obj:
    submitter = pod_template(gpu=False, annotations={FAIL_ANNOTATION: "true"})
    submitter["spec"]["restartPolicy"] = "Never"
    return {
        "apiVersion": RAY_API,
        "kind": "RayJob",
        "metadata": _meta(name, namespace),
        "spec": {
            "entrypoint": "python -c 'print(1)'",
            "shutdownAfterJobFinishes": True,
            "submissionMode": "K8sJobMode",
            "submitterConfig": {"backoffLimit": 0},
            "submitterPodTemplate": submitter,
            "rayClusterSpec": cluster_spec(),
        },
    }


@pytest_asyncio.fixture
async def served(controller: Served, kube: KubeClient, namespace: str) -> AsyncIterator[str]:
    """Queues with 1 GPU, a one-GPU ResourceClaimTemplate, and the shipped ray and Job webhooks
    registered for this namespace only; waits until the API server calls them."""

    async def suspending() -> bool:
        body = raycluster("probe", namespace)
        created = await kube.request(
            "POST", api_path(RAY_API, "rayclusters", namespace), params={"dryRun": "All"}, body=body
        )
        return bool(created["spec"].get("suspend"))

    ready = ("the RayCluster webhook to suspend", suspending)
    async with namespace_served(kube, controller, namespace, OUR_WEBHOOKS, gpus=1, ready=ready):
        yield namespace


async def create(kube: KubeClient, body: Obj) -> str:
    """Creates the RayCluster or RayJob; returns its Workload's name."""
    plural = body["kind"].lower() + "s"
    namespace = body["metadata"]["namespace"]
    created = await kube.create(api_path(RAY_API, plural, namespace), body)
    return workload_name_for_job(body["metadata"]["name"], created["metadata"]["uid"], body["kind"], "ray.io")


def waiting_message(namespace: str) -> str:
    return (
        "couldn't assign flavors to pod set gpu: insufficient unused quota for nvidia.com/gpu "
        f"in flavor t4-{namespace}, 1 more needed"
    )


async def cluster_pods(kube: KubeClient, namespace: str, cluster: str) -> list[Obj]:
    pods, _ = await kube.list_all(
        api_path("v1", "pods", namespace), {"labelSelector": f"ray.io/cluster={cluster}"}
    )
    return pods


@pytest.mark.asyncio
async def test_a_raycluster_runs_as_one_workload_and_the_next_waits_for_its_quota(
    served: str, kube: KubeClient, testbed: Testbed
) -> None:
    namespace = served
    first = await create(kube, raycluster("first", namespace))
    admitted = await workload_where(kube, namespace, first, "Admitted", "True")
    assert [(ps["name"], ps["count"]) for ps in admitted["spec"]["podSets"]] == [("head", 1), ("gpu", 1)]
    usage = {a["name"]: a["resourceUsage"] for a in admitted["status"]["admission"]["podSetAssignments"]}
    assert usage == {"head": {"cpu": "100m"}, "gpu": {"cpu": "100m", "nvidia.com/gpu": "1"}}

    second = await create(kube, raycluster("second", namespace))
    pending = await workload_where(kube, namespace, second, "QuotaReserved", "False")
    assert status_condition(pending, "QuotaReserved")["message"] == waiting_message(namespace)
    assert (await kube.get(api_path(RAY_API, "rayclusters", namespace, "second")))["spec"]["suspend"] is True
    # `reconciler explain` takes the kind by its name and finds its Workload.
    argv = [sys.executable, "-m", "reconciler.cli", "explain", "raycluster", f"{namespace}/second"]
    argv += ["--kubeconfig", str(testbed.kubeconfig)]
    words = await asyncio.to_thread(
        subprocess.run, argv, capture_output=True, text=True, cwd=ROOT, timeout=60, check=False
    )
    assert words.returncode == 0, words.stderr
    said = f"RayCluster {namespace}/second is PENDING: it waits for quota"
    assert words.stdout.startswith(said), words.stdout

    # KubeRay makes the pods; placed on the GPU node by their flavor, the worker's claim allocated.
    async def running() -> list[Obj] | None:
        pods = await cluster_pods(kube, namespace, "first")
        up = [p for p in pods if p["status"].get("phase") == "Running"]
        return up if len(up) == 2 else None

    pods = await wait_for("the first cluster's head and worker to run", running, within=120, interval=0.5)
    assert sorted(p["metadata"]["labels"]["ray.io/node-type"] for p in pods) == ["head", "worker"]
    assert all(p["spec"]["nodeName"] == "gpu-node-1" for p in pods)
    assert all(T4.items() <= p["spec"]["nodeSelector"].items() for p in pods)
    (worker,) = [p for p in pods if p["metadata"]["labels"]["ray.io/node-type"] == "worker"]
    assert worker["status"]["resourceClaimStatuses"][0]["name"] == "gpu"
    ready = await workload_where(kube, namespace, first, "PodsReady", "True")
    assert status_condition(ready, "PodsReady")["reason"] == "Started"
    state = (await kube.get(api_path(RAY_API, "rayclusters", namespace, "first")))["status"]["state"]
    assert state == "ready"

    # Deleted, the first's quota returns: the second is admitted and started.
    await kube.delete(api_path(RAY_API, "rayclusters", namespace, "first"))
    await workload_where(kube, namespace, second, "Admitted", "True")

    async def started() -> bool:
        body = await kube.get(api_path(RAY_API, "rayclusters", namespace, "second"))
        return body["spec"].get("suspend") is False

    await wait_for("the second RayCluster to be started", started, within=60, interval=0.3)


@pytest.mark.asyncio
async def test_a_rayjob_runs_its_cluster_and_submitter_under_its_workload_and_finishes(
    served: str, kube: KubeClient
) -> None:
    namespace = served
    first = await create(kube, rayjob("first", namespace))
    admitted = await workload_where(kube, namespace, first, "Admitted", "True")
    assert [(ps["name"], ps["count"]) for ps in admitted["spec"]["podSets"]] == [
        ("head", 1),
        ("gpu", 1),
        ("submitter", 1),
    ]
    second = await create(kube, rayjob("second", namespace))
    pending = await workload_where(kube, namespace, second, "QuotaReserved", "False")
    assert status_condition(pending, "QuotaReserved")["message"] == waiting_message(namespace)

    # KubeRay makes the RayJob's cluster (with the RayJob's queue label): not suspended at the
    # door, no Workload of its own; its pods run on the GPU node.
    async def cluster_name() -> str | None:
        body = await kube.get(api_path(RAY_API, "rayjobs", namespace, "first"))
        return (body.get("status") or {}).get("rayClusterName") or None

    name = await wait_for("KubeRay to name the RayJob's cluster", cluster_name, within=60, interval=0.3)
    # (KubeRay writes the name to the RayJob's status before it creates the cluster.)
    path = api_path(RAY_API, "rayclusters", namespace, name)
    cluster = await wait_for("KubeRay to make it", lambda: kube.get_or_none(path), within=60, interval=0.3)
    assert cluster["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "lq"
    assert not cluster["spec"].get("suspend")

    # Its submitter fails (the node simulator fails its pod): KubeRay ends the RayJob Failed.
    finished = await workload_where(kube, namespace, first, "Finished", "True")
    assert status_condition(finished, "Finished")["reason"] == "Failed"
    job = await kube.get(api_path(RAY_API, "rayjobs", namespace, "first"))
    assert job["status"]["jobDeploymentStatus"] == "Failed"
    jobs, _ = await kube.list_all(api_path("batch/v1", "jobs", namespace))
    assert [j["metadata"]["ownerReferences"][0]["kind"] for j in jobs] == ["RayJob"]  # the submitter

    # The quota returns: the second is admitted. Only the RayJobs have Workloads.
    await workload_where(kube, namespace, second, "Admitted", "True")
    workloads, _ = await kube.list_all(api_path(KUEUE, "workloads", namespace))
    owners = sorted(w["metadata"]["ownerReferences"][0]["kind"] for w in workloads)
    assert owners == ["RayJob", "RayJob"]


@pytest.mark.asyncio
async def test_a_rayjobs_cluster_given_more_workers_while_admitted_is_refused(
    served: str, kube: KubeClient
) -> None:
    """Beyond Kueue (issue 42): KubeRay's RayCluster of an admitted RayJob patched from 1 GPU
    worker to 2 is refused by vraycluster.kb.io, naming the field, the RayJob and its Workload;
    the cluster keeps its one worker."""
    namespace = served
    body = rayjob("grown", namespace)
    body["spec"]["submitterPodTemplate"] = pod_template(gpu=False)  # (runs until deleted)
    body["spec"]["submitterPodTemplate"]["spec"]["restartPolicy"] = "Never"
    workload = await create(kube, body)
    await workload_where(kube, namespace, workload, "Admitted", "True")

    async def cluster_name() -> str | None:
        job = await kube.get(api_path(RAY_API, "rayjobs", namespace, "grown"))
        return (job.get("status") or {}).get("rayClusterName") or None

    name = await wait_for("KubeRay to name the RayJob's cluster", cluster_name, within=60, interval=0.3)
    path = api_path(RAY_API, "rayclusters", namespace, name)
    made = await wait_for("KubeRay to make it", lambda: kube.get_or_none(path), within=60, interval=0.3)
    groups = made["spec"]["workerGroupSpecs"]
    groups[0].update({"replicas": 2, "maxReplicas": 2})
    with pytest.raises(ApiError) as refused:
        await kube.patch(path, {"spec": {"workerGroupSpecs": groups}})
    assert isinstance(refused.value.body, dict)
    message = refused.value.body["message"]
    assert (
        'admission webhook "vraycluster.kb.io" denied the request: spec.workerGroupSpecs: Forbidden: '
        f"would run 3 pods where 2 ran: its parent RayJob {namespace}/grown is admitted (Workload "
        f"{workload})"
    ) in message, message
    assert (await kube.get(path))["spec"]["workerGroupSpecs"][0]["replicas"] == 1
