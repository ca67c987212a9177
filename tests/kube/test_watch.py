"""The informer against the fault-injecting fake API server.

Every test runs an Informer in a task, scripts what the server answers, waits
for an observable outcome and cancels the task. Timeouts and backoffs are
scaled down so that each test takes well under two seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import pytest
from structlog.testing import capture_logs

from reconciler.api import Job, Pod
from reconciler.api.resources import PODS
from reconciler.kube import Backoff, HasMetadata, Informer, KubeClient, WatchEvent
from tests.support.fake_apiserver import (
    FakeApiServer,
    Pause,
    bookmark,
    error_event,
    event,
    json_reply,
    obj,
    page,
    status_reply,
    stream,
)

PATH = PODS.list_path()
LIST = ("LIST", PATH)
WATCH = ("WATCH", PATH)
FAST = Backoff(initial=0.02, maximum=0.1, factor=2.0, jitter=0.5)

T = TypeVar("T", bound=HasMetadata)


class Recorder:
    def __init__(self) -> None:
        self.events: list[WatchEvent[Any]] = []

    def __call__(self, ev: WatchEvent[Any]) -> None:
        self.events.append(ev)

    def summary(self) -> list[tuple[str, str, str]]:
        """(kind, name, resourceVersion) per event; SYNCED as ("SYNCED", "", "")."""
        return [
            (e.kind, e.key[1], e.obj.metadata.resource_version if e.obj is not None else "")
            for e in self.events
        ]

    def count(self, kind: str) -> int:
        return sum(1 for e in self.events if e.kind == kind)


def make(
    client: KubeClient,
    sink: Callable[[WatchEvent[T]], None],
    decode_type: type[T],
    **kwargs: Any,
) -> Informer[T]:
    kwargs.setdefault("watch_timeout", (30.0, 60.0))
    kwargs.setdefault("inactivity_timeout", 5.0)
    kwargs.setdefault("backoff", FAST)
    kwargs.setdefault("page_size", 2)
    return Informer(client, PODS, decode_type, sink, **kwargs)


@contextlib.asynccontextmanager
async def running(informer: Informer[Any]) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(informer.run())
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def until(condition: Callable[[], bool], within: float = 1.5) -> None:
    async with asyncio.timeout(within):
        while not condition():  # noqa: ASYNC110 (polls state the informer exposes)
            await asyncio.sleep(0.005)


def watches(fake: FakeApiServer) -> list[dict[str, str]]:
    return [r.query for r in fake.recorded("GET", watch=True)]


def lists(fake: FakeApiServer) -> list[dict[str, str]]:
    return [r.query for r in fake.recorded("GET", watch=False)]


HANG = stream(end="hang")


@pytest.mark.asyncio
async def test_paged_list_then_watch_resumes_from_bookmark(fake: FakeApiServer, client: KubeClient) -> None:
    fake.script(LIST, page([obj("a", 1), obj("b", 2)], rv=10, cont="c1"), page([obj("c", 3)], rv=10))
    fake.script(WATCH, stream(event("MODIFIED", obj("a", 11)), bookmark(15)))
    fake.fallback(WATCH, HANG)
    rec = Recorder()
    informer = make(client, rec, Pod, watch_timeout=(100.0, 200.0))
    synced_before = informer.synced
    async with running(informer):
        await until(lambda: len(watches(fake)) == 2)
    assert not synced_before
    assert informer.synced
    assert rec.summary() == [
        ("ADDED", "a", "1"),
        ("ADDED", "b", "2"),
        ("ADDED", "c", "3"),
        ("SYNCED", "", ""),
        ("MODIFIED", "a", "11"),
    ]
    assert [q.get("continue") for q in lists(fake)] == [None, "c1"]
    assert all(q["limit"] == "2" for q in lists(fake))
    first, second = watches(fake)
    assert first["resourceVersion"] == "10"  # the list's rv, not an item's
    assert first["allowWatchBookmarks"] == "true"
    assert first["watch"] == "1"
    assert 100 <= int(first["timeoutSeconds"]) <= 200
    assert second["resourceVersion"] == "15"  # the bookmark's, no relist
    assert informer.stats.lists == 1
    assert informer.stats.relists == 0
    assert informer.stats.watch_restarts == 1
    assert informer.stats.events["BOOKMARK"] == 1
    assert rec.events[0].key == ("default", "a")
    assert rec.events[0].resource is PODS


@pytest.mark.asyncio
@pytest.mark.parametrize("form", ["event", "http"])
async def test_410_relists_and_diffs_the_cache(fake: FakeApiServer, client: KubeClient, form: str) -> None:
    fake.script(LIST, page([obj("a", 1), obj("b", 2), obj("c", 3)], rv=10))
    gone = stream(error_event(410)) if form == "event" else status_reply(410, "Expired", "too old")
    fake.script(WATCH, stream(event("MODIFIED", obj("c", 12))), gone)
    # After the gap: a unchanged, b deleted, c changed again, d new.
    fake.script(LIST, page([obj("a", 1), obj("c", 14), obj("d", 13)], rv=20))
    fake.fallback(WATCH, HANG)
    rec = Recorder()
    informer = make(client, rec, Pod, page_size=10)
    async with running(informer):
        await until(lambda: rec.count("SYNCED") == 2 and len(watches(fake)) == 3)
    assert rec.summary() == [
        ("ADDED", "a", "1"),
        ("ADDED", "b", "2"),
        ("ADDED", "c", "3"),
        ("SYNCED", "", ""),
        ("MODIFIED", "c", "12"),
        ("MODIFIED", "c", "14"),
        ("ADDED", "d", "13"),
        ("DELETED", "b", "2"),  # the last state we knew
        ("SYNCED", "", ""),
    ]
    assert [q["resourceVersion"] for q in watches(fake)] == ["10", "12", "20"]
    assert informer.stats.gone == 1
    assert informer.stats.relists == 1
    assert len(informer) == 3


@pytest.mark.asyncio
async def test_watch_deletion_not_repeated_on_relist(fake: FakeApiServer, client: KubeClient) -> None:
    fake.script(LIST, page([obj("a", 1), obj("b", 2)], rv=10), page([obj("a", 1)], rv=30))
    fake.script(WATCH, stream(event("DELETED", obj("b", 11)), error_event(410)))
    fake.fallback(WATCH, HANG)
    rec = Recorder()
    informer = make(client, rec, Pod, page_size=10)
    async with running(informer):
        await until(lambda: rec.count("SYNCED") == 2)
    assert rec.summary()[2:] == [("SYNCED", "", ""), ("DELETED", "b", "11"), ("SYNCED", "", "")]


@pytest.mark.asyncio
async def test_expired_continue_token_restarts_the_list(fake: FakeApiServer, client: KubeClient) -> None:
    fake.script(
        LIST,
        page([obj("a", 1), obj("b", 2)], rv=10, cont="old"),
        status_reply(410, "Expired", "The provided continue parameter is too old"),
        page([obj("a", 1), obj("b", 2)], rv=12, cont="new"),
        page([obj("c", 11)], rv=12),
    )
    fake.fallback(WATCH, HANG)
    rec = Recorder()
    informer = make(client, rec, Pod)
    async with running(informer):
        await until(lambda: len(watches(fake)) == 1)
    assert rec.summary() == [
        ("ADDED", "a", "1"),
        ("ADDED", "b", "2"),
        ("ADDED", "c", "11"),
        ("SYNCED", "", ""),
    ]
    assert [q.get("continue") for q in lists(fake)] == [None, "old", None, "new"]
    assert watches(fake)[0]["resourceVersion"] == "12"
    assert informer.stats.list_restarts == 1


@pytest.mark.asyncio
async def test_other_error_event_relists_after_backoff(fake: FakeApiServer, client: KubeClient) -> None:
    fake.script(LIST, page([], rv=10), page([obj("a", 5)], rv=11))
    fake.script(WATCH, stream(error_event(500, "InternalError", "etcd trouble")))
    fake.fallback(WATCH, HANG)
    rec = Recorder()
    informer = make(client, rec, Pod, backoff=Backoff(initial=0.2, maximum=0.4, jitter=0.5))
    async with running(informer):
        await until(lambda: rec.count("SYNCED") == 2)
    first_watch, second_list = fake.recorded("GET")[1:3]
    assert second_list.at - first_watch.at >= 0.1  # the backoff's floor
    assert informer.stats.gone == 0
    assert informer.stats.errors == 1
    assert rec.summary()[-2:] == [("ADDED", "a", "5"), ("SYNCED", "", "")]


@pytest.mark.asyncio
async def test_inactivity_deadline_reconnects_from_last_rv(fake: FakeApiServer, client: KubeClient) -> None:
    fake.script(LIST, page([], rv=10))
    fake.script(WATCH, stream(bookmark(17), end="hang"))
    fake.fallback(WATCH, HANG)
    informer = make(client, Recorder(), Pod, inactivity_timeout=0.2)
    start = time.monotonic()
    async with running(informer):
        await until(lambda: len(watches(fake)) == 2)
        elapsed = time.monotonic() - start
        await until(lambda: fake.open_streams == 1)  # the silent one was closed
    assert 0.2 <= elapsed < 1.0
    assert watches(fake)[1]["resourceVersion"] == "17"
    assert informer.stats.inactivity_timeouts == 1
    assert informer.stats.relists == 0


@pytest.mark.asyncio
async def test_a_quiet_watch_the_server_accepts_counts_as_contact(
    fake: FakeApiServer, client: KubeClient
) -> None:
    fake.script(LIST, page([], rv=10))
    fake.fallback(WATCH, HANG)  # accepted, then silent: no events, no bookmarks
    informer = make(client, Recorder(), Pod, inactivity_timeout=0.2)
    async with running(informer):
        await until(lambda: len(watches(fake)) >= 1)
        listed_at = informer.last_event_monotonic
        # The silent stream is dropped (read timeout) and the watch made again, answered again.
        await until(lambda: len(watches(fake)) >= 2, within=5.0)
        await until(lambda: informer.last_contact_monotonic > listed_at + 1.0)
    assert informer.last_event_monotonic == listed_at  # no line since the list


@pytest.mark.asyncio
@pytest.mark.parametrize("end", ["close", "drop"])
async def test_truncated_stream_rewatches_from_last_rv(
    fake: FakeApiServer, client: KubeClient, end: str
) -> None:
    fake.script(LIST, page([], rv=10))
    cut = event("ADDED", obj("b", 12))[:25]
    fake.script(WATCH, stream(event("ADDED", obj("a", 11)), cut, end=end))
    fake.fallback(WATCH, HANG)
    rec = Recorder()
    informer = make(client, rec, Pod)
    async with running(informer):
        await until(lambda: len(watches(fake)) == 2)
    assert [q["resourceVersion"] for q in watches(fake)] == ["10", "11"]
    assert rec.summary() == [("SYNCED", "", ""), ("ADDED", "a", "11")]
    assert informer.stats.relists == 0
    assert informer.stats.decode_errors == 0


@pytest.mark.asyncio
async def test_garbage_line_skipped_then_relist(fake: FakeApiServer, client: KubeClient) -> None:
    fake.script(LIST, page([], rv=10), page([obj("a", 11), obj("lost", 12), obj("b", 13)], rv=13))
    lines = [
        event("ADDED", obj("a", 11)),
        b'{"type":"ADDED","object":{"metad\x00ata\n',
        event("ADDED", obj("b", 13)),
    ]
    fake.script(WATCH, stream(*lines))
    fake.fallback(WATCH, HANG)
    rec = Recorder()
    informer = make(client, rec, Pod, page_size=10)
    async with running(informer):
        await until(lambda: rec.count("SYNCED") == 2)
    # The stream survived the garbage line; the relist recovered the lost object.
    assert rec.summary() == [
        ("SYNCED", "", ""),
        ("ADDED", "a", "11"),
        ("ADDED", "b", "13"),
        ("ADDED", "lost", "12"),
        ("SYNCED", "", ""),
    ]
    assert informer.stats.decode_errors == 1
    assert informer.stats.relists == 1


@pytest.mark.asyncio
async def test_garbage_then_410_relists_once(fake: FakeApiServer, client: KubeClient) -> None:
    fake.script(LIST, page([], rv=10), page([], rv=20), page([], rv=30))
    fake.script(WATCH, stream(b"garbage\n", error_event(410)))
    fake.fallback(WATCH, HANG)
    informer = make(client, Recorder(), Pod)
    async with running(informer):
        await until(lambda: len(watches(fake)) == 2)
        await asyncio.sleep(0.1)
    assert len(lists(fake)) == 2
    assert watches(fake)[1]["resourceVersion"] == "20"


@pytest.mark.asyncio
async def test_object_not_fitting_projection_is_skipped(fake: FakeApiServer, client: KubeClient) -> None:
    bad = event("MODIFIED", {"metadata": {"name": "x", "namespace": "default", "resourceVersion": "12"}})
    fake.script(LIST, page([obj("j", 1, spec={"template": {}}), obj("nospec", 2)], rv=10))
    fake.script(WATCH, stream(bad, bookmark(14)))
    fake.fallback(WATCH, HANG)
    rec = Recorder()
    informer = make(client, rec, Job, page_size=10)  # Job needs .spec: "x" and "nospec" lack it
    async with running(informer):
        await until(lambda: len(watches(fake)) == 2)
    assert rec.summary() == [("ADDED", "j", "1"), ("SYNCED", "", "")]
    assert informer.stats.decode_errors == 2
    assert informer.stats.relists == 0  # a relist would not decode it either
    assert watches(fake)[1]["resourceVersion"] == "14"


@pytest.mark.asyncio
async def test_event_line_over_two_mib(fake: FakeApiServer, client: KubeClient) -> None:
    big = obj("big", 11)
    big["metadata"]["annotations"] = {"blob": "x" * (2 * 1024 * 1024 + 17)}
    fake.script(LIST, page([], rv=10))
    fake.script(WATCH, stream(event("ADDED", big), event("ADDED", obj("small", 12))))
    fake.fallback(WATCH, HANG)
    rec = Recorder()
    informer = make(client, rec, Pod)
    async with running(informer):
        await until(lambda: rec.count("ADDED") == 2)
    received = rec.events[1].obj
    assert received is not None
    assert len(received.metadata.annotations["blob"]) == 2 * 1024 * 1024 + 17


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
    async with running(informer):
        await until(lambda: len(watches(fake)) == 6)
    times = [r.at for r in fake.recorded("GET", watch=True)]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # 0.04-0.05, 0.08-0.1, 0.16-0.2, then after the bookmark the series starts over (without
    # the reset the next gaps would be 0.32 s and more; the bound leaves room for a busy machine).
    assert gaps[2] > 0.15
    assert gaps[3] < 0.25
    assert gaps[4] < 0.25


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
    async with running(informer):
        await until(lambda: len(watches(fake)) == 5)
    times = [r.at for r in fake.recorded("GET", watch=True)]
    assert max(b - a for a, b in itertools.pairwise(times)) < 0.25  # no growing backoff


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
