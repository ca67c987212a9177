"""Certificates: what is made, when it must be made again, and the manager keeping them in a Secret,
in the certificate directory and in the webhook configurations (against a fake API server)."""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from reconciler.api.resources import (
    CUSTOM_RESOURCE_DEFINITIONS,
    MUTATING_WEBHOOK_CONFIGURATIONS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
)
from reconciler.kube import Backoff, KubeClient
from reconciler.webhook.certmanager import CONVERSION_CRDS, CertManager, CertSettings, write_cert_dir
from reconciler.webhook.certs import CertBundle, KeyPair, issue_serving, new_bundle, new_ca, renewal_reason
from tests.support.fake_apiserver import FakeApiServer, status_body

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
HOSTS = ["svc.ns.svc", "127.0.0.1"]


def sans(pem: bytes) -> set[str]:
    cert = x509.load_pem_x509_certificate(pem)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return {str(n.value) for n in names}


def test_a_new_bundle_serves_every_host_and_is_signed_by_its_ca() -> None:
    bundle = new_bundle(HOSTS, NOW)
    assert sans(bundle.serving.cert_pem) == set(HOSTS)
    ca = x509.load_pem_x509_certificate(bundle.ca.cert_pem)
    serving = x509.load_pem_x509_certificate(bundle.serving.cert_pem)
    serving.verify_directly_issued_by(ca)
    assert ca.not_valid_after_utc - NOW == dt.timedelta(days=3650)
    assert serving.not_valid_after_utc - NOW == dt.timedelta(days=365)
    assert renewal_reason(bundle, HOSTS, NOW) is None
    for cert in (ca, serving):  # docs/webhooks.md: ECDSA P-256
        key = cert.public_key()
        assert isinstance(key, ec.EllipticCurvePublicKey)
        assert isinstance(key.curve, ec.SECP256R1)


def test_when_a_bundle_must_be_made_again() -> None:
    bundle = new_bundle(HOSTS, NOW)
    soon = NOW + dt.timedelta(days=300)
    assert renewal_reason(bundle, HOSTS, soon) == (
        "serving",
        f"the serving certificate expires at {(NOW + dt.timedelta(days=365)).isoformat()}",
    )
    what, why = renewal_reason(bundle, HOSTS, NOW + dt.timedelta(days=3600)) or ("", "")
    assert (what, why.startswith("the CA expires")) == ("ca", True)
    assert renewal_reason(bundle, [*HOSTS, "other.ns.svc"], NOW) == (
        "serving",
        "the serving certificate is not for other.ns.svc",
    )
    foreign = CertBundle(new_ca(NOW), bundle.serving)
    assert renewal_reason(foreign, HOSTS, NOW) == (
        "serving",
        "the serving certificate is not signed by the CA",
    )
    swapped = CertBundle(bundle.ca, KeyPair(bundle.serving.cert_pem, bundle.ca.key_pem))
    assert renewal_reason(swapped, HOSTS, NOW) == (
        "serving",
        "the serving key does not match the serving certificate",
    )
    garbage = CertBundle(KeyPair(b"junk", b"junk"), bundle.serving)
    assert (renewal_reason(garbage, HOSTS, NOW) or ("",))[0] == "ca"
    renewed = CertBundle(bundle.ca, issue_serving(bundle.ca, HOSTS, soon))
    assert renewal_reason(renewed, HOSTS, soon) is None


def test_the_cert_dir_is_written_only_where_it_differs(tmp_path: Path) -> None:
    bundle = new_bundle(HOSTS, NOW)
    assert write_cert_dir(tmp_path, bundle) is True
    assert (tmp_path / "tls.crt").read_bytes() == bundle.serving.cert_pem
    assert (tmp_path / "ca.crt").read_bytes() == bundle.ca.cert_pem
    assert (tmp_path / "tls.key").stat().st_mode & 0o777 == 0o600
    assert write_cert_dir(tmp_path, bundle) is False
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ca.crt", "tls.crt", "tls.key"]


# --- the manager against a fake API server --------------------------------------------------------

