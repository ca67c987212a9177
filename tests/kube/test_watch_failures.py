"""The informer against the fault-injecting fake API server: failures, backoff, cancellation, liveness.

Every test runs an Informer in a task, scripts what the server answers, waits
for an observable outcome and cancels the task. Timeouts and backoffs are
scaled down so that each test takes well under two seconds.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from structlog.testing import capture_logs

from reconciler.api import Pod
from reconciler.api.resources import PODS
from reconciler.kube import Backoff, KubeClient
from tests.support.fake_apiserver import (
    FakeApiServer,
    Pause,
    bookmark,
    error_event,
    json_reply,
    obj,
    page,
    status_reply,
    stream,
)
from tests.support.informers import HANG, LIST, WATCH, Recorder, lists, make, running, until, watches


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "failure",
    [status_reply(500, "InternalError", "x"), stream(), status_reply(409, "Conflict", "odd")],
    ids=["500", "empty-stream", "409"],
)
async def test_failing_watch_backs_off(fake: FakeApiServer, client: KubeClient, failure: Any) -> None:
    fake.script(LIST, page([], rv=10))
    fake.fallback(WATCH, failure)
    backoff = Backoff(initial=0.02, maximum=0.16, factor=2.0, jitter=0.5)
    informer = make(client, Recorder(), Pod, backoff=backoff)
    async with running(informer):
        await asyncio.sleep(0.8)
    times = [r.at for r in fake.recorded("GET", watch=True)]
    # Without backoff this would be hundreds; the delays run 0.01-0.02, 0.02-0.04, ... capped at 0.08-0.16.
    assert 4 <= len(times) <= 14
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert min(gaps) >= backoff.floor * 0.9
    assert max(gaps[-3:]) > max(gaps[:2])  # it grows
    assert all(q["resourceVersion"] == "10" for q in watches(fake))  # resume, never relist
    assert informer.stats.relists == 0


@pytest.mark.asyncio
async def test_failing_list_backs_off(fake: FakeApiServer, client: KubeClient) -> None:
    fake.fallback(LIST, status_reply(503, "ServiceUnavailable", "starting"))
    informer = make(client, Recorder(), Pod, backoff=Backoff(initial=0.1, maximum=0.2))
    async with running(informer):
        await asyncio.sleep(0.6)
    # Each list is tried 4 times by the client (0.01-0.04 s apart), then the informer waits 0.05-0.2 s.
    assert 4 <= len(lists(fake)) <= 16
    assert not informer.synced


@pytest.mark.asyncio
async def test_watch_429_honours_retry_after(fake: FakeApiServer, client: KubeClient) -> None:
    fake.script(LIST, page([], rv=10))
    fake.script(WATCH, status_reply(429, "TooManyRequests", "slow", retry_after="0.3"))
    fake.fallback(WATCH, HANG)
    informer = make(client, Recorder(), Pod)
    async with running(informer):
        await until(lambda: len(watches(fake)) == 2)
    first, second = fake.recorded("GET", watch=True)
    assert second.at - first.at >= 0.3


@pytest.mark.asyncio
async def test_backoff_resets_after_an_event(fake: FakeApiServer, client: KubeClient) -> None:
    fake.script(LIST, page([], rv=10))
    fail = status_reply(500, "InternalError", "x")
    fake.script(WATCH, fail, fail, fail, stream(bookmark(11), end="drop"), fail)
    fake.fallback(WATCH, HANG)
    informer = make(client, Recorder(), Pod, backoff=Backoff(initial=0.05, maximum=1.0, jitter=0.2))
    with capture_logs() as logs:
        async with running(informer):
            await until(lambda: len(watches(fake)) == 6)
    # The pauses the informer chose (not the wall-clock gaps, which a busy machine stretches):
    # 0.04-0.05, 0.08-0.1, 0.16-0.2; after the bookmark (its stream dropped, then one more
    # failure) the series starts over: 0.04-0.05, 0.08-0.1 (without the reset 0.32-0.4, 0.64-0.8).
    delays = [e["delay"] for e in logs if e["event"] == "re-watching after a pause"]
    bases = [0.05, 0.1, 0.2, 0.05, 0.1]
    assert len(delays) == len(bases), delays
    assert all(b * 0.8 - 0.001 <= d <= b + 0.001 for d, b in zip(delays, bases, strict=True)), delays
    times = [r.at for r in fake.recorded("GET", watch=True)]
    assert times[3] - times[2] >= 0.16  # the third pause was waited (a busy machine only adds)


@pytest.mark.asyncio
async def test_normal_stream_end_has_a_floor(fake: FakeApiServer, client: KubeClient) -> None:
    fake.script(LIST, page([], rv=10))
    fake.fallback(WATCH, stream(bookmark(11)))  # a server that ends every stream at once
    informer = make(client, Recorder(), Pod, backoff=Backoff(initial=0.1, maximum=1.0, jitter=0.5))
    async with running(informer):
        await asyncio.sleep(0.55)
    assert 3 <= len(watches(fake)) <= 7  # at most one per `initial` seconds


@pytest.mark.asyncio
async def test_quiet_stream_that_lasted_is_not_a_failure(fake: FakeApiServer, client: KubeClient) -> None:
    fake.script(LIST, page([], rv=10))
    fake.fallback(WATCH, stream(Pause(0.1)))  # no line, but it lasted its (scaled-down) timeout
    backoff = Backoff(initial=0.05, maximum=1.0, jitter=0.5)
    informer = make(client, Recorder(), Pod, backoff=backoff, watch_timeout=(0.1, 0.2))
    with capture_logs() as logs:
        async with running(informer):
            await until(lambda: len(watches(fake)) == 5)
    # No backoff pause at all (a busy machine may stretch the gaps, so they are not timed).
    assert [e for e in logs if e["event"] == "re-watching after a pause"] == []


@pytest.mark.asyncio
async def test_cancel_closes_the_stream(fake: FakeApiServer, client: KubeClient) -> None:
    fake.script(LIST, page([obj("a", 1)], rv=10))
    fake.fallback(WATCH, stream(Pause(0.01), bookmark(11), end="hang"))
    informer = make(client, Recorder(), Pod)
    task = asyncio.create_task(informer.run())
    await until(lambda: informer.stats.events["BOOKMARK"] == 1 and fake.open_streams == 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await until(lambda: fake.open_streams == 0, within=0.5)


@pytest.mark.asyncio
async def test_cancel_during_list(fake: FakeApiServer, client: KubeClient) -> None:
    fake.script(LIST, stream(Pause(5.0)))
    informer = make(client, Recorder(), Pod)
    task = asyncio.create_task(informer.run())
    await until(lambda: fake.open_streams == 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not informer.synced


@pytest.mark.asyncio
async def test_liveness_and_selectors(fake: FakeApiServer, client: KubeClient) -> None:
    fake.script(LIST, page([], rv=10))
    fake.fallback(WATCH, stream(Pause(0.05), bookmark(11), end="hang"))
    informer = make(client, Recorder(), Pod, label_selector="app=x", field_selector="spec.nodeName=n1")
    before = informer.last_event_monotonic
    async with running(informer):
        await until(lambda: informer.stats.events["BOOKMARK"] == 1)
    assert informer.last_event_monotonic > before
    for q in fake.recorded("GET"):
        assert q.query["labelSelector"] == "app=x"
        assert q.query["fieldSelector"] == "spec.nodeName=n1"


@pytest.mark.asyncio
async def test_namespaced_informer_path(fake: FakeApiServer, client: KubeClient) -> None:
    path = PODS.list_path("team-a")
    fake.script(("LIST", path), json_reply(200, {"metadata": {"resourceVersion": "5"}, "items": None}))
    fake.fallback(("WATCH", path), HANG)
    rec = Recorder()
    informer = make(client, rec, Pod, namespace="team-a")
    async with running(informer):
        await until(lambda: informer.synced)
    assert rec.summary() == [("SYNCED", "", "")]


@pytest.mark.asyncio
async def test_relist_is_logged_with_the_kind(fake: FakeApiServer, client: KubeClient) -> None:
    fake.script(LIST, page([obj("a", 1)], rv=10), page([obj("a", 1)], rv=20))
    fake.script(WATCH, stream(error_event(410)))
    fake.fallback(WATCH, HANG)
    with capture_logs() as logs:
        informer = make(client, Recorder(), Pod)
        async with running(informer):
            await until(lambda: informer.stats.lists == 2)
    gone = [e for e in logs if "410" in e["event"]]
    relist = [e for e in logs if e["event"] == "relisting"]
    assert gone
    assert gone[0]["kind"] == "Pod"
    assert relist
    assert relist[0]["kind"] == "Pod"
    assert relist[0]["log_level"] == "info"


@pytest.mark.asyncio
async def test_relist_soon_ends_an_open_watch_and_relists(fake: FakeApiServer, client: KubeClient) -> None:
    # A stream the server keeps open and feeds nothing (as one left on a torn-down watch cache
    # would be): asked to, the informer leaves it and lists again, without waiting for the
    # inactivity deadline.
    fake.script(LIST, page([obj("a", 1)], rv=10), page([obj("a", 2)], rv=20))
    fake.fallback(WATCH, HANG)
    rec = Recorder()
    informer = make(client, rec, Pod, backoff=Backoff(initial=0.01, maximum=0.05, jitter=0.0))
    async with running(informer):
        await until(lambda: informer.synced and fake.open_streams == 1)
        informer.relist_soon()
        await until(lambda: informer.stats.lists == 2, within=1.0)
        await until(lambda: fake.open_streams == 1)
    assert ("MODIFIED", "a", "2") in rec.summary()
    assert informer.stats.inactivity_timeouts == 0
