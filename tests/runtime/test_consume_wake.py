"""The consuming loop runs a batch when parked workloads are due to be tried again, without
waiting for another item or the status tick, and drops the pending wake when it stops."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from reconciler.runtime.loop.controller import _consume
from reconciler.runtime.loop.reconciler import Reconciler


class _Parked:
    """A reconciler whose first batch leaves a retry due 50 ms later."""

    def __init__(self) -> None:
        self.batches: list[float] = []
        self.retry_due: float | None = None

    def handle(self, item: object) -> None:
        pass

    def after_batch(self) -> None:
        now = asyncio.get_running_loop().time()
        self.batches.append(now)
        if len(self.batches) == 1:
            self.retry_due = now + 0.05
        elif self.retry_due is not None and now >= self.retry_due:
            self.retry_due = None

    def flush_status(self) -> None:
        pass


@contextlib.asynccontextmanager
async def consuming(parked: _Parked) -> AsyncIterator[asyncio.Queue[Any]]:
    """The consuming loop over `parked`, its first batch asked for; stopped on the way out."""
    inbox: asyncio.Queue[Any] = asyncio.Queue()
    inbox.put_nowait("first")
    consumer = asyncio.create_task(_consume(inbox, cast(Reconciler, parked), max_batch=8))
    try:
        yield inbox
    finally:
        consumer.cancel()
        await asyncio.gather(consumer, return_exceptions=True)


@pytest.mark.asyncio
async def test_a_batch_runs_when_the_retry_is_due() -> None:
    parked = _Parked()
    async with consuming(parked):
        for _ in range(100):
            await asyncio.sleep(0.01)
            if len(parked.batches) >= 2:
                break
    assert len(parked.batches) == 2, parked.batches
    assert 0.05 <= parked.batches[1] - parked.batches[0] < 0.5


@pytest.mark.asyncio
async def test_the_pending_wake_is_cancelled_when_the_loop_stops() -> None:
    async with consuming(_Parked()) as inbox:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.1)
    assert inbox.empty()  # no wake was delivered after the stop
