"""The simulated kubelets' DRA side without a control plane: a real kubelet plugin on
unix sockets, claims from memory (fast; no test-bed)."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from e2e.testbed.kubeletplugin import InMemoryClaimSource, KubeletPlugin, PluginConfig
from e2e.testbed.kubeletsim import KubeletSimulator
from e2e.testbed.nodedirs import MAX_SOCKET_PATH, node_dirs
from e2e.testbed.podstatus import PREPARE_FAILED_REASON, prepare_failed_patch, running_patch
from e2e.testbed.scenario import wait_for
from e2e.testbed.tests.allocated_claims import CLAIM_UID, NODE, allocated_claim

pytestmark = pytest.mark.timeout(60)
OTHER_UID = "5b0e1b8a-0000-4000-8000-00000000abcd"


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ks-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def config(root: Path) -> PluginConfig:
    dirs = node_dirs(root / "nodes", NODE)
    return PluginConfig(
        node_name=NODE, registry_dir=dirs.registry_dir, plugins_dir=dirs.plugins_dir, cdi_dir=dirs.cdi_dir
    )


@pytest_asyncio.fixture
async def kubelets(config: PluginConfig) -> AsyncIterator[tuple[KubeletSimulator, list[str]]]:
    changes: list[str] = []
    sim = KubeletSimulator({NODE: config.registry_dir}, changes.append, scan_interval=0.05, call_timeout=10)
    task = asyncio.create_task(sim.run())
    try:
        yield sim, changes
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def _cdi(config: PluginConfig, uid: str) -> Path:
    return config.cdi_dir / f"k8s.gpu.nvidia.com-gpu_{uid}.json"


async def _until(what: str, check: Callable[[], bool]) -> None:
    async def probe() -> bool:
        return check()

    await wait_for(what, probe, within=10, interval=0.02)


@pytest.mark.asyncio
async def test_prepare_needs_a_registered_plugin_and_shared_claims_are_unprepared_last(
    config: PluginConfig, kubelets: tuple[KubeletSimulator, list[str]]
) -> None:
    sim, changes = kubelets
    claim = allocated_claim()
    error = await sim.prepare(NODE, "pod-1", [claim])
    assert error is not None
    assert "DRA driver gpu.nvidia.com is not registered" in error
    assert f"ResourceClaim {claim['metadata']['namespace']}/{claim['metadata']['name']}" in error

    source = InMemoryClaimSource([claim, allocated_claim(uid=OTHER_UID, name="other")])
    async with KubeletPlugin(config, source, stop_grace=1.0):
        await _until("the plugin to register", lambda: sim.registered(NODE) == ["gpu.nvidia.com"])
        assert changes == [NODE]
        assert await sim.prepare(NODE, "pod-1", [claim]) is None
        assert await sim.prepare(NODE, "pod-2", [claim]) is None  # shared by two pods
        assert _cdi(config, CLAIM_UID).exists()
        assert await sim.release(NODE, "pod-1") is None
        assert _cdi(config, CLAIM_UID).exists(), "unprepared while pod-2 still uses it"
        assert await sim.release(NODE, "pod-2") is None
        assert not _cdi(config, CLAIM_UID).exists()

        # A pod found running after a restart: adopted, unprepared when it ends.
        assert await sim.prepare(NODE, "pod-3", [allocated_claim(uid=OTHER_UID, name="other")]) is None
        fresh = KubeletSimulator({NODE: config.registry_dir})
        await fresh.scan_all()
        fresh.adopt(NODE, "pod-3", [OTHER_UID])
        assert await fresh.release(NODE, "pod-3") is None
        assert not _cdi(config, OTHER_UID).exists()

        assert await sim.prepare(NODE, "pod-4", [claim]) is None
    await _until("the plugin to deregister", lambda: sim.registered(NODE) == [])
    assert changes == [NODE, NODE]
    # Unprepare with the plugin gone fails and keeps the claim, so a retry can work.
    error = await sim.release(NODE, "pod-4")
    assert error is not None
    assert "not registered" in error
    async with KubeletPlugin(config, source, stop_grace=1.0):
        await _until("the plugin to register again", lambda: sim.registered(NODE) == ["gpu.nvidia.com"])
        assert await sim.release(NODE, "pod-4") is None
    assert not _cdi(config, CLAIM_UID).exists()


def test_node_dirs_stay_within_the_socket_path_limit(tmp_path: Path) -> None:
    short = node_dirs(Path("/tmp/r/nodes"), "gpu-node-1")
    assert short.registry_dir == Path("/tmp/r/nodes/gpu-node-1/plugins_registry")
    deep = Path("/tmp/" + "d" * 50 + "/nodes")
    compact = node_dirs(deep, "gpu-node-1")
    assert compact.registry_dir == deep.parent / "n/gpu-node-1/r"
    hashed = node_dirs(deep, "n" * 60)
    assert hashed.fits()
    assert all(len(str(p)) <= MAX_SOCKET_PATH for p in hashed.socket_paths())
    assert node_dirs(deep, "n" * 60) == hashed  # stable


def test_prepare_failed_status_is_cleared_by_running() -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
        "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]},
        "status": {},
    }
    failed = prepare_failed_patch(pod, "172.30.0.2", "Failed to prepare dynamic resources: boom")["status"]
    assert failed["phase"] == "Pending"
    assert "podIP" not in failed
    cond = {c["type"]: c for c in failed["conditions"]}
    assert cond["PodReadyToStartContainers"]["reason"] == PREPARE_FAILED_REASON
    assert cond["PodReadyToStartContainers"]["message"].endswith("boom")
    assert cond["Ready"]["message"] == "containers with unready status: [a b]"
    waiting = failed["containerStatuses"][0]["state"]["waiting"]
    assert waiting == {"reason": "ContainerCreating", "message": "Failed to prepare dynamic resources: boom"}
    running = running_patch(pod, "172.30.0.2", "10.244.0.2")["status"]
    # Explicit nulls, so the strategic merge patch removes the earlier reason and message.
    assert all(c["reason"] is None and c["message"] is None for c in running["conditions"])
