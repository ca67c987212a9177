"""Plain pods (framework pod) on the test-bed: the real kube-apiserver calls the pod webhook
(mpod.kb.io, shipped configuration on loopback, scoped to the test's namespace), which stores a
queue-named pod with Kueue's scheduling gate, managed label and finalizer; the real kube-scheduler
leaves the gated pod alone (PodScheduled False SchedulingGated, no node) while its Workload waits
with Kueue's message; once admitted, the controller's one write removes the gate and adds the
flavor's node labels, and the scheduler places the pod, which gets its GPU claim allocated and
runs on the node simulator. Its Workload finishes when it succeeds and the finalizer goes.
A pod group (a GPU pod and a CPU-only pod) gets no Workload until its second pod exists, then one
Workload with a pod set per shape; both pods are ungated together and run.

The session test-bed has one GPU and the ClusterQueue one GPU of quota: the second pod waits
for the first.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio

from e2e.support.served import Served, namespace_served, start_controller, stop_controller, workload_where
from e2e.support.workloads import KUEUE
from e2e.testbed import KubeClient, Testbed, api_path
from e2e.testbed.names import RUN_SECONDS_ANNOTATION
from e2e.testbed.scenario import status_condition, wait_for
from reconciler.core.model.workloads import workload_name_for_job

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(300)]

Obj = dict[str, Any]
GATE = "kueue.x-k8s.io/admission"
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"  # added after it, as Kueue v0.18.1 does
POD_WEBHOOKS = ("mpod.kb.io", "vpod.kb.io")


@pytest.fixture(scope="module")
def controller(testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`reconciler run` with the pod framework on, its webhooks on loopback (a certificate made
    here, mounted as cert-manager would), GPUs charged through DRA."""
    served = start_controller(
        testbed.kubeconfig, tmp_path_factory.mktemp("controller-pods"), ["batch/job", "pod"]
    )
    yield served
    stop_controller(served)


def pod(name: str, namespace: str, run_seconds: str = "3") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"kueue.x-k8s.io/queue-name": "lq"},
            "annotations": {RUN_SECONDS_ANNOTATION: run_seconds},
        },
        "spec": {
            "restartPolicy": "Never",
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": "100m"}, "claims": [{"name": "gpu"}]},
                }
            ],
        },
    }


@pytest_asyncio.fixture
async def served(controller: Served, kube: KubeClient, namespace: str) -> AsyncIterator[str]:
    """Queues with 1 GPU, a one-GPU ResourceClaimTemplate, and the shipped pod webhooks
    registered for this namespace only; waits until the API server calls them."""

    async def gated() -> bool:
        created = await kube.request(
            "POST", api_path("v1", "pods", namespace), params={"dryRun": "All"}, body=pod("probe", namespace)
        )
        return GATE in [g["name"] for g in created["spec"].get("schedulingGates") or []]

    ready = ("the pod webhook to gate pods", gated)
    async with namespace_served(kube, controller, namespace, POD_WEBHOOKS, gpus=1, base="pods", ready=ready):
        yield namespace


async def create_pod(kube: KubeClient, name: str, namespace: str) -> tuple[Obj, str]:
    """Creates the pod; returns it as stored and its Workload's name."""
    created = await kube.create(api_path("v1", "pods", namespace), pod(name, namespace))
    return created, workload_name_for_job(name, created["metadata"]["uid"], "Pod", "")