NS, SECRET, SERVICE = "dra-quota-system", "webhook-cert", "dra-quota-reconciler-webhook-service"
SECRET_PATH = f"/api/v1/namespaces/{NS}/secrets/{SECRET}"
MUTATING = MUTATING_WEBHOOK_CONFIGURATIONS.item_path(
    None, "dra-quota-reconciler-mutating-webhook-configuration"
)
VALIDATING = VALIDATING_WEBHOOK_CONFIGURATIONS.item_path(
    None, "dra-quota-reconciler-validating-webhook-configuration"
)


def _apply_patch(obj: dict[str, Any], patch: list[dict[str, Any]]) -> bool:
    """RFC 6902 add and test, enough for the manager's patches; False when a test fails."""
    for op in patch:
        *parents, last = op["path"].strip("/").split("/")
        target: Any = obj
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if op["op"] == "test":
            if target.get(last) != op["value"]:
                return False
        elif op["op"] == "add":
            target[last] = op["value"]
    return True


CRDS = [CUSTOM_RESOURCE_DEFINITIONS.item_path(None, name) for name in CONVERSION_CRDS]


class CertObjects:
    """A Secret and two webhook configurations with the API server's semantics (versions, 409, 422)."""

    def __init__(self, fake: FakeApiServer) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.version = 10
        self.writes: list[tuple[str, str]] = []
        fake.fallback(("LIST", SECRET_PATH), self.get)
        fake.fallback(("POST", f"/api/v1/namespaces/{NS}/secrets"), self.create)
        fake.fallback(("PUT", SECRET_PATH), self.update)
        for path in (MUTATING, VALIDATING, *CRDS):
            fake.fallback(("LIST", path), self.get)
            fake.fallback(("PATCH", path), self.patch)

    def put(self, path: str, obj: dict[str, Any]) -> None:
        self.version += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.version)
        self.objects[path] = obj

    def configuration(self, path: str, webhooks: int = 2) -> None:
        self.put(
            path,
            {
                "metadata": {"name": path.rsplit("/", 1)[1]},
                "webhooks": [{"name": f"w{i}.kb.io", "clientConfig": {}} for i in range(webhooks)],
            },
        )

    async def get(self, request: web.Request) -> web.StreamResponse:
        obj = self.objects.get(request.path)
        if obj is None:
            return web.json_response(status_body(404, "NotFound", "not found"), status=404)
        return web.json_response(obj)

    async def create(self, request: web.Request) -> web.StreamResponse:
        self.writes.append(("create", SECRET_PATH))
        if SECRET_PATH in self.objects:
            return web.json_response(status_body(409, "AlreadyExists", "exists"), status=409)
        self.put(SECRET_PATH, json.loads(await request.read()))
        return web.json_response(self.objects[SECRET_PATH], status=201)

    async def update(self, request: web.Request) -> web.StreamResponse:
        self.writes.append(("update", SECRET_PATH))
        body = json.loads(await request.read())
        if (
            body["metadata"].get("resourceVersion")
            != self.objects[SECRET_PATH]["metadata"]["resourceVersion"]
        ):
            return web.json_response(status_body(409, "Conflict", "modified"), status=409)
        self.put(SECRET_PATH, body)
        return web.json_response(body)

    async def patch(self, request: web.Request) -> web.StreamResponse:
        self.writes.append(("patch", request.path))
        assert request.content_type == "application/json-patch+json"
        obj = json.loads(json.dumps(self.objects[request.path]))
        if not _apply_patch(obj, json.loads(await request.read())):
            return web.json_response(status_body(422, "Invalid", "test failed"), status=422)
        self.put(request.path, obj)
        return web.json_response(obj)

    def bundle(self) -> CertBundle:
        data = {k: base64.b64decode(v) for k, v in self.objects[SECRET_PATH]["data"].items()}
        return CertBundle(KeyPair(data["ca.crt"], data["ca.key"]), KeyPair(data["tls.crt"], data["tls.key"]))

    def ca_bundles(self, path: str) -> list[str | None]:
        return [w["clientConfig"].get("caBundle") for w in self.objects[path]["webhooks"]]


