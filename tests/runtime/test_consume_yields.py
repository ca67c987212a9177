"""The controller's consuming loop lets other tasks run between batches.

`asyncio.Queue.get()` returns at once while items wait, so a loop whose batches put items back
(a superseded write's answer is delivered at once) would never give the writer's and the watches'
tasks a turn: seen as a controller at a full core writing nothing on Kueue's baseline shape.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from reconciler.runtime.loop.controller import _consume
from reconciler.runtime.loop.reconciler import Reconciler

LIMIT = 1000


class _Echo:
    """A reconciler each of whose batches asks for another one at once (LIMIT times)."""

    def __init__(self, inbox: asyncio.Queue[Any]) -> None:
        self.inbox = inbox
        self.batches = 0
        self.retry_due: float | None = None

    def handle(self, item: object) -> None:
        pass

    def after_batch(self) -> None:
        self.batches += 1
        if self.batches < LIMIT:
            self.inbox.put_nowait("again")

    def flush_status(self) -> None:
        pass


@pytest.mark.asyncio
async def test_another_task_runs_while_batches_keep_coming() -> None:
    inbox: asyncio.Queue[Any] = asyncio.Queue()
    echo = _Echo(inbox)
    inbox.put_nowait("first")
    seen_at: list[int] = []

    async def other() -> None:
        seen_at.append(echo.batches)

    consumer = asyncio.create_task(_consume(inbox, cast(Reconciler, echo), max_batch=8))
    task = asyncio.create_task(other())
    try:
        await asyncio.wait_for(task, 5.0)
    finally:
        consumer.cancel()
        await asyncio.gather(consumer, return_exceptions=True)
    assert seen_at
    assert seen_at[0] < 10, f"the other task ran only after {seen_at} batches"
