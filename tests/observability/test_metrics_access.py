"""/metrics over HTTPS behind TokenReview and SubjectAccessReview, answered by the fake API server.

The reviews go through the real ``KubeClient`` to ``tests.support.fake_apiserver``,
which authenticates two tokens (``reader-token`` for a user bound to get on
/metrics, ``other-token`` for one who is not) and allows only the reader.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web
from reconciler.api.resources import SUBJECT_ACCESS_REVIEWS
from reconciler.api.resources import TOKEN_REVIEWS
from reconciler.kube import Backoff
from reconciler.kube import KubeClient
from reconciler.kube.reviews import ApiReviewer
from reconciler.kube.reviews import ReviewedUser
from reconciler.observability.access import AccessGuard
from reconciler.observability.access import CachePolicy
from reconciler.observability.access import TtlCache
from reconciler.observability.metrics import Metrics
from reconciler.observability.server import Server
from reconciler.observability.server import is_loopback
from reconciler.observability.server import start_metrics_server
from reconciler.observability.tls import CertificateFiles
from reconciler.observability.tls import context_from_pem
from reconciler.webhook.certs import new_bundle

from tests.support.fake_apiserver import FakeApiServer
from tests.support.fake_apiserver import Recorded
from tests.support.fake_apiserver import status_reply

TOKEN_REVIEW_PATH = TOKEN_REVIEWS.list_path()
ACCESS_REVIEW_PATH = SUBJECT_ACCESS_REVIEWS.list_path()
USERS: dict[str, dict[str, Any]] = {
    "reader-token": {
        "username": "system:serviceaccount:monitoring:prometheus",
        "uid": "uid-prometheus",
        "groups": ["system:serviceaccounts", "system:authenticated"],
        "extra": {"authentication.kubernetes.io/pod-name": ["prometheus-0"]},
    },
    "other-token": {"username": "system:serviceaccount:default:nobody", "groups": ["system:authenticated"]},
}
READER = USERS["reader-token"]["username"]


async def token_review(request: web.Request) -> web.StreamResponse:
    review = await request.json()
    user = USERS.get(review["spec"]["token"])
    status: dict[str, Any] = {"authenticated": True, "user": user} if user else {"error": "invalid token"}
    return web.json_response({**review, "status": status}, status=201)


async def access_review(request: web.Request) -> web.StreamResponse:
    review = await request.json()
    spec = review["spec"]
    allowed = spec["user"] == READER and spec["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}
    status = {"allowed": allowed, "reason": "bound to metrics-reader" if allowed else ""}
    return web.json_response({**review, "status": status}, status=201)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Bed:
    fake: FakeApiServer
    server: Server
    clock: Clock
    session: aiohttp.ClientSession

    async def get(self, token: str | None = None) -> tuple[int, str]:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        url = f"https://127.0.0.1:{self.server.port}/metrics"
        async with self.session.get(url, headers=headers, ssl=False) as resp:
            return resp.status, await resp.text()

    def reviews(self, path: str) -> list[Recorded]:
        return [r for r in self.fake.requests if r.method == "POST" and r.path == path]


def tls_context() -> ssl.SSLContext:
    bundle = new_bundle(["127.0.0.1"], dt.datetime.now(dt.UTC))
    return context_from_pem(bundle.serving.cert_pem, bundle.serving.key_pem)


@pytest_asyncio.fixture
async def bed() -> AsyncIterator[Bed]:
    fake = FakeApiServer()
    fake.fallback(("POST", TOKEN_REVIEW_PATH), token_review)
    fake.fallback(("POST", ACCESS_REVIEW_PATH), access_review)
    await fake.start()
    client = KubeClient(fake.url, token="controller-token", retry_backoff=Backoff(initial=0.01, maximum=0.02))
    clock = Clock()
    guard = AccessGuard(ApiReviewer(client, timeout=5.0), CachePolicy(max_entries=8), clock=clock)
    server = await start_metrics_server(Metrics("leader"), "127.0.0.1:0", tls_context(), guard)
    assert server is not None
    try:
        async with aiohttp.ClientSession() as session:
            yield Bed(fake, server, clock, session)
    finally:
        await server.close()
        await client.close()
        await fake.close()


@pytest.mark.asyncio
async def test_no_token_is_401_without_asking_the_api_server(bed: Bed) -> None:
    status, text = await bed.get()
    assert status == 401
    assert "bearer token" in text
    assert bed.fake.requests == []


@pytest.mark.asyncio
async def test_a_token_the_token_review_rejects_is_401(bed: Bed) -> None:
    assert (await bed.get("forged"))[0] == 401
    (review,) = bed.reviews(TOKEN_REVIEW_PATH)
    assert json.loads(review.body)["spec"] == {"token": "forged"}
    assert review.headers["Authorization"] == "Bearer controller-token"  # the controller's own credentials
    assert bed.reviews(ACCESS_REVIEW_PATH) == []


@pytest.mark.asyncio
async def test_an_authenticated_user_without_get_on_metrics_is_403(bed: Bed) -> None:
    status, text = await bed.get("other-token")
    assert status == 403
    assert "system:serviceaccount:default:nobody" in text
    (review,) = bed.reviews(ACCESS_REVIEW_PATH)
    assert json.loads(review.body)["spec"]["user"] == "system:serviceaccount:default:nobody"


@pytest.mark.asyncio
async def test_an_allowed_user_gets_the_metrics(bed: Bed) -> None:
    status, text = await bed.get("reader-token")
    assert status == 200
    assert "dra_quota_leader 1.0" in text
    (review,) = bed.reviews(ACCESS_REVIEW_PATH)
    body = json.loads(review.body)
    assert (body["apiVersion"], body["kind"]) == ("authorization.k8s.io/v1", "SubjectAccessReview")
    assert body["spec"] == {
        "user": READER,
        "uid": "uid-prometheus",
        "groups": ["system:serviceaccounts", "system:authenticated"],
        "extra": {"authentication.kubernetes.io/pod-name": ["prometheus-0"]},
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
    }


@pytest.mark.asyncio
async def test_the_cache_avoids_a_second_review_until_it_expires(bed: Bed) -> None:
    assert (await bed.get("reader-token"))[0] == 200
    assert (await bed.get("reader-token"))[0] == 200
    assert (await bed.get("forged"))[0] == 401
    assert (await bed.get("forged"))[0] == 401
    assert len(bed.reviews(TOKEN_REVIEW_PATH)) == 2  # one per token
    assert len(bed.reviews(ACCESS_REVIEW_PATH)) == 1
    bed.clock.now += 11  # the rejection (10 s) expired, the success (60 s) not yet
    assert (await bed.get("forged"))[0] == 401
    assert (await bed.get("reader-token"))[0] == 200
    assert (len(bed.reviews(TOKEN_REVIEW_PATH)), len(bed.reviews(ACCESS_REVIEW_PATH))) == (3, 1)
    bed.clock.now += 60
    assert (await bed.get("reader-token"))[0] == 200
    assert (len(bed.reviews(TOKEN_REVIEW_PATH)), len(bed.reviews(ACCESS_REVIEW_PATH))) == (4, 2)


@pytest.mark.asyncio
async def test_failed_reviews_refuse_and_are_not_cached(bed: Bed) -> None:
    bed.fake.script(("POST", TOKEN_REVIEW_PATH), status_reply(403, "Forbidden", "cannot create tokenreviews"))
    status, text = await bed.get("reader-token")
    assert (status, text.strip()) == (401, "Authentication failed")
    bed.fake.script(("POST", ACCESS_REVIEW_PATH), status_reply(403, "Forbidden", "no"))
    status, text = await bed.get("reader-token")
    assert (status, text.strip()) == (500, f"Authorization for user {READER} failed")
    assert (await bed.get("reader-token"))[0] == 200  # reviewed again, now answered
    assert (len(bed.reviews(TOKEN_REVIEW_PATH)), len(bed.reviews(ACCESS_REVIEW_PATH))) == (2, 2)


@pytest.mark.asyncio
async def test_plain_http_is_not_served_on_the_tls_port(bed: Bed) -> None:
    with pytest.raises(aiohttp.ClientError):
        async with bed.session.get(f"http://127.0.0.1:{bed.server.port}/metrics") as resp:
            await resp.read()


@pytest.mark.asyncio
async def test_plain_http_only_on_loopback() -> None:
    metrics = Metrics("standalone")
    for address in (":0", "0.0.0.0:0", "[::]:0"):
        with pytest.raises(ValueError, match="only on a loopback address"):
            await start_metrics_server(metrics, address, None, None)
    with pytest.raises(ValueError, match="TLS and an access guard together"):
        await start_metrics_server(metrics, "127.0.0.1:0", tls_context(), None)
    server = await start_metrics_server(metrics, "127.0.0.1:0", None, None)
    assert server is not None
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{server.port}/metrics") as resp,
        ):
            assert resp.status == 200
    finally:
        await server.close()
    assert [is_loopback(h) for h in ("127.0.0.1", "::1", "localhost", "127.0.0.2")] == [True] * 4
    assert [is_loopback(h) for h in (None, "0.0.0.0", "::", "10.0.0.1", "example.com")] == [False] * 5


def test_the_caches_are_bounded_and_expire() -> None:
    clock = Clock()
    cache: TtlCache[str, int] = TtlCache(2, clock)
    cache.put("a", 1, ttl=5)
    cache.put("b", 2, ttl=5)
    assert cache.get("a") == (True, 1)  # a is now the most recent
    cache.put("c", 3, ttl=5)
    assert (len(cache), cache.get("b"), cache.get("a"), cache.get("c")) == (
        2,
        (False, None),
        (True, 1),
        (True, 3),
    )
    clock.now += 5
    assert cache.get("a") == (False, None)
    assert len(cache) == 1


@pytest.mark.asyncio
async def test_the_reviewer_reads_users_and_decisions() -> None:
    fake = FakeApiServer()
    fake.fallback(("POST", TOKEN_REVIEW_PATH), token_review)
    fake.fallback(("POST", ACCESS_REVIEW_PATH), access_review)
    await fake.start()
    try:
        async with KubeClient(fake.url) as client:
            reviewer = ApiReviewer(client)
            user = await reviewer.authenticate("other-token")
            assert user == ReviewedUser("system:serviceaccount:default:nobody", "", ("system:authenticated",))
            assert await reviewer.authenticate("forged") is None
            assert (await reviewer.authorize(user, "/metrics", "get")).allowed is False
            reader = await reviewer.authenticate("reader-token")
            assert reader is not None
            decision = await reviewer.authorize(reader, "/metrics", "get")
            assert (decision.allowed, decision.reason) == (True, "bound to metrics-reader")
    finally:
        await fake.close()


async def served_certificate(port: int) -> bytes:
    """The DER certificate the server at 127.0.0.1:port presents (no SNI: an IP address)."""
    client = ssl.create_default_context()
    client.check_hostname = False
    client.verify_mode = ssl.CERT_NONE
    _reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client)
    try:
        der: bytes = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        return der
    finally:
        writer.close()
        await writer.wait_closed()


@pytest.mark.asyncio
async def test_a_certificate_from_files_is_followed(tmp_path: Path) -> None:
    def write(host: str) -> None:
        bundle = new_bundle([host], dt.datetime.now(dt.UTC))
        # A new file put in place, as the kubelet's projected volumes do.
        for name, data in (("tls.crt", bundle.serving.cert_pem), ("tls.key", bundle.serving.key_pem)):
            (tmp_path / f"{name}.new").write_bytes(data)
            (tmp_path / f"{name}.new").replace(tmp_path / name)

    write("first.example")
    files = CertificateFiles(tmp_path / "tls.crt", tmp_path / "tls.key", interval=0.05)
    guard = AccessGuard(ApiReviewer(KubeClient("http://127.0.0.1:9")))
    server = await start_metrics_server(Metrics("leader"), "127.0.0.1:0", files.context, guard)
    assert server is not None
    try:
        first = await served_certificate(server.port)
        assert await files.reload_if_changed() is False  # nothing changed
        (tmp_path / "tls.key").write_bytes(b"not a key")  # half-written: the old pair is kept
        assert await files.reload_if_changed() is False
        assert await served_certificate(server.port) == first
        write("second.example")
        following = asyncio.get_running_loop().create_task(files.follow())
        try:
            for _ in range(100):
                if await served_certificate(server.port) != first:
                    break
                await asyncio.sleep(0.05)
            second = await served_certificate(server.port)
        finally:
            following.cancel()
            await asyncio.gather(following, return_exceptions=True)
        assert second != first
        assert b"second.example" in second
    finally:
        await server.close()
