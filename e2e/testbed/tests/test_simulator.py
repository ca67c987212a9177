"""The node simulator's switches and rules, and spec changes, on the session test-bed."""

from __future__ import annotations

import asyncio

import pytest

from e2e.testbed import GpuSpec, KubeClient, NodeSpec, Testbed, TestbedSpec, api_path
from e2e.testbed.health import Probe
from e2e.testbed.kubeclient import MERGE_PATCH, Obj
from e2e.testbed.names import DRIVER_NAME, FAIL_ANNOTATION, STALL_ANNOTATION
from e2e.testbed.scenario import (
    claim_name_of,
    gpu_job,
    job_condition_true,
    pod_condition,
    pod_phase,
    single_gpu_claim_spec,
    single_gpu_claim_template,
    single_job_pod,
    wait_for,
)
from e2e.testbed.spec import default_spec

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(180)]
RESOURCE = "resource.k8s.io/v1"


async def _setup(kube: KubeClient, namespace: str, job: Obj) -> None:
    await kube.create(
        api_path(RESOURCE, "resourceclaimtemplates", namespace), single_gpu_claim_template(namespace)
    )
    await kube.create(api_path("batch/v1", "jobs", namespace), job)


async def _job_pod(kube: KubeClient, namespace: str, job: str, phase: str) -> Obj | None:
    pod = await single_job_pod(kube, namespace, job)
    return pod if pod is not None and pod_phase(pod) == phase else None


@pytest.mark.asyncio
async def test_stalled_pod_never_gets_ready_and_is_deleted_on_suspend(
    kube: KubeClient, namespace: str
) -> None:
    await _setup(kube, namespace, gpu_job("stuck", namespace, annotations={STALL_ANNOTATION: "true"}))

    async def stalled() -> Obj | None:
        pod = await single_job_pod(kube, namespace, "stuck")
        statuses = (pod or {}).get("status", {}).get("containerStatuses") or []
        waiting = statuses[0]["state"].get("waiting") if statuses else None
        return pod if waiting and waiting.get("reason") == "ContainerCreating" else None

    pod = await wait_for("the pod to stall", stalled)
    await asyncio.sleep(3)
    pod = await kube.get(api_path("v1", "pods", namespace, pod["metadata"]["name"]))
    assert pod_phase(pod) == "Pending"
    ready = pod_condition(pod, "Ready")
    assert ready is not None
    assert ready["status"] == "False"
    claim_name = claim_name_of(pod)
    assert claim_name is not None

    # Suspending the Job (what Kueue does on eviction) deletes the pod; the
    # simulator must terminate it and remove it, releasing the GPU.
    await kube.patch(
        api_path("batch/v1", "jobs", namespace, "stuck"), {"spec": {"suspend": True}}, MERGE_PATCH
    )

    async def no_pods() -> bool:
        pods, _ = await kube.list_all(api_path("v1", "pods", namespace))
        return not pods

    await wait_for("the pod to be deleted", no_pods, within=30)

    async def claim_gone() -> bool:
        path = api_path(RESOURCE, "resourceclaims", namespace, claim_name)
        return await kube.get_or_none(path) is None

    await wait_for("the claim to be deleted", claim_gone, within=30)


@pytest.mark.asyncio
async def test_fail_annotation_fails_the_pod_with_exit_code_1(kube: KubeClient, namespace: str) -> None:
    await _setup(
        kube, namespace, gpu_job("doomed", namespace, run_seconds=1, annotations={FAIL_ANNOTATION: "true"})
    )
    pod = await wait_for("the pod to fail", lambda: _job_pod(kube, namespace, "doomed", "Failed"))
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 1

    async def job_failed() -> bool:
        job = await kube.get(api_path("batch/v1", "jobs", namespace, "doomed"))
        return job_condition_true(job, "Failed")

    await wait_for("the Job to fail", job_failed)