@pytest_asyncio.fixture
async def client(fake: FakeApiServer) -> AsyncIterator[KubeClient]:
    kube = KubeClient(fake.url, token="t", retry_backoff=Backoff(initial=0.01, maximum=0.02))
    try:
        yield kube
    finally:
        await kube.close()


def manager(client: KubeClient, cert_dir: Path, clock: list[dt.datetime]) -> CertManager:
    settings = CertSettings(NS, SECRET, SERVICE, extra_hosts=("127.0.0.1",))
    return CertManager(client, settings, cert_dir, clock=lambda: clock[0])


@pytest.mark.asyncio
async def test_bootstrap_creates_the_secret_writes_the_files_and_injects_the_bundle(
    fake: FakeApiServer, client: KubeClient, tmp_path: Path
) -> None:
    cluster = CertObjects(fake)
    cluster.configuration(MUTATING, webhooks=1)
    cluster.configuration(VALIDATING, webhooks=3)
    certs = manager(client, tmp_path, [NOW])
    bundle = await certs.round()
    assert certs.ready.is_set()
    stored = cluster.bundle()
    assert stored == bundle
    assert cluster.objects[SECRET_PATH]["type"] == "kubernetes.io/tls"
    assert sans(stored.serving.cert_pem) == {
        f"{SERVICE}.{NS}.svc",
        f"{SERVICE}.{NS}.svc.cluster.local",
        "127.0.0.1",
    }
    assert (tmp_path / "tls.crt").read_bytes() == stored.serving.cert_pem
    wanted = base64.b64encode(stored.ca.cert_pem).decode()
    assert cluster.ca_bundles(MUTATING) == [wanted]
    assert cluster.ca_bundles(VALIDATING) == [wanted] * 3
    # A second round changes nothing.
    writes = len(cluster.writes)
    assert await certs.round() == bundle
    assert len(cluster.writes) == writes


@pytest.mark.asyncio
async def test_a_second_replica_takes_the_first_ones_secret(
    fake: FakeApiServer, client: KubeClient, tmp_path: Path
) -> None:
    cluster = CertObjects(fake)
    first = await manager(client, tmp_path / "a", [NOW]).round()
    second = await manager(client, tmp_path / "b", [NOW]).round()
    assert first == second
    assert (tmp_path / "a" / "tls.key").read_bytes() == (tmp_path / "b" / "tls.key").read_bytes()
    assert cluster.writes == [("create", SECRET_PATH)]  # the configurations do not exist: nothing patched


@pytest.mark.asyncio
async def test_a_lost_create_race_takes_the_winners_secret(
    fake: FakeApiServer, client: KubeClient, tmp_path: Path
) -> None:
    cluster = CertObjects(fake)
    winner = new_bundle(["x"], NOW)

    async def absent_then_created(request: web.Request) -> web.StreamResponse:
        # The GET finds nothing; meanwhile another replica creates the Secret.
        cluster.put(SECRET_PATH, json.loads(json.dumps({"data": _data(winner), "type": "kubernetes.io/tls"})))
        return web.json_response(status_body(404, "NotFound", "not found"), status=404)

    fake.script(("LIST", SECRET_PATH), absent_then_created)
    await manager(client, tmp_path, [NOW]).ensure_secret()
    # The winner's bundle lacks the hosts, so it is renewed (the serving part only, on the winner's CA).
    assert cluster.writes == [("create", SECRET_PATH), ("update", SECRET_PATH)]
    assert cluster.bundle().ca == winner.ca


def _data(bundle: CertBundle) -> dict[str, str]:
    pem = {"ca.crt": bundle.ca.cert_pem, "ca.key": bundle.ca.key_pem, "tls.crt": bundle.serving.cert_pem}
    pem["tls.key"] = bundle.serving.key_pem
    return {k: base64.b64encode(v).decode() for k, v in pem.items()}


