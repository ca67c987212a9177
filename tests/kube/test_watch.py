"""The informer against the fault-injecting fake API server: listing, watching, relisting, bad lines.

Every test runs an Informer in a task, scripts what the server answers, waits
for an observable outcome and cancels the task. Timeouts and backoffs are
scaled down so that each test takes well under two seconds.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from reconciler.api import Job, Pod
from reconciler.api.resources import PODS
from reconciler.kube import Backoff, KubeClient
from tests.support.fake_apiserver import (
    FakeApiServer,
    bookmark,
    error_event,
    event,
    obj,
    page,
    status_reply,
    stream,
)
from tests.support.informers import HANG, LIST, WATCH, Recorder, lists, make, running, until, watches


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
