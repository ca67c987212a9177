"""KubeClient against the local fake API server: errors, retries, streams, paths."""

from __future__ import annotations

import contextlib
import json
import socket
import time

import pytest
from reconciler.api.resources import EVENTS
from reconciler.api.resources import JOBS
from reconciler.api.resources import NAMESPACES
from reconciler.api.resources import RESOURCE_FLAVORS
from reconciler.api.resources import WORKLOADS
from reconciler.kube import ApiError
from reconciler.kube import Backoff
from reconciler.kube import Conflict
from reconciler.kube import Forbidden
from reconciler.kube import Gone
from reconciler.kube import Invalid
from reconciler.kube import KubeClient
from reconciler.kube import NamespaceTerminating
from reconciler.kube import NotFound
from reconciler.kube import ServerError
from reconciler.kube import TooManyRequests
from reconciler.kube import TransportError
from reconciler.kube.errors import api_error

from tests.support.fake_apiserver import FakeApiServer
from tests.support.fake_apiserver import Pause
from tests.support.fake_apiserver import drop_connection
from tests.support.fake_apiserver import json_reply
from tests.support.fake_apiserver import raw_reply
from tests.support.fake_apiserver import status_reply
from tests.support.fake_apiserver import stream

PATH = "/api/v1/namespaces/default/pods"


def test_paths() -> None:
    assert JOBS.list_path() == "/apis/batch/v1/jobs"
    assert JOBS.list_path("ns") == "/apis/batch/v1/namespaces/ns/jobs"
    assert JOBS.item_path("ns", "j", "status") == "/apis/batch/v1/namespaces/ns/jobs/j/status"
    assert EVENTS.list_path("ns") == "/api/v1/namespaces/ns/events"
    assert NAMESPACES.item_path(None, "ns") == "/api/v1/namespaces/ns"
    assert RESOURCE_FLAVORS.item_path(None, "f") == "/apis/kueue.x-k8s.io/v1beta2/resourceflavors/f"
    assert WORKLOADS.api_version == "kueue.x-k8s.io/v1beta2"
    with pytest.raises(ValueError, match="cluster-scoped"):
        RESOURCE_FLAVORS.list_path("ns")
    with pytest.raises(ValueError, match="namespaced"):
        WORKLOADS.item_path(None, "w")
    with pytest.raises(ValueError, match="path segment"):
        WORKLOADS.item_path("ns", "a/b")


@pytest.mark.parametrize(
    ("code", "error_type"),
    [(403, Forbidden), (404, NotFound), (409, Conflict), (410, Gone), (422, Invalid), (503, ServerError)],
)
def test_status_codes_map_to_the_tree(code: int, error_type: type[ApiError]) -> None:
    body = json.dumps({"kind": "Status", "code": code, "reason": "R", "message": "m"}).encode()
    err = api_error(code, body)
    assert type(err) is error_type
    assert (err.status, err.reason, err.message) == (code, "R", "m")


def test_a_terminating_namespace_is_its_own_forbidden() -> None:
    status = {
        "kind": "Status",
        "code": 403,
        "reason": "Forbidden",
        "message": "unable to create new content in namespace ns because it is being terminated",
        # As kube-apiserver's NamespaceLifecycle admission sends it (StatusCause.Type is "reason").
        "details": {
            "name": "w",
            "causes": [{"reason": "NamespaceTerminating", "field": "metadata.namespace"}],
        },
    }
    err = api_error(403, json.dumps(status).encode())
    assert type(err) is NamespaceTerminating
    assert isinstance(err, Forbidden)
    del status["details"]
    assert type(api_error(403, json.dumps(status).encode())) is Forbidden


def test_non_status_body_becomes_the_message() -> None:
    err = api_error(502, b"<html>bad gateway</html>")
    assert isinstance(err, ServerError)
    assert err.reason == ""
    assert "bad gateway" in err.message


def test_retry_after_from_details() -> None:
    body = json.dumps({"kind": "Status", "code": 429, "details": {"retryAfterSeconds": 3}}).encode()
    err = api_error(429, body)
    assert isinstance(err, TooManyRequests)
    assert err.retry_after == 3.0
    err = api_error(429, body, retry_after_header="1.5")
    assert isinstance(err, TooManyRequests)
    assert err.retry_after == 1.5