@pytest.mark.asyncio
async def test_a_gated_pod_waits_unscheduled_until_admitted_then_runs_on_its_flavor(
    kube: KubeClient, served: str
) -> None:
    namespace = served
    first, first_wl = await create_pod(kube, "first", namespace)
    # The API's answer to the create: stored gated, managed, with Kueue's finalizer.
    assert [g["name"] for g in first["spec"]["schedulingGates"]] == [GATE, TOPOLOGY_GATE]
    assert first["metadata"]["labels"]["kueue.x-k8s.io/managed"] == "true"
    assert first["metadata"]["finalizers"] == ["kueue.x-k8s.io/managed"]
    admitted = await workload_where(kube, namespace, first_wl, "Admitted", "True")
    assert [(ps["name"], ps["count"]) for ps in admitted["spec"]["podSets"]] == [("main", 1)]
    (assignment,) = admitted["status"]["admission"]["podSetAssignments"]
    assert assignment["resourceUsage"] == {"cpu": "100m", "nvidia.com/gpu": "1"}

    second, second_wl = await create_pod(kube, "second", namespace)
    pending = await workload_where(kube, namespace, second_wl, "QuotaReserved", "False")
    assert status_condition(pending, "QuotaReserved")["message"] == (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
        f"in flavor t4-{namespace}, 1 more needed"
    )
    # The real kube-scheduler holds the gated pod: PodScheduled False SchedulingGated, no node.
    second_path = api_path("v1", "pods", namespace, "second")

    async def held() -> Obj | None:
        current = await kube.get(second_path)
        return (
            current if status_condition(current, "PodScheduled").get("reason") == "SchedulingGated" else None
        )

    waiting = await wait_for("the scheduler to report the second pod gated", held, within=60, interval=0.3)
    assert not waiting["spec"].get("nodeName")
    assert [g["name"] for g in waiting["spec"]["schedulingGates"]] == [GATE, TOPOLOGY_GATE]

    # The first was ungated with its flavor's node labels, scheduled, ran with its GPU, succeeded.
    async def succeeded(name: str) -> Obj | None:
        current = await kube.get(api_path("v1", "pods", namespace, name))
        return current if current["status"].get("phase") == "Succeeded" else None

    done = await wait_for("the first pod to succeed", lambda: succeeded("first"), within=120, interval=0.5)
    assert not done["spec"].get("schedulingGates")
    assert done["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "Tesla-T4"}
    assert done["spec"]["nodeName"] == "gpu-node-1"
    assert done["status"]["resourceClaimStatuses"][0]["name"] == "gpu"
    finished = await workload_where(kube, namespace, first_wl, "Finished", "True")
    assert status_condition(finished, "Finished")["reason"] == "Succeeded"

    async def released() -> bool:
        current = await kube.get(api_path("v1", "pods", namespace, "first"))
        return not current["metadata"].get("finalizers")

    await wait_for("the first pod's finalizer to go", released, within=60, interval=0.3)
    # The quota came back: the second is admitted, ungated, scheduled and runs.
    await workload_where(kube, namespace, second_wl, "Admitted", "True")
    ran = await wait_for("the second pod to succeed", lambda: succeeded("second"), within=120, interval=0.5)
    assert ran["spec"]["nodeName"] == "gpu-node-1"
    assert not second["spec"].get("nodeSelector")  # created without; the admission added it
    assert ran["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "Tesla-T4"}


def group_pod(name: str, namespace: str, group: str, *, gpu: bool) -> Obj:
    """A pod of a two-pod group: the GPU one (claim from `one-gpu`) or a CPU-only one."""
    body = pod(name, namespace, run_seconds="4")
    body["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = group
    body["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] = "2"
    if not gpu:
        del body["spec"]["resourceClaims"]
        del body["spec"]["containers"][0]["resources"]["claims"]
    return body


@pytest.mark.asyncio
async def test_a_pod_group_gets_one_workload_once_complete_and_runs_as_a_whole(
    kube: KubeClient, served: str
) -> None:
    """Two pods of two shapes (one with a GPU claim, one CPU-only): the first stays gated with no
    Workload; the second completes the group, whose one Workload has a pod set per shape; both
    pods are ungated together, scheduled, run and succeed; the Workload finishes and the
    finalizers go."""
    namespace = served
    pods_path = api_path("v1", "pods", namespace)
    workloads_path = api_path(KUEUE, "workloads", namespace)
    leader = await kube.create(pods_path, group_pod("g-gpu", namespace, "train", gpu=True))
    assert [g["name"] for g in leader["spec"]["schedulingGates"]] == [GATE, TOPOLOGY_GATE]
    await asyncio.sleep(3)  # the controller has seen it: an incomplete group gets no Workload
    assert (await kube.get(workloads_path))["items"] == []
    await kube.create(pods_path, group_pod("g-cpu", namespace, "train", gpu=False))

    async def group_workload() -> Obj | None:
        items = (await kube.get(workloads_path))["items"]
        return items[0] if items else None

    workload = await wait_for("the group's Workload", group_workload, within=60, interval=0.3)
    assert workload["metadata"]["name"] == "train"
    counts = sorted(ps["count"] for ps in workload["spec"]["podSets"])
    assert counts == [1, 1]  # one pod set per shape
    admitted = await workload_where(kube, namespace, "train", "Admitted", "True")
    usage = {
        resource: amount
        for assignment in admitted["status"]["admission"]["podSetAssignments"]
        for resource, amount in assignment["resourceUsage"].items()
        if resource == "nvidia.com/gpu"
    }
    assert usage == {"nvidia.com/gpu": "1"}

    async def both_succeeded() -> list[Obj] | None:
        found = [await kube.get(api_path("v1", "pods", namespace, n)) for n in ("g-gpu", "g-cpu")]
        return found if all(p["status"].get("phase") == "Succeeded" for p in found) else None

    done = await wait_for("both pods of the group to succeed", both_succeeded, within=150, interval=0.5)
    for current in done:
        assert not current["spec"].get("schedulingGates")
        assert current["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "Tesla-T4"}
        assert current["spec"]["nodeName"] == "gpu-node-1"
    await workload_where(kube, namespace, "train", "Finished", "True")

    async def released() -> bool:
        found = [await kube.get(api_path("v1", "pods", namespace, n)) for n in ("g-gpu", "g-cpu")]
        return not any(p["metadata"].get("finalizers") for p in found)

    await wait_for("the group's finalizers to go", released, within=60, interval=0.3)
