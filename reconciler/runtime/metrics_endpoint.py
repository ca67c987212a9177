"""The process's ``/metrics`` server: HTTPS behind delegated authentication and authorization.

With a TLS context the server checks every request's bearer token with a
TokenReview and its access with a SubjectAccessReview, through a client of
its own (it runs on every replica, leader or not, from start to exit). Without
one it serves plain HTTP, which ``start_metrics_server`` allows on a loopback
address only.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from reconciler.kube.client import KubeClient
from reconciler.kube.reviews import ApiReviewer
from reconciler.observability.access import AccessGuard
from reconciler.observability.metrics import Metrics
from reconciler.observability.server import Server, parse_bind_address, start_metrics_server

__all__ = ["MetricsEndpoint", "serve_metrics"]


@dataclass
class MetricsEndpoint:
    server: Server | None  # None: disabled (address 0)
    client: KubeClient | None  # the reviews' client (the caller closes it); None when served plain


async def serve_metrics(
    metrics: Metrics,
    address: str,
    tls: ssl.SSLContext | None,
    make_client: Callable[[], Awaitable[KubeClient]],
) -> MetricsEndpoint:
    if tls is None or parse_bind_address(address) is None:
        return MetricsEndpoint(await start_metrics_server(metrics, address, None, None), None)
    client = await make_client()
    try:
        server = await start_metrics_server(metrics, address, tls, AccessGuard(ApiReviewer(client)))
    except BaseException:
        await client.close()
        raise
    return MetricsEndpoint(server, client)
