from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from reconciler.kube import Backoff, KubeClient
from tests.support.fake_apiserver import FakeApiServer


@pytest_asyncio.fixture
async def fake() -> AsyncIterator[FakeApiServer]:
    server = FakeApiServer()
    await server.start()
    try:
        yield server
    finally:
        await server.close()


@pytest_asyncio.fixture
async def client(fake: FakeApiServer) -> AsyncIterator[KubeClient]:
    kube = KubeClient(fake.url, token="t0ken", retry_backoff=Backoff(initial=0.01, maximum=0.04))
    try:
        yield kube
    finally:
        await kube.close()
