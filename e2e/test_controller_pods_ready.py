"""waitForPodsReady on the test-bed: stalled pods are evicted, unallocatable claims are reported
(and named as the cause of their eviction).

The controller runs with short timeouts (12 s, backoff base 4 s, one requeue).
The test-bed's only node publishes one Tesla T4.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

from e2e.support.deploy import ControllerProcess, install_crds
from e2e.support.queues import drop_queues, make_queues
from e2e.testbed import KubeClient, Testbed, api_path
from e2e.testbed.names import RUN_SECONDS_ANNOTATION, STALL_ANNOTATION
from e2e.testbed.scenario import job_pods, pod_condition, status_condition, wait_for
from reconciler.api.times import epoch
from reconciler.integrations.batchjob import job_workload_name

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(300)]

KUEUE = "kueue.x-k8s.io/v1beta2"
TIMEOUT = 12.0
BACKOFF_BASE = 4
GPU_LABEL = "nvidia.com/gpu.product"
Obj = dict[str, Any]

CONFIG = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
    "kind": "Configuration",
    "resources": {
        "deviceClassMappings": [{"name": "nvidia.com/gpu", "deviceClassNames": ["gpu.nvidia.com"]}]
    },
    "waitForPodsReady": {
        "timeout": f"{TIMEOUT:.0f}s",
        "requeuingStrategy": {"backoffBaseSeconds": BACKOFF_BASE, "backoffLimitCount": 1},
    },
}


@pytest.fixture(scope="module")
def controller(testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerProcess]:
    async def install() -> None:
        async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
            await install_crds(kube)

    asyncio.run(install())
    work = tmp_path_factory.mktemp("pods-ready")
    config = work / "config.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    process = ControllerProcess(config, testbed.kubeconfig, work / "controller.log", "--log-level", "debug")
    process.start()
    yield process
    code = process.stop()
    assert code == 0, f"the controller did not stop cleanly (exit {code}):\n{process.log_tail(30)}"


def job_body(name: str, namespace: str, annotations: dict[str, str]) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "suspend": True,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": annotations, "labels": {"app": name}},
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "command": ["true"],
                            "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "gpu"}]},
                        }
                    ],
                },
            },
        },
    }


async def create_job(kube: KubeClient, namespace: str, name: str, **annotations: str) -> str:
    """Creates the Job; returns its Workload's name."""
    job = await kube.create(api_path("batch/v1", "jobs", namespace), job_body(name, namespace, annotations))
    return job_workload_name(name, job["metadata"]["uid"])


def condition_is(obj: Obj | None, kind: str, status: str, reason: str | None = None) -> bool:
    if obj is None:
        return False
    found = status_condition(obj, kind)
    return found.get("status") == status and (reason is None or found.get("reason") == reason)


async def workload_when(
    kube: KubeClient, namespace: str, name: str, kind: str, status: str, **kw: Any
) -> Obj:
    async def probe() -> Obj | None:
        wl = await kube.get_or_none(api_path(KUEUE, "workloads", namespace, name))
        return wl if condition_is(wl, kind, status, kw.get("reason")) else None

    found: Obj = await wait_for(f"Workload {name}: {kind}={status}", probe, within=kw.get("within", 60))
    return found


async def cluster_queue_when(
    kube: KubeClient, name: str, what: str, check: Callable[[Obj], bool], within: float = 30
) -> Obj:
    async def probe() -> Obj | None:
        status: Obj = (await kube.get(api_path(KUEUE, "clusterqueues", name=name))).get("status", {})
        return status if check(status) else None

    found: Obj = await wait_for(f"ClusterQueue {name} {what}", probe, within=within)
    return found


async def event_reasons(kube: KubeClient, namespace: str, name: str) -> list[tuple[str, str]]:
    events = (await kube.get(api_path("v1", "events", namespace)))["items"]
    return [(e["reason"], e["message"]) for e in events if e["involvedObject"]["name"] == name]


def seconds_between(earlier: str, later: str) -> float:
    start, end = epoch(earlier), epoch(later)
    assert start is not None
    assert end is not None
    return end - start


