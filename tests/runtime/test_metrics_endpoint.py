"""The process's metrics endpoint: with TLS it reviews tokens through a client of its own."""

from __future__ import annotations

import datetime as dt

import aiohttp
import pytest

from reconciler.api.resources import SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS
from reconciler.kube import KubeClient
from reconciler.observability.metrics import Metrics
from reconciler.observability.tls import ServingCertificate, context_from_pem
from reconciler.runtime.loop.metrics_endpoint import serve_metrics
from reconciler.webhook.certs import new_bundle
from tests.support.fake_apiserver import FakeApiServer, json_reply


@pytest.mark.asyncio
async def test_secure_endpoint_reviews_through_its_own_client() -> None:
    fake = FakeApiServer()
    fake.fallback(
        ("POST", TOKEN_REVIEWS.list_path()),
        json_reply(201, {"status": {"authenticated": True, "user": {"username": "scraper"}}}),
    )
    fake.fallback(
        ("POST", SUBJECT_ACCESS_REVIEWS.list_path()), json_reply(201, {"status": {"allowed": True}})
    )
    await fake.start()
    made: list[KubeClient] = []

    async def make_client() -> KubeClient:
        made.append(KubeClient(fake.url, token="controller"))
        return made[-1]

    bundle = new_bundle(["127.0.0.1"], dt.datetime.now(dt.UTC))
    tls = ServingCertificate(context_from_pem(bundle.serving.cert_pem, bundle.serving.key_pem))
    endpoint = await serve_metrics(Metrics("standalone"), "127.0.0.1:0", tls, make_client)
    try:
        assert endpoint.server is not None
        assert endpoint.client is made[0]
        url = f"https://127.0.0.1:{endpoint.server.port}/metrics"
        async with aiohttp.ClientSession() as session:
            async with session.get(url, ssl=False) as resp:
                assert resp.status == 401
            async with session.get(url, ssl=False, headers={"Authorization": "Bearer t"}) as resp:
                assert resp.status == 200
        assert [r.path for r in fake.requests] == [
            TOKEN_REVIEWS.list_path(),
            SUBJECT_ACCESS_REVIEWS.list_path(),
        ]
    finally:
        if endpoint.server is not None:
            await endpoint.server.close()
        await endpoint.close()
        assert endpoint.following is not None
        assert endpoint.following.done()
        for client in made:
            await client.close()
        await fake.close()


@pytest.mark.asyncio
async def test_plain_or_disabled_endpoints_make_no_client() -> None:
    async def no_client() -> KubeClient:
        raise AssertionError("no client is needed")

    metrics = Metrics("standalone")
    disabled = await serve_metrics(metrics, "0", None, no_client)
    assert (disabled.server, disabled.client) == (None, None)
    plain = await serve_metrics(metrics, "127.0.0.1:0", None, no_client)
    assert plain.server is not None
    assert plain.client is None
    await plain.server.close()
    with pytest.raises(ValueError, match="only on a loopback address"):
        await serve_metrics(metrics, ":0", None, no_client)
