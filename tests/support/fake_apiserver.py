"""A scripted, fault-injecting Kubernetes API server on 127.0.0.1 for the watch-layer tests.

Responses are queued per route: ``("LIST", path)``, ``("WATCH", path)`` (a GET
with ``watch=1``) or ``(METHOD, path)``. Each request takes the next
responder of its route; when the queue is empty the route's ``fallback`` is
used, else the answer is a 500 saying the request was not scripted. Every
request is recorded with its time, so tests can assert on parameters and
rates.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from collections.abc import Awaitable
from collections.abc import Callable
from collections.abc import Iterable
from dataclasses import dataclass
from dataclasses import field
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

Responder = Callable[[web.Request], Awaitable[web.StreamResponse]]
Route = tuple[str, str]


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    body: bytes
    headers: dict[str, str]
    at: float = field(default_factory=time.monotonic)

    @property
    def is_watch(self) -> bool:
        return self.query.get("watch") in ("1", "true")


def obj(name: str, rv: str | int, namespace: str = "default", **extra: Any) -> dict[str, Any]:
    """A minimal object: metadata plus whatever else is given."""
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}", "resourceVersion": str(rv)}
    if namespace:
        meta["namespace"] = namespace
    return {"metadata": meta, **extra}


def event(kind: str, item: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": item}).encode() + b"\n"


def bookmark(rv: str | int) -> bytes:
    return event("BOOKMARK", {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": str(rv)}})


def error_event(code: int, reason: str = "Expired", message: str = "too old resource version") -> bytes:
    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code}
    return event("ERROR", {**status, "reason": reason, "message": message})


def status_body(code: int, reason: str, message: str, **details: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code}
    body.update(reason=reason, message=message)
    if details:
        body["details"] = details
    return body


# --- responders -------------------------------------------------------------------------------


def json_reply(status: int, body: Any, headers: dict[str, str] | None = None) -> Responder:
    async def respond(request: web.Request) -> web.StreamResponse:
        return web.json_response(body, status=status, headers=headers)

    return respond


def status_reply(
    code: int, reason: str = "", message: str = "", *, retry_after: str | None = None
) -> Responder:
    headers = {"Retry-After": retry_after} if retry_after is not None else None
    return json_reply(code, status_body(code, reason, message), headers)


def raw_reply(status: int, body: bytes, content_type: str = "text/plain") -> Responder:
    async def respond(request: web.Request) -> web.StreamResponse:
        return web.Response(status=status, body=body, content_type=content_type)

    return respond


def page(items: Iterable[dict[str, Any]], rv: str | int, cont: str = "") -> Responder:
    """One page of a list."""
    metadata: dict[str, str] = {"resourceVersion": str(rv)}
    if cont:
        metadata["continue"] = cont
    return json_reply(200, {"kind": "List", "apiVersion": "v1", "metadata": metadata, "items": list(items)})


def drop_connection() -> Responder:
    """Close the socket without any answer."""

    async def respond(request: web.Request) -> web.StreamResponse:
        assert request.transport is not None
        request.transport.close()
        raise ConnectionResetError("dropped by the test server")

    return respond


@dataclass(frozen=True)
class Pause:
    seconds: float


def stream(*parts: bytes | Pause, end: str = "close", chunk: int | None = None) -> Responder:
    """A 200 watch stream sending ``parts`` in order.

    ``end``: ``"close"`` finishes the body cleanly, ``"drop"`` closes the
    socket mid-body (the client sees a broken chunked body), ``"hang"`` keeps
    the stream open, silent, until the client goes away or the server stops.
    ``chunk`` splits every part into writes of that many bytes.
    """

    async def respond(request: web.Request) -> web.StreamResponse:
        server = request.app[FAKE_KEY]
        server.open_streams += 1
        try:
            return await _stream_body(request, server)
        finally:
            server.open_streams -= 1

    async def _stream_body(request: web.Request, server: FakeApiServer) -> web.StreamResponse:
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        for part in parts:
            if isinstance(part, Pause):
                await asyncio.sleep(part.seconds)
                continue
            step = chunk or max(1, len(part))
            for i in range(0, len(part), step):
                await resp.write(part[i : i + step])
        if end == "drop":
            assert request.transport is not None
            request.transport.close()
            raise ConnectionResetError("dropped by the test server")
        if end == "hang":
            while (  # noqa: ASYNC110 (polls the client's socket too)
                not server.stopping and request.transport is not None and not request.transport.is_closing()
            ):
                await asyncio.sleep(0.01)
            return resp
        await resp.write_eof()
        return resp

    return respond


# --- the server -------------------------------------------------------------------------------


class FakeApiServer:
    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.stopping = False
        self.open_streams = 0  # stream() responses still being served
        self._queues: dict[Route, deque[Responder]] = {}
        self._fallbacks: dict[Route, Responder] = {}
        app = web.Application()
        app[FAKE_KEY] = self
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._server = TestServer(app, host="127.0.0.1")

    async def start(self) -> None:
        await self._server.start_server()

    async def close(self) -> None:
        self.stopping = True
        await self._server.close()

    @property
    def url(self) -> str:
        return str(self._server.make_url("")).rstrip("/")

    def script(self, route: Route, *responders: Responder) -> None:
        self._queues.setdefault(route, deque()).extend(responders)

    def fallback(self, route: Route, responder: Responder) -> None:
        self._fallbacks[route] = responder

    def pending(self, route: Route) -> int:
        return len(self._queues.get(route, ()))

    def recorded(self, method: str | None = None, *, watch: bool | None = None) -> list[Recorded]:
        return [
            r
            for r in self.requests
            if (method is None or r.method == method) and (watch is None or r.is_watch == watch)
        ]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        record = Recorded(request.method, request.path, dict(request.query), body, dict(request.headers))
        self.requests.append(record)
        if request.method == "GET":
            route: Route = ("WATCH" if record.is_watch else "LIST", request.path)
        else:
            route = (request.method, request.path)
        queue = self._queues.get(route)
        if queue:
            return await queue.popleft()(request)
        if route in self._fallbacks:
            return await self._fallbacks[route](request)
        return web.json_response(status_body(500, "InternalError", f"unscripted {route}"), status=500)


FAKE_KEY = web.AppKey("fake", FakeApiServer)
