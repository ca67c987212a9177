"""The kubelet plugin run out of cluster against the test-bed, as the kind DaemonSet runs it.

``python -m e2e.testbed.kubeletplugin`` is started as a process with the test-bed's
kubeconfig and socket/CDI dirs in a temp dir; a fake kubelet registers it and
prepares the claim that the real scheduler allocated to a Job's pod.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from e2e.testbed import KubeClient, Testbed, api_path
from e2e.testbed.components import REPO_ROOT
from e2e.testbed.fakedriver import slice_name
from e2e.testbed.kubeclient import Obj
from e2e.testbed.kubeletplugin import ClaimRef, FakeKubelet, PluginConfig
from e2e.testbed.scenario import claim_name_of, gpu_job, single_gpu_claim_template, single_job_pod, wait_for

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(180)]
RESOURCE = "resource.k8s.io/v1"
NODE = "gpu-node-1"


class RunningPlugin:
    def __init__(self, process: asyncio.subprocess.Process, config: PluginConfig, log: Path) -> None:
        self.process = process
        self.config = config
        self.log = log

    async def terminate(self) -> int:
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(20):
            return await self.process.wait()


@pytest_asyncio.fixture
async def plugin_dirs() -> AsyncIterator[Path]:
    path = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="kpt-", dir="/tmp"))
    yield path
    await asyncio.to_thread(shutil.rmtree, path, True)


@pytest_asyncio.fixture
async def plugin(testbed: Testbed, kube: KubeClient, plugin_dirs: Path) -> AsyncIterator[RunningPlugin]:
    """The plugin process for gpu-node-1; its slice is deleted first to see it republished."""
    slice_path = api_path(RESOURCE, "resourceslices", name=slice_name(NODE))
    await kube.delete(slice_path)
    config = PluginConfig(
        node_name=NODE,
        registry_dir=plugin_dirs / "registry",
        plugins_dir=plugin_dirs / "plugins",
        cdi_dir=plugin_dirs / "cdi",
    )
    log = plugin_dirs / "plugin.log"
    out = await asyncio.to_thread(log.open, "wb")
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "e2e.testbed.kubeletplugin",
            "--node-name",
            NODE,
            "--kubeconfig",
            str(testbed.kubeconfig),
            "--registry-dir",
            str(config.registry_dir),
            "--plugins-dir",
            str(config.plugins_dir),
            "--cdi-dir",
            str(config.cdi_dir),
            "--republish-interval",
            "0",
            cwd=REPO_ROOT,
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )
    finally:
        out.close()
    running = RunningPlugin(process, config, log)
    try:
        await wait_for(
            "the plugin's registration socket", lambda: _exists(config.registration_socket), within=30
        )
        yield running
    finally:
        await running.terminate()


async def _exists(path: Path) -> bool:
    return await asyncio.to_thread(path.exists)


async def _allocated_claim(kube: KubeClient, namespace: str) -> Obj | None:
    pod = await single_job_pod(kube, namespace, "job-a")
    name = claim_name_of(pod) if pod is not None else None
    if name is None:
        return None
    claim = await kube.get_or_none(api_path(RESOURCE, "resourceclaims", namespace, name))
    if claim is None or not (claim.get("status") or {}).get("allocation"):
        return None
    return claim


@pytest.mark.asyncio
async def test_plugin_prepares_a_scheduled_claim(
    kube: KubeClient, namespace: str, plugin: RunningPlugin
) -> None:
    config = plugin.config
    published = await wait_for(
        "the plugin to republish the node's ResourceSlice",
        lambda: kube.get_or_none(api_path(RESOURCE, "resourceslices", name=slice_name(NODE))),
        within=15,
    )
    uuid = published["spec"]["devices"][0]["attributes"]["uuid"]["string"]

    kubelet = FakeKubelet(config.registry_dir, call_timeout=30)
    try:
        await kubelet.scan()
        assert kubelet.plugins["gpu.nvidia.com"].endpoint == config.dra_socket

        await kube.create(
            api_path(RESOURCE, "resourceclaimtemplates", namespace), single_gpu_claim_template(namespace)
        )
        await kube.create(
            api_path("batch/v1", "jobs", namespace), gpu_job("job-a", namespace, run_seconds=60)
        )
        claim = await wait_for(
            "the Job pod's claim to be allocated", lambda: _allocated_claim(kube, namespace)
        )
        uid = claim["metadata"]["uid"]

        result = await kubelet.prepare_claims([claim])
        assert result[uid].error == ""
        assert [(d.pool_name, d.device_name, d.request_names) for d in result[uid].devices] == [
            (NODE, "gpu-0", ("gpu",))
        ]
        spec_file = config.cdi_dir / f"k8s.gpu.nvidia.com-gpu_{uid}.json"
        spec = json.loads(await asyncio.to_thread(spec_file.read_text))
        assert f"NVIDIA_VISIBLE_DEVICES={uuid}" in spec["containerEdits"]["env"]
        assert f"GPU_DEVICE_0_UUID={uuid}" in spec["devices"][0]["containerEdits"]["env"]

        meta = claim["metadata"]
        wrong = ClaimRef(namespace=meta["namespace"], uid="not-" + uid, name=meta["name"])
        client = kubelet.client("gpu.nvidia.com")
        assert client is not None
        refused = await client.prepare([wrong])
        assert "has UID " + uid in refused[wrong.uid].error

        assert await kubelet.unprepare_claims([uid]) == {uid: ""}
        assert not await _exists(spec_file)
    finally:
        await kubelet.close()

    assert await plugin.terminate() == 0
    assert not await _exists(config.registration_socket)
    assert not await _exists(config.dra_socket)
