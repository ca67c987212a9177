"""Leader election against a Lease kept by the local fake API server (resourceVersion checked)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web

from reconciler.kube import Backoff, KubeClient
from reconciler.kube.leader import ElectionConfig, LeaderElector, LeadershipLost
from tests.support.fake_apiserver import FakeApiServer, Responder, status_body
from tests.support.leases import COLLECTION, ITEM, NAME, NS, LeaseStore


def hang() -> Responder:
    async def respond(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    return respond


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest_asyncio.fixture
async def store(fake: FakeApiServer) -> LeaseStore:
    leases = LeaseStore()
    fake.fallback(("LIST", ITEM), leases.get)
    fake.fallback(("POST", COLLECTION), leases.create)
    fake.fallback(("PUT", ITEM), leases.update)
    return leases


@pytest_asyncio.fixture
async def kube(fake: FakeApiServer) -> AsyncIterator[KubeClient]:
    client = KubeClient(fake.url, retry_attempts=1, retry_backoff=Backoff(initial=0.01, maximum=0.02))
    try:
        yield client
    finally:
        await client.close()


def elector(
    client: KubeClient,
    identity: str = "me",
    *,
    clock: Clock | None = None,
    lease: float = 15.0,
    renew: float = 10.0,
    retry: float = 0.02,
) -> LeaderElector:
    config = ElectionConfig(
        NS, NAME, identity, lease_duration=lease, renew_deadline=renew, retry_period=retry
    )
    if clock is None:
        return LeaderElector(client, config)
    return LeaderElector(client, config, monotonic=clock)


def leading(elector: LeaderElector) -> bool:
    return elector.is_leader


async def not_within(seconds: float, aw: Any) -> None:
    task = asyncio.ensure_future(aw)
    done, _ = await asyncio.wait([task], timeout=seconds)
    assert not done, "returned although it should still be waiting"
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


@pytest.mark.asyncio
async def test_acquires_an_absent_lease_by_creating_it(kube: KubeClient, store: LeaseStore) -> None:
    me = elector(kube)
    await asyncio.wait_for(me.acquire(), 2)
    assert leading(me)
    assert me.leader == "me"
    assert store.spec["holderIdentity"] == "me"
    assert store.spec["leaseDurationSeconds"] == 15
    assert store.spec["leaseTransitions"] == 0
    assert store.spec["renewTime"].endswith("Z")
    assert "." in store.spec["renewTime"]


@pytest.mark.asyncio
async def test_waits_while_held_and_takes_over_after_expiry_on_the_monotonic_clock(
    kube: KubeClient, store: LeaseStore, fake: FakeApiServer
) -> None:
    # The holder's renewTime is decades old: wall clocks are never compared, so that means nothing.
    store.put(
        {"holderIdentity": "other", "leaseDurationSeconds": 15, "renewTime": "2000-01-01T00:00:00.000000Z"}
    )
    clock = Clock()
    me = elector(kube, clock=clock)
    await not_within(0.3, me.acquire())
    assert not leading(me)
    assert me.leader == "other"
    assert not store.updates
    clock.now += 10
    # The holder renews: the 15 s start again from this observation.
    store.put({**store.spec, "renewTime": "2000-01-01T00:00:10.000000Z", "leaseTransitions": 3})
    await not_within(0.2, me.acquire())
    clock.now += 10  # 20 s since the first observation, 10 s since the last change
    await not_within(0.2, me.acquire())
    assert not leading(me)
    clock.now += 6
    rv_before = str(store.rv)
    await asyncio.wait_for(me.acquire(), 2)
    assert leading(me)
    assert store.spec["holderIdentity"] == "me"
    assert store.spec["leaseTransitions"] == 4
    # The takeover was conditional on the version it was decided on.
    assert store.updates[-1]["metadata"]["resourceVersion"] == rv_before


@pytest.mark.asyncio
async def test_a_conflict_means_someone_else_won(
    kube: KubeClient, store: LeaseStore, fake: FakeApiServer
) -> None:
    store.put({"holderIdentity": "", "leaseDurationSeconds": 1})  # released: free to take
    me = elector(kube)

    async def rival_wins_first(request: web.Request) -> web.StreamResponse:
        store.put({"holderIdentity": "rival", "leaseDurationSeconds": 15, "renewTime": "x"})
        return await store.update(request)

    fake.script(("PUT", ITEM), rival_wins_first)
    await not_within(0.3, me.acquire())
    assert not leading(me)
    assert me.leader == "rival"
    assert store.spec["holderIdentity"] == "rival"
    assert len(store.updates) == 1  # and no retry: the rival's lease is fresh


@pytest.mark.asyncio
async def test_renew_failing_beyond_the_renew_deadline_loses_leadership(
    kube: KubeClient, store: LeaseStore, fake: FakeApiServer
) -> None:
    me = elector(kube, lease=1.5, renew=0.6, retry=0.1)
    await asyncio.wait_for(me.acquire(), 2)
    fake.fallback(("PUT", ITEM), reply(500, "InternalError"))
    began = time.monotonic()
    with pytest.raises(LeadershipLost, match="not renewed within"):
        await asyncio.wait_for(me.hold(), 3)
    took = time.monotonic() - began
    assert 0.5 <= took < 1.5, took  # by the deadline, before the lease could expire for others
    assert not leading(me)
    assert len([r for r in fake.recorded("PUT")]) >= 3  # it kept trying until then


def reply(code: int, reason: str) -> Responder:
    async def respond(request: web.Request) -> web.StreamResponse:
        return web.json_response(status_body(code, reason, "scripted"), status=code)

    return respond


@pytest.mark.asyncio
async def test_renewals_keep_the_lease_and_each_one_is_conditional(
    kube: KubeClient, store: LeaseStore, fake: FakeApiServer
) -> None:
    me = elector(kube, lease=1.0, renew=0.6, retry=0.05)
    await asyncio.wait_for(me.acquire(), 2)
    await not_within(0.5, me.hold())
    assert leading(me)
    assert len(store.updates) >= 4
    assert all(u["spec"]["holderIdentity"] == "me" for u in store.updates)
    renewals = [u["spec"]["renewTime"] for u in store.updates]
    assert renewals == sorted(renewals)
    assert len(set(renewals)) > 1


@pytest.mark.asyncio
async def test_another_holder_in_the_lease_means_lost_at_once(kube: KubeClient, store: LeaseStore) -> None:
    me = elector(kube, lease=10.0, renew=5.0, retry=0.05)
    await asyncio.wait_for(me.acquire(), 2)
    store.put({**store.spec, "holderIdentity": "usurper"})
    began = time.monotonic()
    with pytest.raises(LeadershipLost, match="usurper"):
        await asyncio.wait_for(me.hold(), 2)
    assert time.monotonic() - began < 1.0  # not after the 5 s renew deadline


@pytest.mark.asyncio
async def test_a_server_that_never_answers_cannot_hang_the_elector(
    kube: KubeClient, store: LeaseStore, fake: FakeApiServer
) -> None:
    me = elector(kube, lease=1.5, renew=0.6, retry=0.1)
    await asyncio.wait_for(me.acquire(), 2)
    fake.fallback(("LIST", ITEM), hang())
    began = time.monotonic()
    with pytest.raises(LeadershipLost):
        await asyncio.wait_for(me.hold(), 3)
    assert time.monotonic() - began < 1.5  # by the deadline, before the lease could expire
    # A follower against a silent server goes on trying, round after round.
    other = elector(kube, "other", lease=1.0, renew=0.6, retry=0.05)
    gets_before = len(fake.recorded("GET"))
    await not_within(1.2, other.acquire())
    assert len(fake.recorded("GET")) - gets_before >= 2


@pytest.mark.asyncio
async def test_release_lets_a_follower_take_over_at_once(kube: KubeClient, store: LeaseStore) -> None:
    me = elector(kube)
    await asyncio.wait_for(me.acquire(), 2)
    clock = Clock()
    follower = elector(kube, "follower", clock=clock)
    await not_within(0.2, follower.acquire())
    assert follower.leader == "me"
    assert await me.release()
    assert not leading(me)
    assert "holderIdentity" not in store.spec
    assert store.spec["leaseDurationSeconds"] == 1
    await asyncio.wait_for(follower.acquire(), 2)  # the monotonic clock did not move at all
    assert store.spec["holderIdentity"] == "follower"
    assert store.spec["leaseTransitions"] == 1
    assert not await me.release()  # only a leader releases


@pytest.mark.asyncio
async def test_release_after_a_renewal_that_landed_unseen_still_releases(
    kube: KubeClient, store: LeaseStore
) -> None:
    """A renewal cancelled at shutdown may land after all: the release's write then conflicts,
    and the Lease, read again and still ours, is released (not left to expire)."""
    me = elector(kube)
    await asyncio.wait_for(me.acquire(), 2)
    store.put({**store.spec, "renewTime": "2026-12-01T10:00:00.000000Z"})  # our renewal, unseen
    assert await me.release()
    assert "holderIdentity" not in store.spec
    assert store.spec["leaseDurationSeconds"] == 1


@pytest.mark.asyncio
async def test_release_leaves_a_lease_someone_else_took_alone(kube: KubeClient, store: LeaseStore) -> None:
    me = elector(kube)
    await asyncio.wait_for(me.acquire(), 2)
    store.put({**store.spec, "holderIdentity": "other"})
    assert not await me.release()
    assert store.spec["holderIdentity"] == "other"


@pytest.mark.asyncio
async def test_create_conflict_is_not_leadership(
    kube: KubeClient, store: LeaseStore, fake: FakeApiServer
) -> None:
    fake.script(("POST", COLLECTION), reply(409, "AlreadyExists"))
    me = elector(kube, retry=2.0)  # a standby looks again after 0.5-0.6 s
    await not_within(0.3, me.acquire())  # one round: the create lost the race
    assert not leading(me)
    assert len(fake.recorded("POST")) == 1
    await asyncio.wait_for(me.acquire(), 2)  # the next round creates it
    assert store.spec["holderIdentity"] == "me"


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="greater than the renew deadline"):
        ElectionConfig(NS, NAME, "me", lease_duration=10, renew_deadline=10, retry_period=2)
    with pytest.raises(ValueError, match="retry period"):
        ElectionConfig(NS, NAME, "me", lease_duration=15, renew_deadline=2, retry_period=2)
    with pytest.raises(ValueError, match="identity"):
        ElectionConfig(NS, NAME, "")


@pytest.mark.asyncio
async def test_a_standby_looks_often_and_wakes_when_the_lease_it_saw_runs_out(
    kube: KubeClient, store: LeaseStore
) -> None:
    """Expiry counts from when a renewal was seen here: a standby looking only every jittered
    retry period (client-go's 2-4.4 s) sees the last renewal late and notices the expiry late,
    up to 8.8 s after the lease ran out with Kueue's defaults. Here it looks every quarter retry
    period and wakes just when the lease it saw runs out."""
    store.put({"holderIdentity": "other", "leaseDurationSeconds": 15, "renewTime": "2026-12-07T12:00:00Z"})
    clock = Clock()
    me = elector(kube, clock=clock, retry=2.0)
    assert 0.5 <= me.follower_wait(0.0) <= me.follower_wait(0.999) < 0.6  # nothing seen yet
    await not_within(0.05, me.acquire())  # one look: held by `other`, seen at 1000
    assert me.leader == "other"
    assert me.follower_wait(0.999) < 0.6
    clock.now += 14.8  # 0.2 s before the lease seen at 1000 runs out
    assert me.follower_wait(0.999) == pytest.approx(0.21)
    clock.now += 1.0  # past it: the next look at once
    assert me.follower_wait(0.5) == pytest.approx(0.01)


@pytest.mark.asyncio
async def test_holds_only_within_the_renew_deadline_of_the_last_renewal(
    kube: KubeClient, store: LeaseStore
) -> None:
    """A leader paused (SIGSTOP, a frozen VM) past its renew deadline must not take the Lease as
    still its own on waking: a follower may lead by then. Found by the chaos run (e2e/chaos)."""
    clock = Clock()
    me = elector(kube, clock=clock, lease=8.0, renew=6.0)
    assert not me.holds()  # not leading yet
    await asyncio.wait_for(me.acquire(), 2)
    assert me.holds()
    clock.now += 5.9
    assert me.holds()
    clock.now += 0.2  # 6.1 s after the renewal began: the pause outlasted the renew deadline
    assert me.is_leader  # what it believed before the pause
    assert not me.holds()
