"""Kueue's internalCertManagement: the webhook's CA and serving certificate kept in a Secret, written
to the certificate directory, and the CA bundle injected into the webhook configurations.

Every replica runs it (the webhooks answer on every replica, leader or not). Each round:

1. read the Secret ``webhookSecretName`` in the controller's namespace; when it is missing, make a
   CA and a serving certificate for ``<webhookServiceName>.<namespace>.svc`` and create it (409:
   another replica was first, read theirs); when it needs renewing (see ``certs.renewal_reason``),
   make what must be made again and update it with its resourceVersion (409: read it again);
2. write ``tls.crt``, ``tls.key`` and ``ca.crt`` to the certificate directory when they differ (the
   server reloads them without a restart);
3. patch ``caBundle`` into every webhook of ``<base>-mutating-webhook-configuration`` and
   ``<base>-validating-webhook-configuration`` (``<base>``: the service name without
   ``-webhook-service``, as Kueue names them), and into the conversion webhook of each converted
   CRD (``CONVERSION_CRDS``, as Kueue's certificate controller does), where it differs, with a JSON
   patch that tests the resourceVersion first.

Rounds repeat every ``check_interval`` (a configuration re-created without its bundle, a Secret
renewed by another replica are caught then), sooner with backoff after a failure. Keys are made
in a thread; every API call has a timeout.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import structlog

from reconciler.api.resources import (
    CUSTOM_RESOURCE_DEFINITIONS,
    MUTATING_WEBHOOK_CONFIGURATIONS,
    SECRETS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    Resource,
)
from reconciler.kube import Backoff, Conflict, Invalid, KubeClient, KubeError, NotFound

from .certs import RENEW_BEFORE, CertBundle, KeyPair, issue_serving, new_bundle, renewal_reason

__all__ = [
    "CA_FILE",
    "CERT_FILE",
    "CONVERSION_CRDS",
    "KEY_FILE",
    "CertManager",
    "CertSettings",
    "write_cert_dir",
]

log = structlog.get_logger(__name__)

CERT_FILE, KEY_FILE, CA_FILE = "tls.crt", "tls.key", "ca.crt"
WEBHOOK_CONFIGURATIONS = (MUTATING_WEBHOOK_CONFIGURATIONS, VALIDATING_WEBHOOK_CONFIGURATIONS)
INJECTED = (*WEBHOOK_CONFIGURATIONS, CUSTOM_RESOURCE_DEFINITIONS)  # where the CA bundle goes
_KIND_WORD = {MUTATING_WEBHOOK_CONFIGURATIONS: "mutating", VALIDATING_WEBHOOK_CONFIGURATIONS: "validating"}
# Kueue's CRDs whose v1beta1 is converted by this controller's webhook (spec.conversion.strategy
# Webhook in manifests/crds/; the others read the same in both versions).
CONVERSION_CRDS = tuple(
    f"{plural}.kueue.x-k8s.io" for plural in ("clusterqueues", "cohorts", "localqueues", "workloads")
)


@dataclass(frozen=True)
class CertSettings:
    namespace: str
    secret_name: str
    service_name: str
    extra_hosts: tuple[str, ...] = ()

    @property
    def hosts(self) -> list[str]:
        """What the serving certificate is for: the Service's in-cluster names, then any extra hosts."""
        service = f"{self.service_name}.{self.namespace}.svc"
        return list(dict.fromkeys([service, f"{service}.cluster.local", *self.extra_hosts]))

    def configuration_name(self, kind: str) -> str:
        base = self.service_name.removesuffix("-webhook-service")
        return f"{base}-{kind}-webhook-configuration"


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _decode_secret(secret: dict[str, Any]) -> CertBundle | None:
    data = secret.get("data") or {}
    try:
        pem = {
            k: base64.b64decode(data[k], validate=True) for k in ("ca.crt", "ca.key", "tls.crt", "tls.key")
        }
    except (KeyError, ValueError):
        return None
    return CertBundle(KeyPair(pem["ca.crt"], pem["ca.key"]), KeyPair(pem["tls.crt"], pem["tls.key"]))


