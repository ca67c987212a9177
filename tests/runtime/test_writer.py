"""The writer: bounded concurrency, one write per slot, newest wins, clean drain."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from reconciler.api.resources import EVENTS, WORKLOADS
from reconciler.kube import Conflict, KubeClient, ServerError
from reconciler.runtime.shared.actions import MergePatch, PostEvent
from reconciler.runtime.shared.conflicts import Conflicts
from reconciler.runtime.shared.writer import WriteDone, Writer


class FakeClient:
    def __init__(self) -> None:
        self.calls: list[bytes] = []
        self.release = asyncio.Event()
        self.concurrent = 0
        self.peak = 0
        self.fail: set[bytes] = set()

    async def merge_patch(self, resource: Any, namespace: Any, name: str, patch: bytes, **_: Any) -> bytes:
        self.calls.append(patch)
        self.concurrent += 1
        self.peak = max(self.peak, self.concurrent)
        try:
            await self.release.wait()
        finally:
            self.concurrent -= 1
        if patch in self.fail:
            raise ServerError(500, "InternalError", "boom")
        return patch


async def landed(results: list[WriteDone], count: int) -> None:
    """Until `count` outcomes have come back (or a second has passed)."""
    for _ in range(100):
        if len(results) == count:
            return
        await asyncio.sleep(0.01)


def patch(name: str, body: bytes) -> MergePatch:
    return MergePatch("workload-status", WORKLOADS, "ns", name, body, subresource="status")


@pytest.mark.asyncio
async def test_one_write_per_slot_and_the_newest_waiting_one_wins() -> None:
    client = FakeClient()
    results: list[WriteDone] = []
    writer = Writer(cast(KubeClient, client), results.append, concurrency=8)
    writer.submit(patch("a", b"1"))
    writer.submit(patch("a", b"2"))
    writer.submit(patch("a", b"3"))  # replaces 2, which never runs
    writer.submit(patch("b", b"x"))
    await asyncio.sleep(0.01)
    assert client.calls == [b"1", b"x"]
    client.release.set()
    for _ in range(50):
        if len([r for r in results if not r.superseded]) == 3:
            break
        await asyncio.sleep(0.01)
    assert client.calls == [b"1", b"x", b"3"]
    superseded = [r.action for r in results if r.superseded]
    assert [cast(MergePatch, a).patch for a in superseded] == [b"2"]
    assert all(r.ok for r in results if not r.superseded)


@pytest.mark.asyncio
async def test_concurrency_is_bounded_and_errors_come_back() -> None:
    client = FakeClient()
    client.fail.add(b"bad")
    results: list[WriteDone] = []
    writer = Writer(cast(KubeClient, client), results.append, concurrency=3)
    for i in range(10):
        writer.submit(patch(f"w{i}", b"bad" if i == 0 else b"ok"))
    await asyncio.sleep(0.02)
    assert client.peak == 3
    client.release.set()
    await landed(results, 10)
    errors = [r for r in results if r.error is not None]
    assert len(errors) == 1
    assert isinstance(errors[0].error, ServerError)
    assert await writer.drain(1.0)


@pytest.mark.asyncio
async def test_drain_abandons_hung_writes_after_the_grace() -> None:
    client = FakeClient()  # never released: every write hangs
    results: list[WriteDone] = []
    writer = Writer(cast(KubeClient, client), results.append, concurrency=2)
    writer.submit(patch("a", b"1"))
    writer.submit(patch("a", b"2"))
    await asyncio.sleep(0.01)
    assert not await writer.drain(0.05)
    assert writer.in_flight() == 0
    assert [r.superseded for r in results] == [True]  # the queued one is reported, not lost
    writer.submit(patch("b", b"late"))
    assert results[-1].superseded


@pytest.mark.asyncio
async def test_nothing_is_sent_while_may_write_says_no() -> None:
    """A leader that may have lost its Lease (paused past the renew deadline) sends no write."""
    client = FakeClient()
    client.release.set()
    results: list[WriteDone] = []
    allowed = False
    writer = Writer(cast(KubeClient, client), results.append, concurrency=1, may_write=lambda: allowed)
    writer.submit(patch("a", b"finish-a"))
    writer.submit(patch("b", b"admit-b"))
    await landed(results, 2)
    assert client.calls == []
    assert [r.superseded for r in results] == [True, True]
    assert writer.fenced == 2
    allowed = True
    writer.submit(patch("c", b"admit-c"))  # the gate's place was given back: this one goes
    await landed(results, 3)
    assert client.calls == [b"admit-c"]
    assert results[-1].ok


class FakeEventClient(FakeClient):
    async def create(self, resource: Any, namespace: Any, body: bytes) -> bytes:
        return await self.merge_patch(resource, namespace, "", body)


@pytest.mark.asyncio
async def test_a_waiting_write_goes_before_a_waiting_event() -> None:
    client = FakeEventClient()
    results: list[WriteDone] = []
    writer = Writer(cast(KubeClient, client), results.append, concurrency=1)
    writer.submit(patch("a", b"admit-a"))  # takes the only write in flight
    await asyncio.sleep(0.01)
    writer.submit(PostEvent("event", EVENTS, "ns", b"event-a"))
    writer.submit(PostEvent("event", EVENTS, "ns", b"event-b"))
    writer.submit(patch("b", b"admit-b"))
    await asyncio.sleep(0.01)
    client.release.set()
    await landed(results, 4)
    assert client.calls == [b"admit-a", b"admit-b", b"event-a", b"event-b"]
    assert client.peak == 1


def admit(name: str, body: bytes) -> MergePatch:
    return MergePatch("admit", WORKLOADS, "ns", name, body, subresource="status", slot_name="workload-status")


def verdict(name: str, body: bytes) -> MergePatch:
    return MergePatch(
        "workload-status", WORKLOADS, "ns", name, body, subresource="status", slot_name="workload-status"
    )


@pytest.mark.asyncio
async def test_an_admission_replaces_its_pending_verdict_waiting_and_goes_before_the_others() -> None:
    """Thousands of pending verdicts waiting for a place in flight (a restart): an admission is
    not queued behind them, nor behind its own Workload's verdict, which it replaces unsent."""
    client = FakeEventClient()
    results: list[WriteDone] = []
    writer = Writer(cast(KubeClient, client), results.append, concurrency=1)
    writer.submit(patch("busy", b"first"))  # takes the only write in flight
    await asyncio.sleep(0.01)
    for name in ("a", "b", "c"):
        writer.submit(verdict(name, f"pending-{name}".encode()))
    writer.submit(PostEvent("event", EVENTS, "ns", b"event"))
    await asyncio.sleep(0.01)
    writer.submit(admit("c", b"admit-c"))
    await asyncio.sleep(0.01)
    client.release.set()
    await landed(results, 6)
    assert client.calls == [b"first", b"admit-c", b"pending-a", b"pending-b", b"event"]
    withdrawn = [cast(MergePatch, r.action).patch for r in results if r.superseded]
    assert withdrawn == [b"pending-c"]
    assert client.peak == 1


