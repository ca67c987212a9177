"""The process's ``/metrics`` server: HTTPS behind delegated authentication and authorization.

With a TLS context the server checks every request's bearer token with a
TokenReview and its access with a SubjectAccessReview, through a client of
its own (it runs on every replica, leader or not, from start to exit). Without
one it serves plain HTTP, which ``start_metrics_server`` allows on a loopback
address only. A certificate from files is followed by a task the endpoint owns
(cancelled by ``close``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from reconciler.kube.client import KubeClient
from reconciler.kube.reviews import ApiReviewer
from reconciler.observability.access import AccessGuard
from reconciler.observability.metrics import Metrics
from reconciler.observability.server import Server, parse_bind_address, start_metrics_server
from reconciler.observability.tls import ServingCertificate

__all__ = ["MetricsEndpoint", "serve_metrics"]


@dataclass
class MetricsEndpoint:
    server: Server | None  # None: disabled (address 0); the caller closes it
    client: KubeClient | None  # the reviews' client; None when served plain
    following: asyncio.Task[None] | None = None  # reloads a certificate from files

    async def close(self) -> None:
        """Stop following the certificate and close the client (not the server)."""
        if self.following is not None:
            self.following.cancel()
            await asyncio.gather(self.following, return_exceptions=True)
        if self.client is not None:
            await self.client.close()


async def serve_metrics(
    metrics: Metrics,
    address: str,
    tls: ServingCertificate | None,
    make_client: Callable[[], Awaitable[KubeClient]],
) -> MetricsEndpoint:
    if tls is None or parse_bind_address(address) is None:
        return MetricsEndpoint(await start_metrics_server(metrics, address, None, None), None)
    client = await make_client()
    try:
        guard = AccessGuard(ApiReviewer(client))
        server = await start_metrics_server(metrics, address, tls.context, guard)
    except BaseException:
        await client.close()
        raise
    following = asyncio.get_running_loop().create_task(tls.follow(), name="metrics-certificate")
    return MetricsEndpoint(server, client, following)
