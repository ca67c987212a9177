"""Serving workloads on the test-bed, as Kueue v0.18.1's `deployment` and `statefulset`
frameworks treat them: the real kube-controller-manager makes the Deployment's ReplicaSet and
pods and the StatefulSet's pods; this controller's Deployment, StatefulSet and pod webhooks (the
shipped configurations on loopback, scoped to the test's namespace) mark the pod templates and
hold each pod at Kueue's scheduling gate (`pod` implied by them, not listed); the real
kube-scheduler places the admitted pods, their GPU claims allocated, and the node simulator runs
them.

A GPU Deployment scaled from 1 to 3 replicas on 2 GPUs of quota: each pod a single pod with its
own Workload, two run, the third waits gated with Kueue's message; scaled down to 1, the pods go
and so does their charge. A StatefulSet of 2 GPU replicas: one Workload made from the set (one
pod set of two), admitted as one group; a pod deleted is made again by the StatefulSet
controller and ungated under the same Workload, which keeps its quota throughout. At the end of
each, no ClusterQueue runs more devices (counted from the running pods' allocated claims) than
its Workloads are charged.

Its own test-bed: one node with two Tesla T4s.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio

from e2e.support.served import Served, namespace_served, own_bed, start_controller, stop_controller
from e2e.support.workloads import KUEUE
from e2e.testbed import KubeClient, Testbed, api_path
from e2e.testbed.clusters import Cluster
from e2e.testbed.names import RUN_SECONDS_ANNOTATION
from e2e.testbed.scenario import status_condition, wait_for
from e2e.testbed.spec import GpuSpec, NodeSpec, TestbedSpec

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(300)]

Obj = dict[str, Any]
GATE = "kueue.x-k8s.io/admission"
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
OUR_WEBHOOKS = (
    "mdeployment.kb.io",
    "vdeployment.kb.io",
    "mstatefulset.kb.io",
    "vstatefulset.kb.io",
    "mpod.kb.io",
    "vpod.kb.io",
)
PARENT = "kueue.x-k8s.io/pod-suspending-parent"
GPU = "nvidia.com/gpu"
T4 = {"nvidia.com/gpu.product": "Tesla-T4"}
SPEC = TestbedSpec(nodes=[NodeSpec(name="gpu-node-1", labels=T4, gpus=GpuSpec(count=2, model="Tesla-T4"))])


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    """A test-bed of its own: one node with two GPUs."""
    yield from own_bed(tmp_path_factory, "serving", SPEC)


@pytest.fixture
def cluster(bed: Testbed) -> Cluster:
    """This module's test-bed (the `kube` and `namespace` fixtures use it)."""
    return Cluster(kubeconfig=bed.kubeconfig, target="testbed", testbed=bed)


