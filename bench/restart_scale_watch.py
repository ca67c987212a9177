"""What bench/restart_scale.py watches while the controller restarts: its JSON log (when a given
line was written, by the line's own timestamp) and the Workloads (when each pending one is first
seen with QuotaReserved=True)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp

from bench.restart_scale_objects import KUEUE
from e2e.testbed import KubeClient, api_path
from e2e.testbed.kubeclient import Obj


def log_epoch(stamp: str) -> float:
    """An ISO timestamp of structlog's TimeStamper (UTC, ``Z`` or ``+00:00``) as time.time()."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


@dataclass
class LogTail:
    """Reads a JSON-lines log as it grows; remembers the first line and the lines asked for."""

    path: Path
    offset: int = 0
    rest: bytes = b""
    first: dict[str, Any] | None = None

    def read(self) -> list[dict[str, Any]]:
        """The complete lines written since the last read, decoded (lines that are not JSON are skipped)."""
        if not self.path.exists():
            return []
        with self.path.open("rb") as f:
            f.seek(self.offset)
            chunk = f.read()
        self.offset += len(chunk)
        *lines, self.rest = (self.rest + chunk).split(b"\n")
        out: list[dict[str, Any]] = []
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict):
                out.append(entry)
        if out and self.first is None:
            self.first = out[0]
        return out

    async def wait_for(self, event: str, within: float) -> dict[str, Any]:
        """The first line whose ``event`` is ``event``; polls every 0.1 s."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            for entry in await asyncio.to_thread(self.read):
                if entry.get("event") == event:
                    return entry
            await asyncio.sleep(0.1)
        raise TimeoutError(f"{self.path.name}: no {event!r} after {within:.0f}s")


def quota_reserved(obj: Obj) -> bool:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == "QuotaReserved":
            return bool(c.get("status") == "True")
    return False


@dataclass
class AdmissionWatch:
    """A Workload watch over all namespaces: when each of ``pending`` is first seen QuotaReserved."""

    pending: set[tuple[str, str]]
    admitted_at: dict[tuple[str, str], float] = field(default_factory=dict)
    events: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self, kube: KubeClient) -> None:
        path = api_path(KUEUE, "workloads")
        version = str((await kube.get(path, {"limit": "1"}))["metadata"]["resourceVersion"])
        while True:
            try:
                async for event in kube.watch(path, {"resourceVersion": version}, timeout_seconds=120):
                    obj: Obj = event["object"]
                    if event["type"] == "ERROR":
                        raise RuntimeError(f"workload watch failed: {obj.get('message')}")
                    version = str(obj["metadata"]["resourceVersion"])
                    if event["type"] != "MODIFIED":
                        continue
                    self.events += 1
                    key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
                    if key in self.pending and key not in self.admitted_at and quota_reserved(obj):
                        self.admitted_at[key] = time.time()
                        self.changed.set()
            except (OSError, TimeoutError, aiohttp.ClientError):
                await asyncio.sleep(0.2)  # the connection broke: watch again from the last version

    async def wait_count(self, count: int, within: float) -> bool:
        """Until ``count`` of the pending Workloads are admitted; False if ``within`` s pass first."""
        deadline = time.monotonic() + within
        while len(self.admitted_at) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), timeout=min(remaining, 1.0))
        return True


@contextlib.asynccontextmanager
async def watching(kube: KubeClient, pending: set[tuple[str, str]]) -> AsyncIterator[AdmissionWatch]:
    watch = AdmissionWatch(pending)
    task = asyncio.get_running_loop().create_task(watch.run(kube), name="admission-watch")
    try:
        await asyncio.sleep(0.5)  # the watch is open
        if task.done():
            task.result()
        yield watch
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