@pytest.mark.asyncio
async def test_a_write_of_the_same_rank_waits_behind_the_one_in_its_slot() -> None:
    client = FakeClient()
    results: list[WriteDone] = []
    writer = Writer(cast(KubeClient, client), results.append, concurrency=1)
    writer.submit(patch("busy", b"first"))
    await asyncio.sleep(0.01)
    writer.submit(verdict("a", b"v1"))
    writer.submit(verdict("b", b"w1"))
    await asyncio.sleep(0.01)
    writer.submit(verdict("a", b"v2"))  # queued behind v1 (same rank): v1 keeps its place
    client.release.set()
    await landed(results, 4)
    assert client.calls == [b"first", b"v1", b"w1", b"v2"]
    assert not any(r.superseded for r in results)


class ConflictingClient:
    """Answers 409 to every patch until `settle` is set (a cache that is behind)."""

    def __init__(self) -> None:
        self.calls = 0
        self.settle = False

    async def merge_patch(self, resource: Any, namespace: Any, name: str, patch: bytes, **_: Any) -> bytes:
        self.calls += 1
        if not self.settle:
            raise Conflict(409, "Conflict", "the object has been modified")
        return patch


@pytest.mark.asyncio
async def test_a_patch_that_keeps_meeting_409_is_paced_not_spun() -> None:
    # The reconciler decides again on each 409 and, its cache unchanged, sends the same patch:
    # the writer paces those (doubling pauses), where it used to send them back to back.
    client = ConflictingClient()
    writer: Writer

    def again(done: WriteDone) -> None:
        if isinstance(done.error, Conflict):
            writer.submit(done.action)

    writer = Writer(cast(KubeClient, client), again)
    writer.submit(patch("a", b"1"))
    await asyncio.sleep(0.7)
    assert 3 <= client.calls <= 7  # 0.02 + 0.04 + ... s of pauses; unpaced: thousands
    client.settle = True
    await asyncio.sleep(1.1)
    paced = client.calls
    writer.submit(patch("a", b"2"))  # a success settled the object: no pause now
    await asyncio.sleep(0.01)
    assert client.calls == paced + 1
    await writer.drain(1.0)


@pytest.mark.asyncio
async def test_conflicts_that_last_ask_once_for_the_collection_to_be_relisted() -> None:
    now = [0.0]
    client = ConflictingClient()
    behind: list[str] = []
    writer = Writer(cast(KubeClient, client), lambda done: None, conflicts=Conflicts(lambda: now[0]))
    writer.on_behind = lambda resource: behind.append(resource.plural)
    for second in (0.0, 2.0, 4.0, 5.5, 7.0):
        now[0] = second
        writer.submit(patch("a", b"1"))
        await writer_idle(writer)
    assert behind == ["workloads"]  # once per streak, from BEHIND_AFTER seconds on
    client.settle = True
    writer.submit(patch("a", b"1"))
    await writer_idle(writer)
    client.settle = False
    for second in (8.0, 14.0):
        now[0] = second
        writer.submit(patch("a", b"1"))
        await writer_idle(writer)
    assert behind == ["workloads", "workloads"]  # a new streak, after a success
    await writer.drain(1.0)


async def writer_idle(writer: Writer) -> None:
    for _ in range(300):
        if writer.in_flight() == 0:
            return
        await asyncio.sleep(0.01)
