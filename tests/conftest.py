"""Fixtures shared across tests/: a fault-injecting fake API server and a client of it, and a
webhook server running on loopback. Shared helpers that are not fixtures live in tests/support/."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from reconciler.admission.queue_rules import JobPolicy
from reconciler.kube import Backoff, KubeClient
from reconciler.webhook.server import WebhookServer, make_app
from tests.support.fake_apiserver import FakeApiServer
from tests.support.webhook_server import Lookups, Running


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


@pytest_asyncio.fixture
async def running(tmp_path: Path) -> AsyncIterator[Running]:
    lookups = Lookups()
    server = WebhookServer(make_app(JobPolicy(), lookups), "127.0.0.1", 0, tmp_path, reload_interval=0.05)
    task = asyncio.get_running_loop().create_task(server.run())
    try:
        yield Running(server, lookups, tmp_path)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