@pytest.mark.asyncio
async def test_stalled_job_is_evicted_restored_requeued_then_deactivated(
    controller: ControllerProcess, kube: KubeClient, namespace: str
) -> None:
    cq = await make_queues(kube, namespace, gpus=1)
    try:
        stalled = await create_job(kube, namespace, "stalled", **{STALL_ANNOTATION: "true"})
        admitted = await workload_when(kube, namespace, stalled, "Admitted", "True")
        assert status_condition(admitted, "PodsReady")["reason"] == "WaitForStart"

        async def started() -> Obj | None:
            # The Job is started by a write after the admission's own: wait for it to land.
            found: Obj = await kube.get(api_path("batch/v1", "jobs", namespace, "stalled"))
            return found if found["spec"].get("suspend") is False else None

        job = await wait_for("the admitted Job to be started", started, within=15)
        assert job["spec"]["template"]["spec"]["nodeSelector"][GPU_LABEL] == "Tesla-T4"
        # Another job waits for the only GPU.
        waiting = await create_job(kube, namespace, "waiting", **{RUN_SECONDS_ANNOTATION: "3"})
        pending = await workload_when(kube, namespace, waiting, "QuotaReserved", "False")
        assert (
            "insufficient unused quota for nvidia.com/gpu"
            in status_condition(pending, "QuotaReserved")["message"]
        )

        await workload_when(kube, namespace, stalled, "Evicted", "True", within=TIMEOUT + 20)
        # Kueue's second step: the reservation ends once the Job has no active pod left.
        evicted = await workload_when(kube, namespace, stalled, "QuotaReserved", "False", within=30)
        message = f"Exceeded the PodsReady timeout {namespace}/{stalled}"
        assert status_condition(evicted, "Evicted")["reason"] == "PodsReadyTimeout"
        assert status_condition(evicted, "Evicted")["message"] == message
        assert condition_is(evicted, "QuotaReserved", "False")
        assert "admission" not in evicted["status"]
        assert evicted["status"]["requeueState"]["count"] == 1
        waited = seconds_between(
            status_condition(admitted, "Admitted")["lastTransitionTime"],
            status_condition(evicted, "Evicted")["lastTransitionTime"],
        )
        assert TIMEOUT <= waited <= TIMEOUT + 3, f"evicted {waited}s after admission"

        # The Job is suspended again with its own pod template back.
        async def restored() -> Obj | None:
            job = await kube.get(api_path("batch/v1", "jobs", namespace, "stalled"))
            template = job["spec"]["template"]
            ok = (
                job["spec"].get("suspend") is True
                and template["spec"].get("nodeSelector") == {"kubernetes.io/os": "linux"}
                and "kueue.x-k8s.io/podset" not in template["metadata"].get("labels", {})
            )
            return job if ok else None

        await wait_for("the evicted Job to be suspended with its pod template restored", restored, within=30)

        # Its quota went to the waiting job, which runs to the end.
        await workload_when(kube, namespace, waiting, "Admitted", "True", within=20)
        await workload_when(kube, namespace, waiting, "Finished", "True", within=60)

        # After the backoff it is requeued, admitted again, stalls again: the limit (1) is spent.
        requeued = await workload_when(kube, namespace, stalled, "Requeued", "True", reason="BackoffFinished")
        assert status_condition(requeued, "Requeued")["message"] == "The workload backoff was finished"
        final = await workload_when(
            kube,
            namespace,
            stalled,
            "Evicted",
            "True",
            reason="DeactivatedDueToRequeuingLimitExceeded",
            within=TIMEOUT + 60,
        )
        assert status_condition(final, "Evicted")["message"] == (
            "The workload is deactivated due to exceeding the maximum number of re-queuing retries"
        )
        assert final["spec"]["active"] is False
        # The reservation ends once the Job's pods are gone (Kueue's second step).
        final = await workload_when(kube, namespace, stalled, "QuotaReserved", "False", within=30)
        assert status_condition(final, "Evicted")["reason"] == "DeactivatedDueToRequeuingLimitExceeded"

        await cluster_queue_when(
            kube,
            cq,
            "to hold nothing",
            lambda status: status.get("admittedWorkloads") == 0 and status.get("pendingWorkloads") == 0,
        )
        reasons = [r for r, _ in await event_reasons(kube, namespace, stalled)]
        for expected in (
            "QuotaReserved",
            "EvictedDueToPodsReadyTimeout",
            "EvictedDueToDeactivatedDueToRequeuingLimitExceeded",
        ):
            assert expected in reasons, (expected, reasons)
        assert "Requeued" not in reasons  # Kueue v0.18.1 sets the condition only
        assert ("Stopped", message) in await event_reasons(kube, namespace, "stalled")
    finally:
        await drop_queues(kube, namespace)