@pytest.mark.asyncio
async def test_request_returns_body_and_sends_token(fake: FakeApiServer, client: KubeClient) -> None:
    fake.script(("LIST", PATH), json_reply(200, {"kind": "PodList", "items": []}))
    body = await client.get(PATH, {"limit": "5"})
    assert json.loads(body)["kind"] == "PodList"
    (req,) = fake.requests
    assert req.query == {"limit": "5"}
    assert req.headers["Authorization"] == "Bearer t0ken"


@pytest.mark.asyncio
async def test_conflict_from_status_body(fake: FakeApiServer, client: KubeClient) -> None:
    path = WORKLOADS.item_path("ns", "w1", "status")
    fake.script(("PATCH", path), status_reply(409, "Conflict", "the object has been modified"))
    with pytest.raises(Conflict) as info:
        await client.merge_patch(
            WORKLOADS, "ns", "w1", b'{"metadata":{"resourceVersion":"7"}}', subresource="status"
        )
    assert info.value.reason == "Conflict"
    assert info.value.message == "the object has been modified"
    (req,) = fake.requests
    assert req.headers["Content-Type"] == "application/merge-patch+json"
    assert req.body == b'{"metadata":{"resourceVersion":"7"}}'


@pytest.mark.asyncio
async def test_json_patch_content_type_and_422(fake: FakeApiServer, client: KubeClient) -> None:
    path = JOBS.item_path("ns", "j")
    fake.script(("PATCH", path), status_reply(422, "Invalid", "test failed"))
    with pytest.raises(Invalid):
        await client.json_patch(JOBS, "ns", "j", b"[]")
    assert fake.requests[0].headers["Content-Type"] == "application/json-patch+json"


@pytest.mark.asyncio
async def test_delete_not_found_and_propagation(fake: FakeApiServer, client: KubeClient) -> None:
    path = JOBS.item_path("ns", "j")
    fake.script(("DELETE", path), status_reply(404, "NotFound", 'jobs.batch "j" not found'))
    with pytest.raises(NotFound, match="not found"):
        await client.delete(JOBS, "ns", "j", propagation="Background")
    assert fake.requests[0].query == {"propagationPolicy": "Background"}


@pytest.mark.asyncio
async def test_get_retried_on_500_and_transport_errors(fake: FakeApiServer, client: KubeClient) -> None:
    fake.script(
        ("LIST", PATH),
        status_reply(500, "InternalError", "etcd"),
        drop_connection(),
        json_reply(200, {"ok": True}),
    )
    assert json.loads(await client.get(PATH)) == {"ok": True}
    assert len(fake.requests) == 3


@pytest.mark.asyncio
async def test_get_gives_up_after_bounded_tries(fake: FakeApiServer, client: KubeClient) -> None:
    fake.fallback(("LIST", PATH), status_reply(503, "ServiceUnavailable", "down"))
    with pytest.raises(ServerError) as info:
        await client.get(PATH)
    assert info.value.status == 503
    assert len(fake.requests) == 4


@pytest.mark.asyncio
async def test_get_honours_retry_after(fake: FakeApiServer, client: KubeClient) -> None:
    fake.script(("LIST", PATH), status_reply(429, "TooManyRequests", "slow down", retry_after="0.3"))
    fake.script(("LIST", PATH), json_reply(200, {}))
    start = time.monotonic()
    await client.get(PATH)
    assert time.monotonic() - start >= 0.3
    assert len(fake.requests) == 2


@pytest.mark.asyncio
async def test_post_not_retried(fake: FakeApiServer, client: KubeClient) -> None:
    path = WORKLOADS.list_path("ns")
    fake.fallback(("POST", path), status_reply(500, "InternalError", "boom"))
    with pytest.raises(ServerError):
        await client.create(WORKLOADS, "ns", b"{}")
    assert len(fake.requests) == 1
    fake.script(("POST", path), drop_connection())
    with pytest.raises(TransportError):
        await client.create(WORKLOADS, "ns", b"{}")
    assert len(fake.requests) == 2


@pytest.mark.asyncio
async def test_429_on_post_carries_retry_after(fake: FakeApiServer, client: KubeClient) -> None:
    path = WORKLOADS.list_path("ns")
    fake.script(("POST", path), status_reply(429, "TooManyRequests", "slow", retry_after="2"))
    with pytest.raises(TooManyRequests) as info:
        await client.create(WORKLOADS, "ns", b"{}")
    assert info.value.retry_after == 2.0


