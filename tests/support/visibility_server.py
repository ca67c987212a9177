"""The visibility server on loopback over real TLS, asked as the API server's front proxy asks it."""

from __future__ import annotations

import datetime as dt
import json
import ssl
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
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
from reconciler.visibility.server import Published, visibility_app
from reconciler.webhook.certs import KeyPair, new_bundle

NOW = dt.datetime.now(dt.UTC)


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


class Reviews:
    """Every user may, but `nobody`."""

    async def review_access(self, user: ReviewedUser, attributes: dict[str, Any]) -> AccessDecision:
        return AccessDecision(user.username != "nobody")


def _write(directory: Path, name: str, pair: KeyPair) -> tuple[Path, Path]:
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    cert.write_bytes(pair.cert_pem)
    key.write_bytes(pair.key_pem)
    return cert, key


@dataclass
class Asker:
    """Requests to the served app as the front proxy makes them, for a user."""

    session: aiohttp.ClientSession
    port: int
    context: ssl.SSLContext

    async def ask(
        self, user: str, path: str, method: str = "GET", body: Any = None
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        headers = {"X-Remote-User": user}
        url = f"https://127.0.0.1:{self.port}{path}"
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        async with self.session.request(method, url, ssl=self.context, headers=headers, data=data) as resp:
            return resp.status, json.loads(await resp.text()), dict(resp.headers)


@asynccontextmanager
async def serving(tmp_path: Path, published: Published) -> AsyncIterator[Asker]:
    serving_bundle = new_bundle(["127.0.0.1"], NOW)
    proxy_ca = new_bundle(["unused"], NOW).ca
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(*_write(tmp_path, "serving", serving_bundle.serving))
    server_context.verify_mode = ssl.CERT_OPTIONAL
    server_context.load_verify_locations(cadata=proxy_ca.cert_pem.decode())
    published.requestheader = RequestHeaderConfig(
        client_ca=proxy_ca.cert_pem.decode(), allowed_names=("front-proxy-client",)
    )
    client_context = ssl.create_default_context(cadata=serving_bundle.ca.cert_pem.decode())
    client_context.load_cert_chain(*_write(tmp_path, "proxy", _client_cert(proxy_ca, "front-proxy-client")))
    server = await start_server(
        visibility_app(published, Authorizer(Reviews())), "127.0.0.1:0", ssl_context=server_context
    )
    assert server is not None
    try:
        async with aiohttp.ClientSession() as session:
            yield Asker(session, server.port, client_context)
    finally:
        await server.close()


async def serve_and_ask(
    tmp_path: Path, published: Published, requests: Sequence[tuple[str, str]]
) -> list[tuple[int, dict[str, Any]]]:
    """GET each (user, path) in turn: (status, body)."""
    async with serving(tmp_path, published) as asker:
        return [(status, body) for status, body, _ in [await asker.ask(u, p) for u, p in requests]]
