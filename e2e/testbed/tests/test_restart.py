"""kube-apiserver restarted in the middle of a run, with writes going on, comes
back; a raw watch opened before the restart resumes from its resourceVersion or
relists after 410 Gone, and the running Job still completes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field

import aiohttp
import pytest

from e2e.testbed import KubeClient, Testbed, api_path
from e2e.testbed.kubeclient import ApiError, Obj
from e2e.testbed.scenario import gpu_job, job_condition_true, pod_phase, single_gpu_claim_template, wait_for

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(240)]


@dataclass
class RawWatchLog:
    """What the raw watch saw: the pod phases by name, and how it got through the restart."""

    phases: dict[str, str] = field(default_factory=dict)
    events: int = 0
    stream_breaks: int = 0
    resumed_with_events: int = 0  # watches re-opened from an old resourceVersion that delivered
    relists: int = 0
    done: asyncio.Event = field(default_factory=asyncio.Event)


async def _raw_watch(kube: KubeClient, path: str, log: RawWatchLog, until_pod: str) -> None:
    """List + watch pods with plain aiohttp requests until ``until_pod`` has Succeeded."""
    listing = await kube.get(path)
    version = listing["metadata"]["resourceVersion"]
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=3, sock_read=30)
    after_break = False
    while not log.done.is_set():
        try:
            params = {
                "watch": "true",
                "resourceVersion": version,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": "60",
            }
            async with kube.session.get(kube.server + path, params=params, timeout=timeout) as resp:
                gone = resp.status == 410
                if resp.status >= 400 and not gone:
                    raise aiohttp.ClientResponseError(resp.request_info, (), status=resp.status)
                delivered = False
                if not gone:
                    async for line in resp.content:
                        event = json.loads(line)
                        obj: Obj = event["object"]
                        if event["type"] == "ERROR":
                            gone = obj.get("code") == 410
                            break
                        version = obj["metadata"]["resourceVersion"]
                        if event["type"] == "BOOKMARK":
                            continue
                        log.events += 1
                        if after_break and not delivered:
                            log.resumed_with_events += 1
                        delivered = True
                        log.phases[obj["metadata"]["name"]] = pod_phase(obj)
                        if log.phases.get(until_pod) == "Succeeded":
                            log.done.set()
                            return
                if gone:
                    log.relists += 1
                    listing = await kube.get(path)
                    version = listing["metadata"]["resourceVersion"]
                    for pod in listing["items"]:
                        log.phases[pod["metadata"]["name"]] = pod_phase(pod)
                    if log.phases.get(until_pod) == "Succeeded":
                        log.done.set()
                        return
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError, ApiError):
            log.stream_breaks += 1
            after_break = True
            await asyncio.sleep(0.3)


@dataclass
class WriteLoad:
    ok_before: int = 0
    ok_after: int = 0
    failed: int = 0
    restarted: bool = False


async def _write_load(kube: KubeClient, namespace: str, load: WriteLoad) -> None:
    """Create ConfigMaps back to back; count what worked before and after the restart."""
    path = api_path("v1", "configmaps", namespace)
    n = 0
    while True:
        n += 1
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"load-{n}"},
            "data": {"n": str(n)},
        }
        try:
            await kube.request("POST", path, body=body, timeout_seconds=3)
        except (ApiError, aiohttp.ClientError, TimeoutError, OSError):
            load.failed += 1
            await asyncio.sleep(0.2)
            continue
        if load.restarted:
            load.ok_after += 1
        else:
            load.ok_before += 1
        await asyncio.sleep(0.02)


@pytest.mark.asyncio
async def test_apiserver_restart_mid_run(testbed: Testbed, kube: KubeClient, namespace: str) -> None:
    await kube.create(
        api_path("resource.k8s.io/v1", "resourceclaimtemplates", namespace),
        single_gpu_claim_template(namespace),
    )
    await kube.create(api_path("batch/v1", "jobs", namespace), gpu_job("survivor", namespace, run_seconds=20))

    async def running_pod() -> str | None:
        pods, _ = await kube.list_all(
            api_path("v1", "pods", namespace), {"labelSelector": "job-name=survivor"}
        )
        return pods[0]["metadata"]["name"] if pods and pod_phase(pods[0]) == "Running" else None

    pod_name = await wait_for("the pod to run", running_pod)
    log = RawWatchLog()
    load = WriteLoad()
    watcher = asyncio.create_task(_raw_watch(kube, api_path("v1", "pods", namespace), log, pod_name))
    writer = asyncio.create_task(_write_load(kube, namespace, load))
    try:
        await asyncio.sleep(1.0)
        began = time.monotonic()
        await asyncio.to_thread(testbed.restart, "kube-apiserver")
        restart_seconds = time.monotonic() - began
        load.restarted = True
        ok, detail = await asyncio.to_thread(testbed.probe, "kube-apiserver")
        assert ok, detail

        async with asyncio.timeout(90):
            await log.done.wait()
    finally:
        for task in (watcher, writer):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(watcher, writer)

    print(
        f"restart took {restart_seconds:.1f}s; raw watch: {log.stream_breaks} break(s),"
        f" {log.resumed_with_events} resume(s) with events, {log.relists} relist(s);"
        f" writes ok before/after: {load.ok_before}/{load.ok_after}, failed {load.failed}"
    )
    assert log.stream_breaks >= 1, "the restart should have broken the watch stream"
    assert log.resumed_with_events + log.relists >= 1
    assert log.phases[pod_name] == "Succeeded"
    assert load.ok_before > 0
    assert load.ok_after > 0

    async def job_complete() -> bool:
        job = await kube.get(api_path("batch/v1", "jobs", namespace, "survivor"))
        return job_condition_true(job, "Complete")

    await wait_for("the Job to complete after the restart", job_complete)