@pytest.mark.asyncio
async def test_unallocatable_claim_is_reported_then_its_quota_returned(
    controller: ControllerProcess, kube: KubeClient, namespace: str
) -> None:
    # Quota for two GPUs, but the flavor's only node publishes one device.
    cq = await make_queues(kube, namespace, gpus=2)
    try:
        running = await create_job(kube, namespace, "holder", **{RUN_SECONDS_ANNOTATION: "120"})
        await workload_when(kube, namespace, running, "PodsReady", "True", reason="Started", within=40)
        starved = await create_job(kube, namespace, "starved")
        await workload_when(kube, namespace, starved, "Admitted", "True")
        reported = await workload_when(kube, namespace, starved, "ClaimsAllocated", "False", within=30)
        pods = await job_pods(kube, namespace, "starved")
        assert len(pods) == 1
        pod = pods[0]
        claim = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        scheduled = pod_condition(pod, "PodScheduled") or {}
        assert scheduled.get("status") == "False"
        message = status_condition(reported, "ClaimsAllocated")["message"]
        prefix = (
            f"Pod {namespace}/{pod['metadata']['name']} cannot be scheduled: "
            f"ResourceClaim {namespace}/{claim} is not allocated: "
        )
        assert message.startswith(prefix), message
        assert "cannot allocate all claims" in message, message
        assert status_condition(reported, "ClaimsAllocated")["reason"] == "ClaimNotAllocated"
        assert any(
            r == "ClaimNotAllocated" and m.startswith(prefix)
            for r, m in await event_reasons(kube, namespace, starved)
        )

        evicted = await workload_when(kube, namespace, starved, "Evicted", "True", within=TIMEOUT + 20)
        assert status_condition(evicted, "Evicted")["reason"] == "PodsReadyTimeout"
        # Kueue's message, then the cause: a claim that cannot be allocated, not a slow start.
        cause = (
            f"Exceeded the PodsReady timeout {namespace}/{starved}; cause: ResourceClaim {namespace}/{claim} "
            f"of pod {namespace}/{pod['metadata']['name']} cannot be allocated: "
        )
        evicted_message = status_condition(evicted, "Evicted")["message"]
        assert evicted_message.startswith(cause), evicted_message
        assert "cannot allocate all claims" in evicted_message, evicted_message

        async def eviction_event() -> bool:
            # Events are posted by their own writes, after the condition's: wait for it.
            return ("EvictedDueToPodsReadyTimeout", evicted_message) in await event_reasons(
                kube, namespace, starved
            )

        await wait_for("the eviction's Event", eviction_event, within=30, interval=0.5)

        def one_gpu_used(status: Obj) -> bool:
            usage = {r["name"]: r["total"] for r in status.get("flavorsUsage", [{}])[0].get("resources", [])}
            return usage.get("nvidia.com/gpu") == "1" and status.get("admittedWorkloads") == 1

        await cluster_queue_when(kube, cq, "to have the starved workload's quota back", one_gpu_used)
    finally:
        await drop_queues(kube, namespace)


@pytest.mark.asyncio
async def test_a_restarted_controller_keeps_the_deadline(
    controller: ControllerProcess, kube: KubeClient, namespace: str
) -> None:
    await make_queues(kube, namespace, gpus=1)
    try:
        stalled = await create_job(kube, namespace, "stalled", **{STALL_ANNOTATION: "true"})
        admitted = await workload_when(kube, namespace, stalled, "Admitted", "True")
        admitted_at = epoch(status_condition(admitted, "Admitted")["lastTransitionTime"])
        assert admitted_at is not None
        controller.kill()
        # Down for 5 s: a deadline started again would fall at least 17 s after admission.
        await asyncio.sleep(max(0.0, admitted_at + 5 - time.time()))
        controller.start()
        evicted = await workload_when(kube, namespace, stalled, "Evicted", "True", within=TIMEOUT + 20)
        evicted_at = epoch(status_condition(evicted, "Evicted")["lastTransitionTime"])
        assert evicted_at is not None
        assert TIMEOUT <= evicted_at - admitted_at <= TIMEOUT + 3, (
            f"evicted {evicted_at - admitted_at}s after admission"
        )
    finally:
        await drop_queues(kube, namespace)