@pytest.mark.asyncio
async def test_connection_refused_is_a_transport_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    kube = KubeClient(f"http://127.0.0.1:{port}", retry_attempts=2, retry_backoff=Backoff(0.01, 0.01))
    try:
        with pytest.raises(TransportError):
            await kube.get("/api")
    finally:
        await kube.close()


@pytest.mark.asyncio
async def test_request_timeout_is_a_transport_error(fake: FakeApiServer) -> None:
    fake.fallback(("POST", "/x"), stream(Pause(1.0)))
    kube = KubeClient(fake.url)
    try:
        with pytest.raises(TransportError, match="Timeout"):
            await kube.request("POST", "/x", body=b"{}", timeout=0.1)
    finally:
        await kube.close()


# --- streams ------------------------------------------------------------------------------


async def _collect(kube: KubeClient, read_timeout: float = 2.0) -> list[bytes]:
    lines = kube.stream_lines(PATH, {"watch": "1"}, connect_timeout=1.0, read_timeout=read_timeout)
    async with contextlib.aclosing(lines):
        return [line async for line in lines]


@pytest.mark.asyncio
async def test_stream_status_checked_before_yielding(fake: FakeApiServer, client: KubeClient) -> None:
    fake.script(("WATCH", PATH), status_reply(410, "Expired", "too old resource version: 1 (5)"))
    fake.script(("WATCH", PATH), status_reply(500, "InternalError", "x"))
    fake.script(("WATCH", PATH), raw_reply(403, b"forbidden"))
    with pytest.raises(Gone, match="too old"):
        await _collect(client)
    with pytest.raises(ServerError):
        await _collect(client)
    with pytest.raises(Forbidden):
        await _collect(client)
    assert len(fake.requests) == 3  # streams are never retried here


@pytest.mark.asyncio
async def test_stream_splits_lines_across_chunks(fake: FakeApiServer, client: KubeClient) -> None:
    fake.script(("WATCH", PATH), stream(b'{"a":1}\n{"b":', b"2}\n\n", b'{"c":3}\n', chunk=3))
    assert await _collect(client) == [b'{"a":1}', b'{"b":2}', b'{"c":3}']


@pytest.mark.asyncio
async def test_stream_no_line_length_limit(fake: FakeApiServer, client: KubeClient) -> None:
    big = b'{"x":"' + b"y" * (3 * 1024 * 1024) + b'"}'
    fake.script(("WATCH", PATH), stream(big + b"\n", b"{}\n"))
    lines = await _collect(client)
    assert [len(x) for x in lines] == [len(big), 2]


@pytest.mark.asyncio
async def test_stream_partial_last_line_dropped(fake: FakeApiServer, client: KubeClient) -> None:
    fake.script(("WATCH", PATH), stream(b'{"a":1}\n{"tru'))
    assert await _collect(client) == [b'{"a":1}']


@pytest.mark.asyncio
async def test_stream_dropped_connection_raises_transport_error(
    fake: FakeApiServer, client: KubeClient
) -> None:
    fake.script(("WATCH", PATH), stream(b'{"a":1}\n{"tru', end="drop"))
    got: list[bytes] = []

    async def drain() -> None:
        lines = client.stream_lines(PATH, {"watch": "1"}, connect_timeout=1.0, read_timeout=2.0)
        async with contextlib.aclosing(lines):
            async for line in lines:
                got.append(line)

    with pytest.raises(TransportError):
        await drain()
    assert got == [b'{"a":1}']


@pytest.mark.asyncio
async def test_stream_read_timeout(fake: FakeApiServer, client: KubeClient) -> None:
    fake.script(("WATCH", PATH), stream(b"{}\n", end="hang"))
    with pytest.raises(TransportError, match="Timeout"):
        await _collect(client, read_timeout=0.2)


@pytest.mark.asyncio
async def test_closed_client_refuses(fake: FakeApiServer) -> None:
    kube = KubeClient(fake.url)
    await kube.close()
    await kube.close()
    with pytest.raises(RuntimeError, match="closed"):
        await kube.get("/api")
