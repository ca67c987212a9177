"""The walkthrough's DRA claim template with plain Jobs, no controller: the real
Job controller, resourceclaim controller and scheduler against the fake driver."""

from __future__ import annotations

import pytest

from e2e.testbed import KubeClient, api_path
from e2e.testbed.kubeclient import Obj
from e2e.testbed.names import DRIVER_NAME
from e2e.testbed.scenario import (
    claim_name_of,
    gpu_job,
    job_condition_true,
    pod_condition,
    pod_phase,
    single_gpu_claim_template,
    single_job_pod,
    wait_for,
)

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(180)]
RESOURCE = "resource.k8s.io/v1"


async def _create_job(kube: KubeClient, namespace: str, job: Obj) -> None:
    await kube.create(api_path("batch/v1", "jobs", namespace), job)


async def _pod_in_phase(kube: KubeClient, namespace: str, job: str, phase: str) -> Obj | None:
    pod = await single_job_pod(kube, namespace, job)
    return pod if pod is not None and pod_phase(pod) == phase else None


async def _claim_of(kube: KubeClient, namespace: str, pod: Obj) -> Obj | None:
    name = claim_name_of(pod)
    if name is None:
        return None
    return await kube.get_or_none(api_path(RESOURCE, "resourceclaims", namespace, name))


async def _claim_released(kube: KubeClient, namespace: str, name: str) -> bool:
    claim = await kube.get_or_none(api_path(RESOURCE, "resourceclaims", namespace, name))
    return claim is None or not (claim.get("status") or {}).get("reservedFor")


def _allocated_devices(claim: Obj) -> list[tuple[str, str, str]]:
    results = claim["status"]["allocation"]["devices"]["results"]
    return [(r["driver"], r["pool"], r["device"]) for r in results]


@pytest.mark.asyncio
async def test_job_with_claim_template_runs_to_completion(kube: KubeClient, namespace: str) -> None:
    await kube.create(
        api_path(RESOURCE, "resourceclaimtemplates", namespace), single_gpu_claim_template(namespace)
    )
    await _create_job(kube, namespace, gpu_job("gpu-job", namespace, run_seconds=4))

    running = await wait_for(
        "the Job's pod to run", lambda: _pod_in_phase(kube, namespace, "gpu-job", "Running")
    )
    owner = running["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("Job", "gpu-job")  # made by the Job controller
    assert running["spec"]["nodeName"] == "gpu-node-1"
    claim = await wait_for("the pod's ResourceClaim", lambda: _claim_of(kube, namespace, running))
    assert claim["metadata"]["ownerReferences"][0]["uid"] == running["metadata"]["uid"]
    assert _allocated_devices(claim) == [(DRIVER_NAME, "gpu-node-1", "gpu-0")]
    reserved = [r["uid"] for r in claim["status"]["reservedFor"]]
    assert reserved == [running["metadata"]["uid"]]
    ready = pod_condition(running, "Ready")
    assert ready is not None
    assert ready["status"] == "True"

    await wait_for("the pod to succeed", lambda: _pod_in_phase(kube, namespace, "gpu-job", "Succeeded"))

    async def job_complete() -> bool:
        job = await kube.get(api_path("batch/v1", "jobs", namespace, "gpu-job"))
        return job_condition_true(job, "Complete")

    await wait_for("the Job to complete", job_complete)
    await wait_for(
        "the claim to be released", lambda: _claim_released(kube, namespace, claim["metadata"]["name"])
    )


@pytest.mark.asyncio
async def test_second_job_waits_for_the_only_gpu(kube: KubeClient, namespace: str) -> None:
    await kube.create(
        api_path(RESOURCE, "resourceclaimtemplates", namespace), single_gpu_claim_template(namespace)
    )
    await _create_job(kube, namespace, gpu_job("first", namespace, run_seconds=20))
    await wait_for("the first pod to run", lambda: _pod_in_phase(kube, namespace, "first", "Running"))

    await _create_job(kube, namespace, gpu_job("second", namespace, run_seconds=2))

    async def second_unschedulable() -> Obj | None:
        pod = await single_job_pod(kube, namespace, "second")
        cond = pod_condition(pod, "PodScheduled") if pod is not None else None
        if cond is not None and cond["status"] == "False" and cond["reason"] == "Unschedulable":
            return pod
        return None

    pending = await wait_for("the second pod to be unschedulable", second_unschedulable)
    assert pod_phase(pending) == "Pending"
    assert not pending["spec"].get("nodeName")
    first = await single_job_pod(kube, namespace, "first")
    assert first is not None
    assert pod_phase(first) == "Running"  # the GPU is still taken

    await wait_for(
        "the first pod to succeed", lambda: _pod_in_phase(kube, namespace, "first", "Succeeded"), within=60
    )
    second = await wait_for(
        "the second pod to run", lambda: _pod_in_phase(kube, namespace, "second", "Running"), within=60
    )
    claim = await wait_for("the second pod's claim", lambda: _claim_of(kube, namespace, second))
    assert _allocated_devices(claim) == [(DRIVER_NAME, "gpu-node-1", "gpu-0")]
    await wait_for(
        "the second pod to succeed", lambda: _pod_in_phase(kube, namespace, "second", "Succeeded"), within=60
    )