@pytest.fixture(scope="module")
def controller(bed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`reconciler run` with `deployment` and `statefulset` listed (`pod` implied), its webhooks
    on loopback."""
    frameworks = ["batch/job", "deployment", "statefulset"]
    served = start_controller(bed.kubeconfig, tmp_path_factory.mktemp("controller-serving"), frameworks)
    yield served
    stop_controller(served)


def pod_template(app: str) -> Obj:
    """A serving pod (runs until deleted) with a GPU claim from `one-gpu`."""
    resources: Obj = {"requests": {"cpu": "100m"}, "claims": [{"name": "gpu"}]}
    return {
        "metadata": {"labels": {"app": app}, "annotations": {RUN_SECONDS_ANNOTATION: "forever"}},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
            "containers": [{"name": "main", "image": "busybox", "resources": resources}],
        },
    }


def deployment(name: str, namespace: str, replicas: int) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": pod_template(name),
        },
    }


@pytest_asyncio.fixture
async def served(controller: Served, kube: KubeClient, namespace: str) -> AsyncIterator[str]:
    """Queues with 2 GPUs, a one-GPU ResourceClaimTemplate, and the shipped Deployment and pod
    webhooks registered for this namespace only; waits until the API server calls them."""

    async def marked() -> bool:
        created = await kube.request(
            "POST",
            api_path("apps/v1", "deployments", namespace),
            params={"dryRun": "All"},
            body=deployment("probe", namespace, 1),
        )
        return PARENT in (created["spec"]["template"]["metadata"].get("annotations") or {})

    ready = ("the Deployment webhook to mark templates", marked)
    async with namespace_served(
        kube, controller, namespace, OUR_WEBHOOKS, gpus=2, base="serving", ready=ready
    ):
        yield namespace


async def pods_of(kube: KubeClient, namespace: str, app: str) -> list[Obj]:
    found = await kube.get(api_path("v1", "pods", namespace), params={"labelSelector": f"app={app}"})
    return [p for p in found["items"] if not p["metadata"].get("deletionTimestamp")]


async def workload_of(kube: KubeClient, namespace: str, pod: Obj) -> Obj | None:
    workloads: list[Obj] = (await kube.get(api_path(KUEUE, "workloads", namespace)))["items"]
    for workload in workloads:
        if any(r["uid"] == pod["metadata"]["uid"] for r in workload["metadata"].get("ownerReferences", [])):
            return workload
    return None


def charged_gpus(workloads: list[Obj]) -> int:
    """GPUs charged to Workloads holding quota (QuotaReserved and not Finished)."""
    total = 0
    for workload in workloads:
        reserved = status_condition(workload, "QuotaReserved").get("status") == "True"
        finished = status_condition(workload, "Finished").get("status") == "True"
        if not reserved or finished:
            continue
        for assignment in workload["status"]["admission"]["podSetAssignments"]:
            total += int(assignment.get("resourceUsage", {}).get(GPU, "0"))
    return total


async def running_devices(kube: KubeClient, namespace: str) -> int:
    """Devices allocated to the claims of the namespace's running pods."""
    claims = {
        c["metadata"]["name"]: c
        for c in (await kube.get(api_path("resource.k8s.io/v1", "resourceclaims", namespace)))["items"]
    }
    total = 0
    for pod in (await kube.get(api_path("v1", "pods", namespace)))["items"]:
        if pod["status"].get("phase") != "Running":
            continue
        for status in pod["status"].get("resourceClaimStatuses") or []:
            claim = claims.get(status.get("resourceClaimName", ""))
            allocation = (claim or {}).get("status", {}).get("allocation") or {}
            total += len(allocation.get("devices", {}).get("results") or [])
    return total


async def assert_no_more_devices_than_charged(kube: KubeClient, namespace: str) -> None:
    workloads = (await kube.get(api_path(KUEUE, "workloads", namespace)))["items"]
    charged, running = charged_gpus(workloads), await running_devices(kube, namespace)
    assert running <= charged, f"{running} devices run in {namespace}, {charged} charged"


@pytest.mark.asyncio
async def test_a_gpu_deployment_scaled_to_three_on_two_gpus_runs_two_and_the_third_waits(
    kube: KubeClient, served: str
) -> None:
    namespace = served
    path = api_path("apps/v1", "deployments", namespace)
    created = await kube.create(path, deployment("infer", namespace, 1))
    template = created["spec"]["template"]["metadata"]
    assert template["annotations"][PARENT] == "deployment"
    assert template["labels"]["kueue.x-k8s.io/managed"] == "true"
    assert template["labels"]["kueue.x-k8s.io/queue-name"] == "lq"

    async def running(count: int) -> list[Obj] | None:
        pods = await pods_of(kube, namespace, "infer")
        up = [p for p in pods if p["status"].get("phase") == "Running"]
        return up if len(up) == count else None

    (first,) = await wait_for("the first replica to run", lambda: running(1), within=120, interval=0.5)
    assert "finalizers" not in first["metadata"]  # suspended by its parent: no Kueue finalizer
    assert first["spec"]["nodeSelector"] == T4
    workload = await workload_of(kube, namespace, first)
    assert workload is not None
    assert [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]] == [("main", 1)]

    await kube.patch(api_path("apps/v1", "deployments", namespace, "infer"), {"spec": {"replicas": 3}})
    up = await wait_for("two replicas to run", lambda: running(2), within=120, interval=0.5)
    assert {p["spec"]["nodeName"] for p in up} == {"gpu-node-1"}

    async def third_waiting() -> tuple[Obj, Obj] | None:
        for pod in await pods_of(kube, namespace, "infer"):
            if pod["status"].get("phase") == "Running":
                continue
            waiting = await workload_of(kube, namespace, pod)
            if waiting is not None and status_condition(waiting, "QuotaReserved").get("status") == "False":
                return pod, waiting
        return None

    pod, waiting = await wait_for(
        "the third replica's Workload to wait", third_waiting, within=60, interval=0.5
    )
    assert status_condition(waiting, "QuotaReserved")["message"] == (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
        f"in flavor t4-{namespace}, 1 more needed"
    )
    assert [g["name"] for g in pod["spec"]["schedulingGates"]] == [GATE, TOPOLOGY_GATE]
    assert not pod["spec"].get("nodeName")
    await asyncio.sleep(2)  # still waiting: the two hold the quota
    assert len(await running(2) or []) == 2
    await assert_no_more_devices_than_charged(kube, namespace)

    # Scaled down to one: the waiting pod and one running pod go, and so does their charge.
    await kube.patch(api_path("apps/v1", "deployments", namespace, "infer"), {"spec": {"replicas": 1}})

    async def one_charged() -> bool:
        workloads = (await kube.get(api_path(KUEUE, "workloads", namespace)))["items"]
        return len(await pods_of(kube, namespace, "infer")) == 1 and charged_gpus(workloads) == 1

    await wait_for("one replica left, one GPU charged", one_charged, within=120, interval=0.5)
    await assert_no_more_devices_than_charged(kube, namespace)
    await kube.delete(api_path("apps/v1", "deployments", namespace, "infer"))


