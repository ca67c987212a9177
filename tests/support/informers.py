"""Running an Informer against the fake API server: a recording sink, a fast-backoff factory, waits."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from collections.abc import Callable
from typing import Any
from typing import TypeVar

from reconciler.api.resources import PODS
from reconciler.kube import Backoff
from reconciler.kube import HasMetadata
from reconciler.kube import Informer
from reconciler.kube import KubeClient
from reconciler.kube import WatchEvent

from tests.support.fake_apiserver import FakeApiServer
from tests.support.fake_apiserver import stream

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