def _secret_body(settings: CertSettings, bundle: CertBundle, resource_version: str | None) -> bytes:
    meta: dict[str, Any] = {
        "name": settings.secret_name,
        "namespace": settings.namespace,
        "labels": {"app.kubernetes.io/managed-by": "dra-quota-reconciler"},
    }
    if resource_version:
        meta["resourceVersion"] = resource_version
    pem = {
        "ca.crt": bundle.ca.cert_pem,
        "ca.key": bundle.ca.key_pem,
        "tls.crt": bundle.serving.cert_pem,
        "tls.key": bundle.serving.key_pem,
    }
    data = {k: base64.b64encode(v).decode() for k, v in pem.items()}
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta,
        "type": "kubernetes.io/tls",
        "data": data,
    }
    return msgspec.json.encode(secret)


def write_cert_dir(directory: Path, bundle: CertBundle) -> bool:
    """Write tls.crt, tls.key and ca.crt where they differ (atomically, key owner-only); True if any did."""
    directory.mkdir(parents=True, exist_ok=True)
    changed = False
    for name, content, mode in (
        (KEY_FILE, bundle.serving.key_pem, 0o600),
        (CERT_FILE, bundle.serving.cert_pem, 0o644),
        (CA_FILE, bundle.ca.cert_pem, 0o644),
    ):
        path = directory / name
        try:
            if path.read_bytes() == content:
                continue
        except OSError:
            pass
        temporary = directory / f".{name}.tmp"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(content)
        os.replace(temporary, path)
        changed = True
    return changed