def statefulset(name: str, namespace: str, replicas: int) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": pod_template(name),
        },
    }


@pytest.mark.asyncio
async def test_a_gpu_statefulset_is_one_group_and_a_deleted_pod_is_replaced_keeping_the_quota(
    kube: KubeClient, served: str
) -> None:
    namespace = served
    created = await kube.create(
        api_path("apps/v1", "statefulsets", namespace), statefulset("web", namespace, 2)
    )
    assert created["spec"]["template"]["metadata"]["annotations"][PARENT] == "statefulset"

    async def running(count: int) -> list[Obj] | None:
        pods = await pods_of(kube, namespace, "web")
        up = [p for p in pods if p["status"].get("phase") == "Running"]
        return up if len(up) == count else None

    up = await wait_for("both replicas to run", lambda: running(2), within=150, interval=0.5)
    (workload,) = (await kube.get(api_path(KUEUE, "workloads", namespace)))["items"]
    name = workload["metadata"]["name"]
    assert name.startswith("statefulset-web-")
    assert [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]] == [("main", 2)]
    assert charged_gpus([workload]) == 2
    for pod in up:
        annotations = pod["metadata"]["annotations"]
        assert annotations["kueue.x-k8s.io/pod-group-name"] == name
        assert annotations["kueue.x-k8s.io/pod-group-serving"] == "true"
        assert annotations["kueue.x-k8s.io/pod-group-total-count"] == "2"
        assert pod["spec"]["nodeSelector"] == T4
    await assert_no_more_devices_than_charged(kube, namespace)

    # One pod deleted: the StatefulSet controller makes it again, ungated under the same Workload.
    old_uid = next(p["metadata"]["uid"] for p in up if p["metadata"]["name"] == "web-1")
    await kube.delete(api_path("v1", "pods", namespace, "web-1"))

    async def replaced() -> Obj | None:
        workloads = (await kube.get(api_path(KUEUE, "workloads", namespace)))["items"]
        assert [w["metadata"]["uid"] for w in workloads] == [workload["metadata"]["uid"]]
        assert charged_gpus(workloads) == 2, "the group's quota was released during the replacement"
        pod = await kube.get_or_none(api_path("v1", "pods", namespace, "web-1"))
        if pod is None or pod["metadata"]["uid"] == old_uid or pod["status"].get("phase") != "Running":
            return None
        return pod

    again = await wait_for("web-1 to be made again and run", replaced, within=150, interval=0.5)
    assert not again["spec"].get("schedulingGates")
    assert again["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-name"] == name
    await wait_for("both replicas to run again", lambda: running(2), within=60, interval=0.5)
    await assert_no_more_devices_than_charged(kube, namespace)
    await kube.delete(api_path("apps/v1", "statefulsets", namespace, "web"))
