"""/healthz and /readyz over HTTP (a real port on 127.0.0.1) for each role and state."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
import pytest_asyncio
from reconciler.observability.health import ControllerState
from reconciler.observability.health import Health
from reconciler.observability.health import WatchState
from reconciler.observability.metrics import Metrics
from reconciler.observability.server import ROLE_HEADER
from reconciler.observability.server import Server
from reconciler.observability.server import health_app
from reconciler.observability.server import metrics_app
from reconciler.observability.server import parse_bind_address
from reconciler.observability.server import start_server


def watches(
    *, synced: bool = True, idle: float = 1.0, names: tuple[str, ...] = ("jobs", "workloads")
) -> list[WatchState]:
    return [WatchState(n, synced, idle, stale_after=180.0) for n in names]


class Probe:
    def __init__(self, health: Health, server: Server) -> None:
        self.health = health
        self.url = f"http://127.0.0.1:{server.port}"

    async def get(self, path: str) -> tuple[int, str, str]:
        async with aiohttp.ClientSession() as session, session.get(self.url + path) as resp:
            return resp.status, (await resp.text()).strip(), resp.headers[ROLE_HEADER]


@pytest_asyncio.fixture
async def probe() -> AsyncIterator[Probe]:
    health = Health()
    server = await start_server(health_app(health), "127.0.0.1:0")
    assert server is not None
    try:
        yield Probe(health, server)
    finally:
        await server.close()


@pytest.mark.asyncio
async def test_a_follower_that_just_won_the_lease_does_not_name_itself_as_the_leader(probe: Probe) -> None:
    """Seen in the fail-over e2e test: between winning the Lease and acting as leader, a replica
    said it stood by for itself."""
    probe.health.role, probe.health.identity = "follower", "pod-b"
    probe.health.leader = lambda: "pod-b"
    assert await probe.get("/readyz") == (200, "standing by: not the leader (leader is unknown)", "follower")


@pytest.mark.asyncio
async def test_follower_is_ready_and_says_who_leads(probe: Probe) -> None:
    probe.health.role = "follower"
    probe.health.leader = lambda: "pod-a"
    assert await probe.get("/readyz") == (200, "standing by: not the leader (leader is pod-a)", "follower")
    status, body, role = await probe.get("/healthz")
    assert (status, role) == (200, "follower")
    assert "no watches running" in body


@pytest.mark.asyncio
async def test_no_replica_is_ready_while_its_webhook_server_waits(probe: Probe) -> None:
    waiting: list[str | None] = ["webhook server waiting for tls.crt and tls.key in /certs"]
    probe.health.role = "follower"
    probe.health.webhook = lambda: waiting[0]
    assert await probe.get("/readyz") == (
        503,
        "not ready: follower, webhook server waiting for tls.crt and tls.key in /certs",
        "follower",
    )
    waiting[0] = None
    assert (await probe.get("/readyz"))[0] == 200


@pytest.mark.asyncio
async def test_leader_is_not_ready_until_synced_and_rebuilt(probe: Probe) -> None:
    health = probe.health
    health.role = "leader"
    assert await probe.get("/readyz") == (503, "not ready: leader, controller starting", "leader")
    state = ControllerState(watches(synced=False, names=("jobs",)) + watches(names=("workloads",)), False)
    health.controller = lambda: state
    assert await probe.get("/readyz") == (
        503,
        "not ready: leader, waiting for watches to sync: jobs",
        "leader",
    )
    state = ControllerState(watches(), ledger_rebuilt=False)
    assert await probe.get("/readyz") == (503, "not ready: leader, ledger not rebuilt yet", "leader")
    state = ControllerState(watches(), ledger_rebuilt=True)
    assert await probe.get("/readyz") == (200, "ok: leader, all watches synced, ledger rebuilt", "leader")
    assert (await probe.get("/healthz"))[0] == 200
    health.stopping = True
    assert await probe.get("/readyz") == (503, "not ready: leader, shutting down", "leader")


@pytest.mark.asyncio
async def test_a_stalled_watch_or_a_stuck_reconciler_fails_liveness(probe: Probe) -> None:
    health = probe.health  # standalone
    stale = [WatchState("jobs", True, 1.0, 180.0), WatchState("workloads", True, 181.0, 180.0)]
    health.controller = lambda: ControllerState(stale, True)
    status, body, role = await probe.get("/healthz")
    assert (status, role) == (500, "standalone")
    assert "watch workloads: no line for 181s (limit 180s)" in body
    assert "jobs" not in body
    health.controller = lambda: ControllerState(
        watches(), True, stalled="9 inbox items and no batch handled for 61s"
    )
    status, body, _ = await probe.get("/healthz")
    assert status == 500
    assert "reconciler: 9 inbox items" in body
    health.controller = lambda: ControllerState(watches(), True)
    assert await probe.get("/healthz") == (200, "ok: standalone, 2 watches active", "standalone")


@pytest.mark.asyncio
async def test_metrics_endpoint_serves_the_dedicated_registry() -> None:
    metrics = Metrics("leader")
    server = await start_server(metrics_app(metrics), "127.0.0.1:0")
    assert server is not None
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{server.port}/metrics") as resp,
        ):
            assert resp.status == 200
            assert resp.headers["Content-Type"].startswith("text/plain")
            text = await resp.text()
    finally:
        await server.close()
    assert "kueue_build_info{" in text
    assert "dra_quota_leader 1.0" in text
    assert "python_gc_objects_collected_total" not in text  # not the global registry


def test_bind_addresses() -> None:
    assert parse_bind_address("0") is None
    assert parse_bind_address(":8080") == (None, 8080)
    assert parse_bind_address("127.0.0.1:9") == ("127.0.0.1", 9)
    assert parse_bind_address("[::1]:8081") == ("::1", 8081)
    for bad in ("8080", "host:", "host:port", ":70000"):
        with pytest.raises(ValueError, match="bind address"):
            parse_bind_address(bad)
