"""The HTTPS server of the admission webhooks (AdmissionReview v1), on every replica.

It listens once ``tls.crt`` and ``tls.key`` are in the certificate directory (written by the
internal certificate manager, or mounted from a cert-manager Secret) and checks them every
``reload_interval`` seconds: new contents are loaded into the same TLS context, so new
connections get the new certificate without a restart. TLS 1.2 is the minimum. A request is
routed by path to its rule (``handlers``); a rule that fails unexpectedly answers a 500 in the
AdmissionReview (the API server then applies the webhook's failurePolicy). ``/convert`` answers
the CRDs' ConversionReviews (Kueue's objects between v1beta1 and v1beta2, ``reconciler.conversion``).
"""

from __future__ import annotations

import asyncio
import hashlib
import ssl
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import structlog
from aiohttp import web

from reconciler.admission.queue_rules import JobPolicy
from reconciler.admission.review import BadReviewError, Verdict, decode_review, encode_response
from reconciler.conversion import convert_review

from .certmanager import CERT_FILE, KEY_FILE
from .handlers import Lookups, Route, describe, handle, routes

__all__ = ["CONVERSION_PATH", "MAX_BODY", "WebhookServer", "make_app"]

log = structlog.get_logger(__name__)

MAX_BODY = 16 * 1024 * 1024  # an AdmissionReview carries the object and its old version
CONVERSION_PATH = "/convert"  # the CRDs' spec.conversion.webhook path, as Kueue serves it


async def _conversion(request: web.Request) -> web.Response:
    """A ConversionReview answered; a refusal (a Failure result naming the field) is logged."""
    body, outcome = convert_review(await request.read())
    if outcome.failure is not None:
        log.warning("conversion refused", uid=outcome.uid, error=outcome.failure)
    else:
        log.debug("conversion", uid=outcome.uid, desired=outcome.desired, objects=outcome.objects)
    return web.Response(body=body, content_type="application/json")


def make_app(policy: JobPolicy, lookups: Lookups, served: tuple[Route, ...] | None = None) -> web.Application:
    def endpoint(route: Route) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def review(request: web.Request) -> web.Response:
            try:
                admission = decode_review(await request.read())
            except BadReviewError as err:
                # One line, no traceback: a bad body is the sender's error, not ours.
                log.warning(
                    "webhook request rejected: its body cannot be decoded", webhook=route.name, error=str(err)
                )
                return web.Response(status=400, text=f"{err}\n")
            try:
                verdict = await handle(route, admission, policy, lookups)
            except Exception as err:
                log.exception("webhook rule failed", webhook=route.name, uid=admission.uid)
                verdict = Verdict.fail(f"internal error in {route.name}: {err}")
            log.debug(
                "admission review",
                webhook=route.name,
                operation=admission.operation,
                object=f"{admission.namespace}/{admission.name}",
                **describe(verdict),
            )
            body = encode_response(admission.uid, verdict)
            return web.Response(body=body, content_type="application/json")

        return review

    app = web.Application(client_max_size=MAX_BODY)
    for route in routes() if served is None else served:
        app.router.add_post(route.path, endpoint(route))
    app.router.add_post(CONVERSION_PATH, _conversion)
    return app


def _read_pair(cert_dir: Path) -> tuple[bytes, bytes] | None:
    """tls.crt and tls.key; None while either is missing."""
    try:
        return (cert_dir / CERT_FILE).read_bytes(), (cert_dir / KEY_FILE).read_bytes()
    except OSError:
        return None


def _fingerprint(pair: tuple[bytes, bytes]) -> str:
    return hashlib.sha256(pair[0] + b"\0" + pair[1]).hexdigest()


def _load(pair: tuple[bytes, bytes]) -> ssl.SSLContext:
    """A new server context for a certificate and key read once (a copy in a private directory,
    since ``ssl`` loads from files). A context in use is never loaded into: between its new
    certificate and its new key, a handshake would get the one with the other's partner."""
    with tempfile.TemporaryDirectory(prefix="webhook-cert-") as directory:
        cert, key = Path(directory) / CERT_FILE, Path(directory) / KEY_FILE
        cert.write_bytes(pair[0])
        key.touch(mode=0o600)
        key.write_bytes(pair[1])
        context = tls_context()
        context.load_cert_chain(cert, key)
        return context


def tls_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


@dataclass
class WebhookServer:
    """Serves ``app`` on ``host:port`` over TLS from ``cert_dir``; ``run`` until cancelled."""

    app: web.Application
    host: str | None
    port: int
    cert_dir: Path
    reload_interval: float = 10.0
    serving: asyncio.Event = field(default_factory=asyncio.Event)
    bound_port: int | None = None
    _context: ssl.SSLContext | None = None  # the listening socket's; its SNI callback picks _current
    _current: ssl.SSLContext | None = None  # the newest pair's, handed to every new handshake
    _loaded: str | None = None

    def not_serving_reason(self) -> str | None:
        if self.serving.is_set():
            return None
        return f"webhook server waiting for {CERT_FILE} and {KEY_FILE} in {self.cert_dir}"

    async def run(self) -> None:
        reported = False
        while not await self.reload():
            if not reported:
                log.info("webhook server waiting for its certificate", directory=str(self.cert_dir))
                reported = True
            await asyncio.sleep(min(self.reload_interval, 0.5))
        runner = web.AppRunner(self.app, handle_signals=False, access_log=None, shutdown_timeout=2.0)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self.port, ssl_context=self._context, reuse_address=True)
            try:
                await site.start()
            except OSError as err:
                where = f"{self.host or ''}:{self.port}"
                raise OSError(
                    err.errno,
                    f"cannot listen on {where} for the admission webhooks ({err.strerror}); "
                    "free the port or choose another with --webhook-bind-address",
                ) from err
            addresses = runner.addresses
            self.bound_port = int(addresses[0][1]) if addresses else self.port
            self.serving.set()
            log.info(
                "serving admission webhooks",
                port=self.bound_port,
                paths=[r.canonical for r in self.app.router.resources()],
            )
            while True:
                await asyncio.sleep(self.reload_interval)
                await self.reload()
        finally:
            self.serving.clear()
            await runner.cleanup()

    async def reload(self) -> bool:
        """Load the certificate (again) if its files are there and changed; True when it did."""
        pair = await asyncio.to_thread(_read_pair, self.cert_dir)
        if pair is None or _fingerprint(pair) == self._loaded:
            return False
        try:
            context = await asyncio.to_thread(_load, pair)
        except (OSError, ssl.SSLError) as err:
            log.warning("webhook certificate cannot be loaded; keeping what is loaded", error=str(err))
            return False
        self._current = context
        if self._context is None:
            self._context = context
            context.sni_callback = self._pick
        else:
            log.info("webhook certificate reloaded", directory=str(self.cert_dir))
        self._loaded = _fingerprint(pair)
        return True

    def _pick(self, connection: ssl.SSLObject, server_name: str | None, context: ssl.SSLContext) -> None:
        """Every handshake (with or without a server name) gets the newest loaded pair."""
        if self._current is not None and self._current is not context:
            connection.context = self._current
