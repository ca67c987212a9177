"""The node simulator as kubelet: claims prepared through the driver's kubelet-plugin socket.

On the session test-bed, whose ``driver-gpu-node-1`` component is the fake
driver's kubelet plugin (``python -m e2e.testbed.kubeletplugin``) with its sockets and
CDI dir in the run folder.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from e2e.testbed import KubeClient, Testbed, api_path
from e2e.testbed.fakedriver import gpu_uuid, slice_name
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
from e2e.testbed.timeutil import parse_time

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(180)]
RESOURCE = "resource.k8s.io/v1"
NODE = "gpu-node-1"
PREPARE_FAILED = "FailedPrepareDynamicResources"


def _cdi_file(testbed: Testbed, claim_uid: str) -> Path:
    return testbed.layout.node(NODE).cdi_dir / f"k8s.{DRIVER_NAME}-gpu_{claim_uid}.json"


def _checkpoint(testbed: Testbed) -> Path:
    return testbed.layout.node(NODE).plugins_dir / DRIVER_NAME / "checkpoint.json"


async def _exists(path: Path) -> bool:
    return await asyncio.to_thread(path.exists)


async def _start(kube: KubeClient, namespace: str, job: Obj) -> None:
    await kube.create(
        api_path(RESOURCE, "resourceclaimtemplates", namespace), single_gpu_claim_template(namespace)
    )
    await kube.create(api_path("batch/v1", "jobs", namespace), job)


async def _pod_in(kube: KubeClient, namespace: str, job: str, *phases: str) -> Obj | None:
    pod = await single_job_pod(kube, namespace, job)
    return pod if pod is not None and pod_phase(pod) in phases else None


async def _job_complete(kube: KubeClient, namespace: str, job: str) -> bool:
    obj = await kube.get(api_path("batch/v1", "jobs", namespace, job))
    return job_condition_true(obj, "Complete")


async def _prepare_events(kube: KubeClient, pod: Obj) -> list[Obj]:
    meta = pod["metadata"]
    events, _ = await kube.list_all(
        api_path("v1", "events", meta["namespace"]),
        {"fieldSelector": f"involvedObject.uid={meta['uid']},reason={PREPARE_FAILED}"},
    )
    return events


@pytest.mark.asyncio
async def test_job_a_runs_only_with_its_claim_prepared_and_is_unprepared_after(
    testbed: Testbed, kube: KubeClient, namespace: str
) -> None:
    await _start(kube, namespace, gpu_job("job-a", namespace, run_seconds=6))
    pod = await wait_for(
        "job-a's pod to run", lambda: _pod_in(kube, namespace, "job-a", "Running"), within=60
    )
    # The claim's CDI spec is there as soon as the pod runs: prepared before it started.
    claim_name = claim_name_of(pod)
    assert claim_name is not None
    claim = await kube.get(api_path(RESOURCE, "resourceclaims", namespace, claim_name))
    uid = claim["metadata"]["uid"]
    cdi = _cdi_file(testbed, uid)
    assert await _exists(cdi), f"no CDI spec {cdi} while the pod runs"
    written = (await asyncio.to_thread(cdi.stat)).st_mtime
    started = parse_time(pod["status"]["startTime"]).timestamp()
    assert written < started + 1.0, "the CDI spec was written after the pod started"

    slice_obj = await kube.get(api_path(RESOURCE, "resourceslices", name=slice_name(NODE)))
    uuid = slice_obj["spec"]["devices"][0]["attributes"]["uuid"]["string"]
    assert uuid == gpu_uuid(NODE, 0)
    result = claim["status"]["allocation"]["devices"]["results"][0]
    assert (result["driver"], result["pool"], result["device"]) == (DRIVER_NAME, NODE, "gpu-0")
    spec = json.loads(await asyncio.to_thread(cdi.read_text))
    assert f"NVIDIA_VISIBLE_DEVICES={uuid}" in spec["containerEdits"]["env"]
    assert f"GPU_DEVICE_0_UUID={uuid}" in spec["devices"][0]["containerEdits"]["env"]
    checkpoint = json.loads(await asyncio.to_thread(_checkpoint(testbed).read_text))
    assert uid in checkpoint["claims"]
    assert await _prepare_events(kube, pod) == []

    await wait_for("job-a to complete", lambda: _job_complete(kube, namespace, "job-a"), within=60)

    async def unprepared() -> bool:
        if await _exists(cdi):
            return False
        data = json.loads(await asyncio.to_thread(_checkpoint(testbed).read_text))
        return uid not in data["claims"]

    await wait_for("the claim to be unprepared (CDI spec removed)", unprepared, within=20)


@pytest.mark.asyncio
async def test_pod_waits_while_the_driver_plugin_is_stopped_and_starts_once_it_is_back(
    testbed: Testbed, kube: KubeClient, namespace: str
) -> None:
    driver = testbed.driver_component(NODE)
    await asyncio.to_thread(testbed.stop_component, driver)
    try:
        await _start(kube, namespace, gpu_job("job-b", namespace, run_seconds=2))

        async def failed_prepare() -> tuple[Obj, list[Obj]] | None:
            pod = await single_job_pod(kube, namespace, "job-b")
            if pod is None:
                return None
            cond = pod_condition(pod, "PodReadyToStartContainers") or {}
            # The very first attempt may still reach for the vanished socket (UNAVAILABLE)
            # before the plugin watcher notices that the plugin is gone.
            if cond.get("reason") != PREPARE_FAILED or "is not registered" not in cond.get("message", ""):
                return None
            events = [e for e in await _prepare_events(kube, pod) if e["message"] == cond["message"]]
            return (pod, events) if events else None

        pod, events = await wait_for("a FailedPrepareDynamicResources event", failed_prepare, within=60)
        claim_name = claim_name_of(pod)
        assert claim_name is not None
        # What `kubectl describe pod` shows: a Warning Event from the kubelet ...
        event = events[0]
        assert event["type"] == "Warning"
        assert event["source"] == {"component": "kubelet", "host": NODE}
        message = event["message"]
        assert message.startswith("Failed to prepare dynamic resources: ")
        assert f"DRA driver {DRIVER_NAME} is not registered" in message
        assert f"{namespace}/{claim_name}" in message
        # ... and a pod that is not Ready, containers waiting, the same message in its status.
        assert pod_phase(pod) == "Pending"
        ready = pod_condition(pod, "Ready")
        assert ready is not None
        assert ready["status"] == "False"
        assert pod_condition(pod, "PodReadyToStartContainers") == {
            **(pod_condition(pod, "PodReadyToStartContainers") or {}),
            "status": "False",
            "message": message,
        }
        waiting = pod["status"]["containerStatuses"][0]["state"]["waiting"]
        assert waiting == {"reason": "ContainerCreating", "message": message}
        assert not pod["status"].get("podIP")

        # It keeps retrying (the Event's count goes up) and stays Pending.
        async def retried() -> Obj | None:
            again = [e for e in await _prepare_events(kube, pod) if e["message"] == message]
            return again[0] if again and again[0].get("count", 1) > 1 else None

        await wait_for("a retried prepare (Event count > 1)", retried, within=20)
        current = await kube.get(api_path("v1", "pods", namespace, pod["metadata"]["name"]))
        assert pod_phase(current) == "Pending"
    finally:
        began = time.monotonic()
        await asyncio.to_thread(testbed.start_component, driver)

    running = await wait_for(
        "the pod to start once the plugin is back",
        lambda: _pod_in(kube, namespace, "job-b", "Running", "Succeeded"),
        within=30,
    )
    print(f"pod started {time.monotonic() - began:.1f}s after the plugin was started again")
    assert pod_condition(running, "PodReadyToStartContainers") is not None
    cond = pod_condition(running, "PodReadyToStartContainers") or {}
    assert cond["status"] == "True"
    assert not cond.get("message")
    await wait_for("job-b to complete", lambda: _job_complete(kube, namespace, "job-b"), within=60)
    claim = claim_name_of(running)
    assert claim is not None