@pytest.mark.asyncio
async def test_pod_waits_until_its_claim_is_allocated_and_reserved(kube: KubeClient, namespace: str) -> None:
    claim = {
        "apiVersion": RESOURCE,
        "kind": "ResourceClaim",
        "metadata": {"name": "manual", "namespace": namespace},
        "spec": single_gpu_claim_spec(),
    }
    await kube.create(api_path(RESOURCE, "resourceclaims", namespace), claim)
    # Bound by hand (no scheduler): nothing allocates the claim.
    pod = await kube.create(
        api_path("v1", "pods", namespace),
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "bound", "annotations": {"testbed.dra-quota.dev/run-seconds": "4"}},
            "spec": {
                "nodeName": "gpu-node-1",
                "resourceClaims": [{"name": "gpu", "resourceClaimName": "manual"}],
                "containers": [{"name": "c", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}],
                "restartPolicy": "Never",
            },
        },
    )
    pod_path = api_path("v1", "pods", namespace, "bound")
    await asyncio.sleep(3)
    waiting = await kube.get(pod_path)
    assert pod_phase(waiting) == "Pending"
    assert not waiting["status"].get("containerStatuses")

    # Allocate by hand. kube-controller-manager's resourceclaim controller then
    # reserves the claim for the already bound pod, and only then may it start.
    status_path = api_path(RESOURCE, "resourceclaims", namespace, "manual", "status")
    allocation = {
        "devices": {
            "results": [{"request": "gpu", "driver": DRIVER_NAME, "pool": "gpu-node-1", "device": "gpu-0"}]
        }
    }
    await kube.patch(status_path, {"status": {"allocation": allocation}}, MERGE_PATCH)

    async def phase_is(phase: str) -> bool:
        return pod_phase(await kube.get(pod_path)) == phase

    await wait_for(
        "the pod to start once its claim is allocated and reserved", lambda: phase_is("Running"), within=20
    )
    reserved = (await kube.get(api_path(RESOURCE, "resourceclaims", namespace, "manual")))["status"][
        "reservedFor"
    ]
    assert [r["uid"] for r in reserved] == [pod["metadata"]["uid"]]
    await wait_for("the pod to succeed", lambda: phase_is("Succeeded"), within=15)


@pytest.mark.asyncio
async def test_agents_restart_mid_run_still_finish_the_pod(
    testbed: Testbed, kube: KubeClient, namespace: str
) -> None:
    await _setup(kube, namespace, gpu_job("steady", namespace, run_seconds=6))
    await wait_for("the pod to run", lambda: _job_pod(kube, namespace, "steady", "Running"))
    await asyncio.to_thread(testbed.restart, "agents")
    await wait_for(
        "the pod to succeed after the agents restart",
        lambda: _job_pod(kube, namespace, "steady", "Succeeded"),
        within=30,
    )


@pytest.mark.asyncio
async def test_reconfigure_publishes_more_nodes_and_gpus(testbed: Testbed, kube: KubeClient) -> None:
    bigger = TestbedSpec(
        nodes=[
            *default_spec().nodes,
            NodeSpec(
                name="a100-node",
                labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"},
                gpus=GpuSpec(count=2, model="A100-SXM4-40GB"),
            ),
        ]
    )
    slices_path = api_path(RESOURCE, "resourceslices")
    try:
        await asyncio.to_thread(testbed.reconfigure, bigger)
        slices, _ = await kube.list_all(slices_path)
        by_node = {s["spec"]["nodeName"]: s for s in slices}
        assert sorted(by_node) == ["a100-node", "gpu-node-1"]
        a100 = by_node["a100-node"]["spec"]
        assert [d["name"] for d in a100["devices"]] == ["gpu-0", "gpu-1"]
        attrs = a100["devices"][1]["attributes"]
        assert attrs["productName"] == {"string": "NVIDIA A100-SXM4-40GB"}
        assert attrs["architecture"] == {"string": "Ampere"}
        assert a100["devices"][1]["capacity"]["memory"] == {"value": "40Gi"}
        node = await kube.get(api_path("v1", "nodes", name="a100-node"))
        ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
        assert ready[0]["status"] == "True"
        assert not node["spec"].get("taints")
        # The new node got its driver plugin, registered with its simulated kubelet.
        assert testbed.components[-2:] == ["driver-gpu-node-1", "driver-a100-node"]
        assert testbed.pid("driver-a100-node") is not None
        plugins_url = f"http://127.0.0.1:{testbed.ports['agents']}/plugins"

        async def registered() -> bool:
            ok, body = await asyncio.to_thread(Probe(plugins_url).check)
            return ok and '"a100-node": ["gpu.nvidia.com"]' in body

        await wait_for("the a100-node plugin to register", registered, within=15)
    finally:
        await asyncio.to_thread(testbed.reconfigure, default_spec())

    async def back_to_default() -> bool:
        slices, _ = await kube.list_all(slices_path)
        node = await kube.get_or_none(api_path("v1", "nodes", name="a100-node"))
        return node is None and [s["spec"]["nodeName"] for s in slices] == ["gpu-node-1"]

    await wait_for("the extra node and slice to go away", back_to_default, within=30)
    assert "driver-a100-node" not in testbed.components
