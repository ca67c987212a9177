"""The test-bed's Informer against a scripted API server: resume after a stream
ends, relist after 410 Gone, deletions seen through the relist."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl

import pytest
from aiohttp import web

from e2e.testbed.informer import Informer
from e2e.testbed.kubeclient import KubeClient, Obj
from e2e.testbed.ports import free_ports


def _pod(name: str, rv: int) -> Obj:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv)}}


class ScriptedApi:
    def __init__(self) -> None:
        self.lists = 0
        self.watch_versions: list[str] = []
        self.release = asyncio.Event()
        self.third_watch = asyncio.Event()

    async def pods(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            self.lists += 1
            if self.lists == 1:
                return web.json_response(
                    {"metadata": {"resourceVersion": "10"}, "items": [_pod("a", 5), _pod("b", 6)]}
                )
            return web.json_response(
                {"metadata": {"resourceVersion": "13"}, "items": [_pod("a", 11), _pod("c", 12)]}
            )
        self.watch_versions.append(request.query["resourceVersion"])
        resp = web.StreamResponse()
        await resp.prepare(request)
        events: list[Obj]
        if len(self.watch_versions) == 1:
            events = [
                {"type": "MODIFIED", "object": _pod("a", 11)},
                {"type": "ADDED", "object": _pod("c", 12)},
            ]
        elif len(self.watch_versions) == 2:
            events = [{"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}]
        else:
            events = [{"type": "BOOKMARK", "object": _pod("", 14)}]
        for event in events:
            await resp.write(json.dumps(event).encode() + b"\n")
        if len(self.watch_versions) >= 3:
            self.third_watch.set()
            await self.release.wait()
        return resp


@pytest.mark.asyncio
async def test_informer_resumes_and_relists() -> None:
    api = ScriptedApi()
    app = web.Application()
    app.router.add_get("/api/v1/pods", api.pods)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_ports(1)[0]
    await web.TCPSite(runner, "127.0.0.1", port).start()
    seen: list[tuple[str, str]] = []

    async def handler(kind: str, obj: Obj) -> None:
        seen.append((kind, obj["metadata"]["name"]))

    try:
        async with KubeClient(f"http://127.0.0.1:{port}", ssl.create_default_context()) as kube:
            informer = Informer(kube, "/api/v1/pods", handler, name="pods")
            task = asyncio.create_task(informer.run())
            try:
                async with asyncio.timeout(10):
                    await api.third_watch.wait()
            finally:
                api.release.set()
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    finally:
        await runner.cleanup()

    assert api.watch_versions == ["10", "12", "13"]  # resumed from 12, relisted at 13
    assert seen == [("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "a"), ("ADDED", "c"), ("DELETED", "b")]
    assert sorted(informer.cache) == ["ns/a", "ns/c"]
