"""The HTTP endpoints: ``/metrics`` on one port, ``/healthz`` and ``/readyz`` on another.

Both are small aiohttp applications run by an ``AppRunner`` on the
controller's event loop (no threads). Handlers read in-memory state only and
answer at once. A bind address is ``HOST:PORT``; ``:PORT`` listens on all
interfaces and ``0`` disables the server.

``/metrics`` is served over HTTPS behind an :class:`~.access.AccessGuard`
(bearer token, TokenReview, SubjectAccessReview) unless it is served plain for
development, which only a loopback address may do. The probes stay plain HTTP
on their own port: the kubelet's probes send no token.
"""

from __future__ import annotations

import ipaddress
import ssl
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from prometheus_client.aiohttp import make_aiohttp_handler

from .access import AccessGuard
from .health import Health, Verdict
from .metrics import Metrics

__all__ = [
    "METRICS_PATH",
    "ROLE_HEADER",
    "Server",
    "health_app",
    "is_loopback",
    "metrics_app",
    "parse_bind_address",
    "start_metrics_server",
    "start_server",
]

ROLE_HEADER = "X-Replica-Role"
METRICS_PATH = "/metrics"


def parse_bind_address(address: str) -> tuple[str | None, int] | None:
    """``HOST:PORT`` → (host, port); ``:PORT`` → (None: every interface, port); ``0`` → None."""
    address = address.strip()
    if address == "0":
        return None
    host, sep, port_text = address.rpartition(":")
    if not sep or not port_text.isdigit() or int(port_text) > 65535:
        raise ValueError(f"bind address {address!r} is not HOST:PORT, :PORT or 0")
    host = host.strip("[]")  # [::1]:8080
    return (host or None, int(port_text))


def is_loopback(host: str | None) -> bool:
    """``localhost`` or a loopback IP address; None (every interface) is not."""
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def metrics_app(metrics: Metrics, guard: AccessGuard[Any] | None = None) -> web.Application:
    """``/metrics``; every request first passes ``guard`` when there is one."""
    app = web.Application(middlewares=[guard.middleware] if guard is not None else [])
    app.router.add_get(METRICS_PATH, make_aiohttp_handler(metrics.registry))
    return app


def _answer(verdict: Verdict) -> web.Response:
    return web.Response(status=verdict.status, text=verdict.body + "\n", headers={ROLE_HEADER: verdict.role})


def health_app(health: Health) -> web.Application:
    async def healthz(request: web.Request) -> web.Response:
        return _answer(health.liveness())

    async def readyz(request: web.Request) -> web.Response:
        return _answer(health.readiness())

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


@dataclass
class Server:
    runner: web.AppRunner
    port: int  # the bound port (useful with :0)

    async def close(self) -> None:
        await self.runner.cleanup()


async def start_metrics_server(
    metrics: Metrics, address: str, tls: ssl.SSLContext | None, guard: AccessGuard[Any] | None
) -> Server | None:
    """``/metrics`` over HTTPS behind ``guard``; plain (``tls`` and ``guard`` None) on loopback only."""
    if (tls is None) != (guard is None):
        raise ValueError("the metrics server takes TLS and an access guard together, or neither")
    bind = parse_bind_address(address)
    if bind is None:
        return None
    if tls is None and not is_loopback(bind[0]):
        raise ValueError(
            f"metrics over plain HTTP only on a loopback address, not {address!r}: "
            "bind 127.0.0.1:PORT or serve them securely"
        )
    return await start_server(metrics_app(metrics, guard), address, ssl_context=tls)


async def start_server(
    app: web.Application, address: str, *, ssl_context: ssl.SSLContext | None = None
) -> Server | None:
    """Listen on ``address`` (see :func:`parse_bind_address`); None when it is ``0``."""
    bind = parse_bind_address(address)
    if bind is None:
        return None
    host, port = bind
    runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True, ssl_context=ssl_context)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    addresses = runner.addresses
    return Server(runner, int(addresses[0][1]) if addresses else port)
