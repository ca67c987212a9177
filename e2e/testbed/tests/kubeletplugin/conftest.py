"""Fixtures of the kubelet plugin's tests: a plugin on unix sockets in a short temp dir, claims
from memory, a fake kubelet and a DRA client (once per service version)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from e2e.testbed.kubeletplugin import (
    DraPluginClient,
    FakeKubelet,
    InMemoryClaimSource,
    KubeletPlugin,
    PluginConfig,
)
from e2e.testbed.tests.allocated_claims import NODE, allocated_claim


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A short temp dir: unix socket paths must stay under 108 bytes."""
    path = Path(tempfile.mkdtemp(prefix="kp-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def config(short_dir: Path) -> PluginConfig:
    return PluginConfig(
        node_name=NODE,
        registry_dir=short_dir / "registry",
        plugins_dir=short_dir / "plugins",
        cdi_dir=short_dir / "cdi",
    )


@pytest.fixture
def claims() -> InMemoryClaimSource:
    return InMemoryClaimSource([allocated_claim()])


@pytest_asyncio.fixture
async def plugin(config: PluginConfig, claims: InMemoryClaimSource) -> AsyncIterator[KubeletPlugin]:
    async with KubeletPlugin(config, claims, stop_grace=1.0) as running:
        yield running


@pytest_asyncio.fixture
async def kubelet(config: PluginConfig) -> AsyncIterator[FakeKubelet]:
    fake = FakeKubelet(config.registry_dir, call_timeout=10.0)
    try:
        yield fake
    finally:
        await fake.close()


@pytest_asyncio.fixture(params=["v1.DRAPlugin", "v1beta1.DRAPlugin"])
async def dra(request: pytest.FixtureRequest, plugin: KubeletPlugin) -> AsyncIterator[DraPluginClient]:
    """A client of the plugin's DRA socket, once per service version."""
    async with DraPluginClient(plugin.config.dra_socket, request.param, timeout=10.0) as client:
        yield client
