"""The walkthrough's Jobs A and B with real containers on the real node.

The Jobs are examples/walkthrough/30-job-running-a.yaml and 31-job-pending-b.yaml with one
change each: the container is the registry-free busybox image (the CUDA image cannot be
pulled here) running ``env`` then sleeping, instead of ``nvidia-smi -L`` then sleeping. Queue
label, suspend, claim template, requests are the examples' own. Job A runs for
``run_seconds`` and completes; its quota goes back and Job B is admitted and runs.
"""

from __future__ import annotations

import asyncio
import copy
import time
from typing import Any

from e2e.kubelet.images import BUSYBOX_IMAGE
from e2e.support.deploy import apply_manifests, load_documents
from e2e.support.walkthrough_steps import EXAMPLES, NS
from e2e.testbed import KubeClient, api_path
from e2e.testbed.fakedriver import gpu_uuid

Obj = dict[str, Any]
KUEUE = "kueue.x-k8s.io/v1beta2"


def busybox_job(file_name: str, run_seconds: int) -> Obj:
    (job,) = load_documents(EXAMPLES / file_name)
    job = copy.deepcopy(job)
    (container,) = job["spec"]["template"]["spec"]["containers"]
    marker = container["command"][-1].split("echo ", 1)[1].split(" ", 1)[0]  # KUEUE_DRA_RUNNING_A
    container["image"] = BUSYBOX_IMAGE
    container["imagePullPolicy"] = "Never"
    container["command"] = ["sh", "-c", f"env | sort && echo {marker} && sleep {run_seconds}"]
    return job


async def wait_for(what: str, check: Any, within: float) -> Any:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        got = await check()
        if got:
            return got
        await asyncio.sleep(0.5)
    raise TimeoutError(f"{what}: not within {within:.0f}s")


async def job_pod(kube: KubeClient, job: str) -> Obj | None:
    pods = (await kube.get(api_path("v1", "pods", NS), {"labelSelector": f"job-name={job}"}))["items"]
    return pods[0] if pods else None


async def pod_log(kube: KubeClient, name: str) -> str:
    got = await kube.get(api_path("v1", "pods", NS, name, "log"))
    return str(got.get("raw", ""))


async def workload_of(kube: KubeClient, job: str) -> Obj | None:
    for wl in (await kube.get(api_path(KUEUE, "workloads", NS)))["items"]:
        if wl["metadata"]["name"].startswith(f"job-{job}-"):
            return dict(wl)
    return None


def condition(obj: Obj, kind: str) -> Obj:
    for c in obj.get("status", {}).get("conditions", []):
        if c["type"] == kind:
            return dict(c)
    return {}


async def running_log(kube: KubeClient, job: str, marker: str, within: float) -> tuple[Obj, str]:
    """Wait for the Job's pod to run on a real container and print ``marker``; its log."""

    async def printed() -> tuple[Obj, str] | None:
        pod = await job_pod(kube, job)
        if pod is None or pod.get("status", {}).get("phase") not in ("Running", "Succeeded"):
            return None
        log = await pod_log(kube, pod["metadata"]["name"])
        return (pod, log) if marker in log else None

    result: tuple[Obj, str] = await wait_for(f"job {job}'s container to print {marker}", printed, within)
    return result


async def walkthrough_real(kube: KubeClient, node_name: str, run_seconds: int = 20) -> dict[str, str]:
    """Jobs A then B; returns their logs. Asserts what each step shows (see module doc)."""
    uuid = gpu_uuid(node_name, 0)
    await apply_manifests(kube, EXAMPLES / "10-queues.yaml", EXAMPLES / "20-resourceclaimtemplate.yaml")
    jobs = api_path("batch/v1", "jobs", NS)
    job_a = busybox_job("30-job-running-a.yaml", run_seconds)
    await kube.create(jobs, job_a)
    pod_a, log_a = await running_log(kube, "kueue-dra-running-a", "KUEUE_DRA_RUNNING_A", 180)
    assert pod_a["spec"]["nodeName"] == node_name
    assert pod_a["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "Tesla-T4"}
    # The fake driver's CDI spec, applied by containerd, put the GPU into the environment.
    assert f"NVIDIA_VISIBLE_DEVICES={uuid}" in log_a.splitlines(), log_a
    assert "GPU_DEVICE_0=gpu-0" in log_a.splitlines(), log_a
    wl_a = await workload_of(kube, "kueue-dra-running-a")
    assert wl_a is not None
    assert wl_a["status"]["admission"]["clusterQueue"] == "p3-dra-cq"
    assert wl_a["status"]["admission"]["podSetAssignments"][0]["flavors"] == {"nvidia.com/gpu": "p3-t4"}
    assert condition(wl_a, "Admitted")["status"] == "True"

    await kube.create(jobs, busybox_job("31-job-pending-b.yaml", run_seconds))

    async def b_pending() -> Obj | None:
        wl = await workload_of(kube, "kueue-dra-pending-b")
        return wl if wl and condition(wl, "QuotaReserved").get("reason") == "Pending" else None

    await wait_for("job B to wait for quota", b_pending, 60)
    job_b = await kube.get(f"{jobs}/kueue-dra-pending-b")
    assert job_b["spec"]["suspend"] is True
    # Job A's container exits after run_seconds: the Job completes, its quota goes back.
    pod_b, log_b = await running_log(kube, "kueue-dra-pending-b", "KUEUE_DRA_PENDING_B", run_seconds + 180)
    done_a = await kube.get(f"{jobs}/kueue-dra-running-a")
    assert done_a.get("status", {}).get("succeeded") == 1
    assert pod_b["spec"]["nodeName"] == node_name
    assert f"NVIDIA_VISIBLE_DEVICES={uuid}" in log_b.splitlines(), log_b
    return {"a": log_a, "b": log_b}