@pytest.mark.asyncio
async def test_rotation_renews_the_serving_certificate_then_the_ca(
    fake: FakeApiServer, client: KubeClient, tmp_path: Path
) -> None:
    cluster = CertObjects(fake)
    cluster.configuration(MUTATING, webhooks=1)
    clock = [NOW]
    certs = manager(client, tmp_path, clock)
    first = await certs.round()
    clock[0] = NOW + dt.timedelta(days=300)  # the serving certificate expires within 90 days
    second = await certs.round()
    assert second.ca == first.ca
    assert second.serving != first.serving
    assert (tmp_path / "tls.crt").read_bytes() == second.serving.cert_pem
    assert cluster.ca_bundles(MUTATING) == [base64.b64encode(first.ca.cert_pem).decode()]
    clock[0] = NOW + dt.timedelta(days=3600)  # now the CA too
    third = await certs.round()
    assert third.ca != first.ca
    assert cluster.ca_bundles(MUTATING) == [base64.b64encode(third.ca.cert_pem).decode()]
    assert renewal_reason(cluster.bundle(), certs.settings.hosts, clock[0]) is None


@pytest.mark.asyncio
async def test_injection_retries_when_the_configuration_changes_under_it(
    fake: FakeApiServer, client: KubeClient, tmp_path: Path
) -> None:
    cluster = CertObjects(fake)
    cluster.configuration(MUTATING, webhooks=1)
    cluster.configuration(VALIDATING, webhooks=1)
    bundle = new_bundle(["x"], NOW)

    async def stale(request: web.Request) -> web.StreamResponse:
        cluster.configuration(MUTATING, webhooks=2)  # re-applied meanwhile: the test op fails
        return await cluster.patch(request)

    fake.script(("PATCH", MUTATING), stale)
    await manager(client, tmp_path, [NOW]).inject(bundle.ca.cert_pem)
    wanted = base64.b64encode(bundle.ca.cert_pem).decode()
    assert cluster.ca_bundles(MUTATING) == [wanted, wanted]
    assert [w for w in cluster.writes if w[1] == MUTATING] == [("patch", MUTATING)] * 2


@pytest.mark.asyncio
async def test_a_broken_secret_is_replaced(fake: FakeApiServer, client: KubeClient, tmp_path: Path) -> None:
    cluster = CertObjects(fake)
    cluster.put(SECRET_PATH, {"type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}})
    bundle = await manager(client, tmp_path, [NOW]).ensure_secret()
    assert cluster.writes == [("update", SECRET_PATH)]
    assert cluster.bundle() == bundle


def _crd(namespace: str, strategy: str = "Webhook") -> dict[str, Any]:
    service = {"name": SERVICE, "namespace": namespace, "path": "/convert"}
    conversion: dict[str, Any] = {"strategy": strategy}
    if strategy == "Webhook":
        conversion["webhook"] = {"conversionReviewVersions": ["v1"], "clientConfig": {"service": service}}
    return {"metadata": {"name": "x"}, "spec": {"conversion": conversion}}


@pytest.mark.asyncio
async def test_the_bundle_goes_into_the_conversion_webhook_of_the_converted_crds(
    fake: FakeApiServer, client: KubeClient, tmp_path: Path
) -> None:
    """As Kueue's certificate controller: each converted CRD's conversion webhook trusts the CA; one
    installed for the Service in another namespace (a Helm release elsewhere) is pointed at ours."""
    cluster = CertObjects(fake)
    cluster.put(CRDS[0], _crd(NS))
    cluster.put(CRDS[1], _crd("dra-quota-system"))
    cluster.put(CRDS[2], _crd(NS, strategy="None"))  # not converted: nothing to inject
    bundle = await manager(client, tmp_path, [NOW]).round()
    wanted = base64.b64encode(bundle.ca.cert_pem).decode()
    for path in CRDS[:2]:
        config = cluster.objects[path]["spec"]["conversion"]["webhook"]["clientConfig"]
        assert config == {
            "service": {"name": SERVICE, "namespace": NS, "path": "/convert"},
            "caBundle": wanted,
        }
    assert cluster.objects[CRDS[2]] == {
        **_crd(NS, strategy="None"),
        "metadata": cluster.objects[CRDS[2]]["metadata"],
    }
    writes = len(cluster.writes)
    await manager(client, tmp_path, [NOW]).round()
    assert len(cluster.writes) == writes  # the second round changes nothing