@dataclass
class CertManager:
    client: KubeClient
    settings: CertSettings
    cert_dir: Path
    check_interval: float = 60.0
    renew_before: dt.timedelta = RENEW_BEFORE
    clock: Callable[[], dt.datetime] = _utcnow
    backoff: Backoff = field(default_factory=lambda: Backoff(initial=1.0, maximum=30.0))
    ready: asyncio.Event = field(default_factory=asyncio.Event)  # set once certificates are in the directory
    _missing_reported: set[str] = field(default_factory=set)

    async def run(self) -> None:
        """Rounds until cancelled; failures are logged and retried with backoff."""
        delays = self.backoff.delays()
        while True:
            try:
                await self.round()
            except (KubeError, OSError, ValueError) as err:
                delay = next(delays)
                log.warning(
                    "webhook certificate round failed; retrying",
                    secret=f"{self.settings.namespace}/{self.settings.secret_name}",
                    error=str(err),
                    retry_in=round(delay, 1),
                )
                await asyncio.sleep(delay)
                continue
            delays = self.backoff.delays()
            await asyncio.sleep(self.check_interval)

    async def round(self) -> CertBundle:
        bundle = await self.ensure_secret()
        if await asyncio.to_thread(write_cert_dir, self.cert_dir, bundle):
            log.info("webhook certificate written", directory=str(self.cert_dir))
        self.ready.set()
        await self.inject(bundle.ca.cert_pem)
        return bundle

    async def ensure_secret(self) -> CertBundle:
        """The Secret's bundle, made, renewed or taken from another replica as needed."""
        s = self.settings
        path = SECRETS.item_path(s.namespace, s.secret_name)
        for _ in range(5):
            try:
                secret = msgspec.json.decode(await self.client.get(path))
            except NotFound:
                bundle = await asyncio.to_thread(new_bundle, s.hosts, self.clock())
                try:
                    await self.client.create(SECRETS, s.namespace, _secret_body(s, bundle, None))
                except Conflict:
                    continue  # another replica created it first: take theirs
                log.info("webhook certificate Secret created", secret=f"{s.namespace}/{s.secret_name}")
                return bundle
            current = _decode_secret(secret)
            reason = (
                ("ca", "the Secret lacks ca.crt, ca.key, tls.crt or tls.key") if current is None else None
            )
            reason = reason or renewal_reason(current, s.hosts, self.clock(), self.renew_before)  # type: ignore[arg-type]
            if reason is None and current is not None:
                return current
            what, why = reason or ("ca", "")
            bundle = await asyncio.to_thread(self._renewed, current, what)
            body = _secret_body(s, bundle, secret["metadata"]["resourceVersion"])
            try:
                await self.client.request("PUT", SECRETS.item_path(s.namespace, s.secret_name), body=body)
            except Conflict:
                continue  # changed meanwhile (another replica renewed it): read it again
            log.info(
                "webhook certificate renewed",
                renewed=what,
                reason=why,
                secret=f"{s.namespace}/{s.secret_name}",
            )
            return bundle
        raise Conflict(409, "Conflict", f"Secret {s.namespace}/{s.secret_name} kept changing; will retry")

    def _renewed(self, current: CertBundle | None, what: str) -> CertBundle:
        now = self.clock()
        if current is None or what == "ca":
            return new_bundle(self.settings.hosts, now)
        return CertBundle(current.ca, issue_serving(current.ca, self.settings.hosts, now))

    async def inject(self, ca_pem: bytes) -> None:
        """Patch the CA bundle into every webhook of the two configurations and into the conversion
        webhook of each converted CRD, where it differs."""
        wanted = base64.b64encode(ca_pem).decode()
        for resource in INJECTED:
            for name in self._injected_names(resource):
                for _ in range(3):  # read again when it changed between the read and the patch
                    try:
                        current = msgspec.json.decode(await self.client.get(resource.item_path(None, name)))
                    except NotFound:
                        if name not in self._missing_reported:
                            self._missing_reported.add(name)
                            log.info("not found; no CA bundle to inject yet", kind=resource.kind, name=name)
                        break
                    self._missing_reported.discard(name)
                    ops = (
                        _conversion_ops(current, wanted, self.settings)
                        if resource is CUSTOM_RESOURCE_DEFINITIONS
                        else _webhook_ops(current, wanted)
                    )
                    if not ops:
                        break
                    version = current["metadata"]["resourceVersion"]
                    patch = [{"op": "test", "path": "/metadata/resourceVersion", "value": version}, *ops]
                    try:
                        await self.client.json_patch(resource, None, name, msgspec.json.encode(patch))
                    except (Invalid, Conflict):
                        continue
                    log.info("CA bundle injected", kind=resource.kind, name=name, changes=len(ops))
                    break

    def _injected_names(self, resource: Resource) -> tuple[str, ...]:
        if resource is CUSTOM_RESOURCE_DEFINITIONS:
            return CONVERSION_CRDS
        return (self.settings.configuration_name(_KIND_WORD[resource]),)


def _webhook_ops(configuration: dict[str, Any], wanted: str) -> list[dict[str, Any]]:
    return [
        {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": wanted}
        for i, webhook in enumerate(configuration.get("webhooks") or [])
        if (webhook.get("clientConfig") or {}).get("caBundle") != wanted
    ]


def _conversion_ops(crd: dict[str, Any], wanted: str, settings: CertSettings) -> list[dict[str, Any]]:
    """The CA bundle of a CRD's conversion webhook and, when it calls this controller's Service in
    another namespace (a Helm release elsewhere: a chart's crds/ are not templated), the namespace."""
    conversion = (crd.get("spec") or {}).get("conversion") or {}
    config = (conversion.get("webhook") or {}).get("clientConfig")
    if conversion.get("strategy") != "Webhook" or not isinstance(config, dict):
        return []
    at = "/spec/conversion/webhook/clientConfig"
    ops: list[dict[str, Any]] = []
    if config.get("caBundle") != wanted:
        ops.append({"op": "add", "path": f"{at}/caBundle", "value": wanted})
    service = config.get("service") or {}
    if service.get("name") == settings.service_name and service.get("namespace") != settings.namespace:
        ops.append({"op": "add", "path": f"{at}/service/namespace", "value": settings.namespace})
    return ops
