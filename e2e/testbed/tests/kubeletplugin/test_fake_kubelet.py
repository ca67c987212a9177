"""The fake kubelet as the node simulator uses it: prepare and unprepare through registered
plugins, unregistered and unreachable drivers, reading a claim's drivers and a pod's claims."""

from __future__ import annotations

import pytest

from e2e.testbed.kubeclient import Obj
from e2e.testbed.kubeletplugin import (
    DraPluginClient,
    FakeKubelet,
    InMemoryClaimSource,
    KubeletPlugin,
    PluginConfig,
    PrepareResult,
    claim_drivers,
    pod_claim_names,
)
from e2e.testbed.tests.allocated_claims import (
    CLAIM_UID,
    DRIVER,
    NODE,
    allocated_claim,
    cdi_files,
    expected_device,
    ref,
)

pytestmark = pytest.mark.timeout(60)


@pytest.mark.asyncio
async def test_fake_kubelet_prepares_and_unprepares_claims(
    plugin: KubeletPlugin, kubelet: FakeKubelet, claims: InMemoryClaimSource
) -> None:
    await kubelet.scan()
    claim = allocated_claim()
    result = await kubelet.prepare_claims([claim])
    assert result == {CLAIM_UID: PrepareResult(devices=(expected_device(),))}
    assert await kubelet.unprepare_claims([CLAIM_UID]) == {CLAIM_UID: ""}
    assert cdi_files(plugin.config) == []


@pytest.mark.asyncio
async def test_fake_kubelet_unprepares_claims_it_did_not_prepare(
    plugin: KubeletPlugin, kubelet: FakeKubelet
) -> None:
    """E.g. after the simulator restarted: the UID goes to every registered plugin."""
    async with DraPluginClient(plugin.config.dra_socket) as dra:
        await dra.prepare([ref(allocated_claim())])
    assert cdi_files(plugin.config) != []
    await kubelet.scan()
    assert await kubelet.unprepare_claims([CLAIM_UID, "unknown-uid"]) == {CLAIM_UID: "", "unknown-uid": ""}
    assert cdi_files(plugin.config) == []
    assert plugin.service.prepared == {}


@pytest.mark.asyncio
async def test_fake_kubelet_reports_unregistered_and_unreachable_drivers(
    config: PluginConfig, claims: InMemoryClaimSource, kubelet: FakeKubelet
) -> None:
    claim = allocated_claim()
    result = await kubelet.prepare_claims([claim])
    assert result[CLAIM_UID].error == "DRA driver gpu.nvidia.com is not registered"
    async with KubeletPlugin(config, claims, stop_grace=1.0):
        await kubelet.scan()
    # Stopped, but the kubelet has not noticed yet: the call itself fails.
    result = await kubelet.prepare_claims([claim])
    assert "NodePrepareResources with DRA driver gpu.nvidia.com failed: UNAVAILABLE" in (
        result[CLAIM_UID].error
    )
    await kubelet.scan()
    assert kubelet.plugins == {}


@pytest.mark.asyncio
async def test_fake_kubelet_claim_without_drivers(kubelet: FakeKubelet) -> None:
    claim = allocated_claim(results=[])
    assert await kubelet.prepare_claims([claim]) == {CLAIM_UID: PrepareResult()}
    assert await kubelet.unprepare_claims([CLAIM_UID]) == {CLAIM_UID: ""}


def test_claim_drivers() -> None:
    claim = allocated_claim(
        results=[
            {"request": "a", "driver": DRIVER, "pool": NODE, "device": "gpu-0"},
            {"request": "b", "driver": "net.example.com", "pool": NODE, "device": "eth-0"},
            {"request": "c", "driver": DRIVER, "pool": NODE, "device": "gpu-1"},
        ]
    )
    assert claim_drivers(claim) == [DRIVER, "net.example.com"]
    assert claim_drivers(allocated_claim(allocated=False)) == []


def test_pod_claim_names() -> None:
    pod: Obj = {
        "spec": {
            "resourceClaims": [
                {"name": "gpu", "resourceClaimTemplateName": "single-gpu"},
                {"name": "shared", "resourceClaimName": "team-gpu"},
                {"name": "optional", "resourceClaimTemplateName": "maybe"},
            ]
        },
        "status": {},
    }
    waiting = pod_claim_names(pod)
    assert waiting.waiting_for
    pod["status"]["resourceClaimStatuses"] = [
        {"name": "gpu", "resourceClaimName": "job-a-0-gpu-x7k2p"},
        {"name": "optional"},  # the controller decided no claim is needed
    ]
    ready = pod_claim_names(pod)
    assert ready.waiting_for == ""
    assert ready.names == ("job-a-0-gpu-x7k2p", "team-gpu")
    assert pod_claim_names({"spec": {}}).names == ()
