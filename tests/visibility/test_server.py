"""The visibility server over real TLS on loopback: the front proxy's certificate, then the answers
of a leader, of a leader still rebuilding and of a follower."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import ssl
from pathlib import Path
from typing import Any

import aiohttp
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from reconciler.kube.reviews import AccessDecision, ReviewedUser
from reconciler.observability.server import start_server
from reconciler.visibility.access import Authorizer, RequestHeaderConfig
from reconciler.visibility.server import NOT_LEADING, NOT_READY, Published, visibility_app
from reconciler.visibility.summary import PendingEntry
from reconciler.webhook.certs import KeyPair, new_bundle

NOW = dt.datetime.now(dt.UTC)
BASE = "/apis/visibility.kueue.x-k8s.io/v1beta2"


def _client_cert(ca: KeyPair, common_name: str) -> KeyPair:
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW - dt.timedelta(minutes=5))
        .not_valid_after(NOW + dt.timedelta(hours=1))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), pem)


class _Queues:
    def __init__(self, ready: bool = True) -> None:
        self.ready = ready
        self.cq = [
            PendingEntry("ns", "w1", "a", 5, "2026-12-07T10:00:00Z"),
            PendingEntry("ns", "w2", "b", 1, "2026-12-07T10:00:01Z"),
        ]

    def pending(self, cluster_queue: str) -> list[PendingEntry] | None:
        return self.cq if cluster_queue == "cq" else None

    def cluster_queue_of(self, namespace: str, local_queue: str) -> str | None:
        return "cq" if (namespace, local_queue) in {("ns", "a"), ("ns", "b")} else None


class _Reviews:
    async def review_access(self, user: ReviewedUser, attributes: dict[str, Any]) -> AccessDecision:
        return AccessDecision(user.username != "nobody")


def _write(directory: Path, name: str, pair: KeyPair) -> tuple[Path, Path]:
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    cert.write_bytes(pair.cert_pem)
    key.write_bytes(pair.key_pem)
    return cert, key


async def _serve_and_ask(
    tmp_path: Path, published: Published, requests: list[tuple[str, str]]
) -> list[tuple[int, dict[str, Any]]]:
    serving = new_bundle(["127.0.0.1"], NOW)
    proxy_ca = new_bundle(["unused"], NOW).ca
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(*_write(tmp_path, "serving", serving.serving))
    server_context.verify_mode = ssl.CERT_OPTIONAL
    server_context.load_verify_locations(cadata=proxy_ca.cert_pem.decode())
    published.requestheader = RequestHeaderConfig(
        client_ca=proxy_ca.cert_pem.decode(), allowed_names=("front-proxy-client",)
    )
    client_context = ssl.create_default_context(cadata=serving.ca.cert_pem.decode())
    client_context.load_cert_chain(*_write(tmp_path, "proxy", _client_cert(proxy_ca, "front-proxy-client")))
    server = await start_server(
        visibility_app(published, Authorizer(_Reviews())), "127.0.0.1:0", ssl_context=server_context
    )
    assert server is not None
    answers = []
    try:
        async with aiohttp.ClientSession() as session:
            for user, path in requests:
                headers = {"X-Remote-User": user}
                url = f"https://127.0.0.1:{server.port}{path}"
                async with session.get(url, ssl=client_context, headers=headers) as resp:
                    answers.append((resp.status, json.loads(await resp.text())))
    finally:
        await server.close()
    return answers


def test_the_leader_answers_pages_not_found_and_bad_parameters(tmp_path: Path) -> None:
    published = Published(source=_Queues())
    answers = asyncio.run(
        _serve_and_ask(
            tmp_path,
            published,
            [
                ("alice", f"{BASE}/clusterqueues/cq/pendingworkloads"),
                ("alice", f"{BASE}/namespaces/ns/localqueues/b/pendingworkloads"),
                ("alice", f"{BASE}/clusterqueues/missing/pendingworkloads"),
                ("alice", f"{BASE}/namespaces/ns/localqueues/missing/pendingworkloads"),
                ("alice", f"{BASE}/clusterqueues/cq/pendingworkloads?limit=x"),
                ("nobody", f"{BASE}/clusterqueues/cq/pendingworkloads"),
            ],
        )
    )
    (ok, cq), (ok_lq, lq), (nf, missing), (nf_lq, _), (bad, bad_body), (denied, forbidden) = answers
    assert ok == ok_lq == 200
    assert [i["metadata"]["name"] for i in cq["items"]] == ["w1", "w2"]
    assert [(i["positionInClusterQueue"], i["positionInLocalQueue"]) for i in lq["items"]] == [(1, 0)]
    assert (nf, nf_lq) == (404, 404)
    assert missing["message"] == 'clusterqueue.visibility.kueue.x-k8s.io "missing" not found'
    assert (bad, bad_body["reason"]) == (400, "BadRequest")
    assert "limit" in bad_body["message"]
    assert (denied, forbidden["reason"]) == (403, "Forbidden")
    assert 'User "nobody" cannot get resource "clusterqueues/pendingworkloads"' in forbidden["message"]


def test_a_follower_and_a_leader_still_rebuilding_say_so_with_503(tmp_path: Path) -> None:
    path = f"{BASE}/clusterqueues/cq/pendingworkloads"
    follower = asyncio.run(_serve_and_ask(tmp_path, Published(source=None), [("alice", path)]))
    rebuilding = asyncio.run(
        _serve_and_ask(tmp_path, Published(source=_Queues(ready=False)), [("alice", path)])
    )
    assert [(s, b["reason"], b["message"]) for s, b in follower + rebuilding] == [
        (503, "ServiceUnavailable", NOT_LEADING),
        (503, "ServiceUnavailable", NOT_READY),
    ]
