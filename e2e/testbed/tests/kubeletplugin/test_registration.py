"""The kubelet plugin's registration: its sockets where the kubelet looks, GetInfo, the
handshake, version choice, refusals, stale sockets, other driver names and directories."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from e2e.testbed.kubeletplugin import (
    DraPluginClient,
    FakeKubelet,
    InMemoryClaimSource,
    KubeletPlugin,
    PluginConfig,
    RegistrationError,
    register_plugin,
)
from e2e.testbed.kubeletplugin.kubelet_registration import get_plugin_info
from e2e.testbed.tests.allocated_claims import CLAIM_UID, NODE, allocated_claim, ref

pytestmark = pytest.mark.timeout(60)


@pytest.mark.asyncio
async def test_sockets_are_where_the_kubelet_looks(plugin: KubeletPlugin, short_dir: Path) -> None:
    reg = short_dir / "registry" / "gpu.nvidia.com-reg.sock"
    dra_sock = short_dir / "plugins" / "gpu.nvidia.com" / "dra.sock"
    assert plugin.config.registration_socket == reg
    assert plugin.config.dra_socket == dra_sock
    assert reg.is_socket()
    assert dra_sock.is_socket()


@pytest.mark.asyncio
async def test_get_info(plugin: KubeletPlugin) -> None:
    info = await get_plugin_info(plugin.config.registration_socket)
    assert info.type == "DRAPlugin"
    assert info.name == "gpu.nvidia.com"
    assert info.endpoint == str(plugin.config.dra_socket)
    assert Path(info.endpoint).is_absolute()
    assert info.supported_versions == ("v1.DRAPlugin", "v1beta1.DRAPlugin")
    assert plugin.registration.info_calls == 1
    assert plugin.registration.registered is None


@pytest.mark.asyncio
async def test_registration_handshake(plugin: KubeletPlugin) -> None:
    registered = await register_plugin(plugin.config.registration_socket)
    assert registered.driver_name == "gpu.nvidia.com"
    assert registered.version == "v1.DRAPlugin"
    assert registered.endpoint == plugin.config.dra_socket
    assert plugin.registration.registered is True
    assert plugin.registration.notifications == [(True, "")]
    async with asyncio.timeout(5):
        await plugin.registration.wait_registered()


@pytest.mark.asyncio
async def test_older_kubelet_chooses_v1beta1(plugin: KubeletPlugin) -> None:
    registered = await register_plugin(plugin.config.registration_socket, supported=("v1beta1.DRAPlugin",))
    assert registered.version == "v1beta1.DRAPlugin"


@pytest.mark.asyncio
async def test_refused_registration_is_recorded(plugin: KubeletPlugin) -> None:
    with pytest.raises(RegistrationError, match="none of the versions"):
        await register_plugin(plugin.config.registration_socket, supported=("v2.DRAPlugin",))
    assert plugin.registration.registered is False
    assert "none of the versions" in plugin.registration.error


@pytest.mark.asyncio
async def test_fake_kubelet_discovers_and_forgets_plugins(
    config: PluginConfig, claims: InMemoryClaimSource, kubelet: FakeKubelet
) -> None:
    config.registry_dir.mkdir(parents=True)
    (config.registry_dir / "not-a-socket.txt").write_text("ignored")
    await kubelet.scan()
    assert kubelet.plugins == {}
    async with KubeletPlugin(config, claims, stop_grace=1.0) as running:
        await kubelet.scan()
        assert set(kubelet.plugins) == {"gpu.nvidia.com"}
        assert kubelet.plugins["gpu.nvidia.com"].version == "v1.DRAPlugin"
        assert running.registration.registered is True
        await kubelet.scan()  # already known: no second handshake
        assert running.registration.info_calls == 1
    assert not config.registration_socket.exists()
    assert not config.dra_socket.exists()
    await kubelet.scan()
    assert kubelet.plugins == {}


@pytest.mark.asyncio
async def test_stale_socket_files_are_replaced(config: PluginConfig, claims: InMemoryClaimSource) -> None:
    config.registry_dir.mkdir(parents=True)
    config.plugin_dir.mkdir(parents=True)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(config.registration_socket))  # bound, never listening: a dead plugin's
    stale.close()
    config.dra_socket.write_text("left over")
    async with KubeletPlugin(config, claims, stop_grace=1.0):
        registered = await register_plugin(config.registration_socket)
        assert registered.endpoint == config.dra_socket


@pytest.mark.asyncio
async def test_other_driver_name_and_dirs(short_dir: Path) -> None:
    config = PluginConfig(
        node_name=NODE,
        driver_name="gpu.example.com",
        registry_dir=short_dir / "r",
        plugins_dir=short_dir / "p",
        cdi_dir=short_dir / "c",
    )
    source = InMemoryClaimSource(
        [
            allocated_claim(
                results=[{"request": "gpu", "driver": "gpu.example.com", "pool": NODE, "device": "gpu-0"}]
            )
        ]
    )
    async with KubeletPlugin(config, source, stop_grace=1.0):
        registered = await register_plugin(short_dir / "r" / "gpu.example.com-reg.sock")
        assert registered.driver_name == "gpu.example.com"
        assert registered.endpoint == short_dir / "p" / "gpu.example.com" / "dra.sock"
        async with DraPluginClient(registered.endpoint) as dra:
            result = await dra.prepare([ref(allocated_claim())])
    assert result[CLAIM_UID].devices[0].cdi_device_ids == (f"k8s.gpu.example.com/gpu={CLAIM_UID}-gpu-0",)
    assert (short_dir / "c" / f"k8s.gpu.example.com-gpu_{CLAIM_UID}.json").is_file()


def test_socket_path_length_is_checked() -> None:
    with pytest.raises(ValueError, match="too long"):
        PluginConfig(node_name=NODE, registry_dir=Path("/tmp/" + "x" * 100))
