"""Where the API server is and how to authenticate: kubeconfig or in-cluster.

kubeconfig files with static credentials are read by `kubeconfig`, the others
by kubernetes_asyncio's loader (exec and auth-provider plugins); this module
turns either into what the aiohttp client needs: a server URL, an ``ssl.SSLContext`` and a
source of ``Authorization`` header values that refreshes itself.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from reconciler.kube.errors import ConfigError
from reconciler.kube.kubeconfig import StaticKubeconfig, read_static, static_ssl_context

__all__ = [
    "SERVICE_ACCOUNT_DIR",
    "ClusterConfig",
    "FileTokenSource",
    "StaticToken",
    "TokenSource",
    "load_in_cluster",
    "load_kubeconfig",
]

log = structlog.get_logger(__name__)

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


class TokenSource(Protocol):
    async def authorization(self) -> str | None:
        """The ``Authorization`` header value to send now, or None."""
        ...

    def invalidate(self) -> None:
        """The server answered 401: load the credentials afresh next time."""
        ...


@dataclass(frozen=True, slots=True)
class StaticToken:
    header: str | None

    async def authorization(self) -> str | None:
        return self.header

    def invalidate(self) -> None:
        pass


class FileTokenSource:
    """A bearer token read from a file and re-read every ``refresh`` seconds.

    Service-account tokens are rotated by the kubelet (bound tokens last about
    an hour), so the file is re-read rather than cached for the process life.
    """

    def __init__(self, path: str, *, refresh: float = 60.0) -> None:
        self._path = path
        self._refresh = refresh
        self._header: str | None = None
        self._read_at = -float("inf")

    def invalidate(self) -> None:
        self._read_at = -float("inf")

    def _read(self) -> str:
        with open(self._path, encoding="utf-8") as f:
            return f.read().strip()

    async def authorization(self) -> str | None:
        now = time.monotonic()
        if self._header is None or now - self._read_at >= self._refresh:
            try:
                token = await asyncio.to_thread(self._read)
            except OSError as exc:
                if self._header is None:
                    raise ConfigError(f"cannot read the token file {self._path}: {exc}") from exc
                log.warning(
                    "token file unreadable, keeping the previous token", path=self._path, error=str(exc)
                )
            else:
                self._header = f"Bearer {token}"
            self._read_at = now
        return self._header


class _KubeconfigTokenSource:
    """Tokens from a kubeconfig user; exec plugins are re-run when their token expires."""

    def __init__(self, loader: Any, configuration: Any, *, refresh: float = 60.0) -> None:
        self._loader = loader
        self._configuration = configuration
        self._refresh = refresh
        self._checked_at = time.monotonic()
        self._lock = asyncio.Lock()

    def invalidate(self) -> None:
        self._checked_at = -float("inf")
        if hasattr(self._loader, "exec_plugin_expiry"):
            del self._loader.exec_plugin_expiry  # the loader trusts it; the server just did not

    def _current(self) -> str | None:
        value = self._configuration.api_key.get("BearerToken")
        return str(value) if value else None

    async def authorization(self) -> str | None:
        user = getattr(self._loader, "_user", None)
        if user is None or "exec" not in user:
            return self._current()
        if time.monotonic() - self._checked_at >= self._refresh:
            async with self._lock:
                if time.monotonic() - self._checked_at >= self._refresh:
                    # Returns at once while the plugin's token has not expired.
                    await self._loader.load_from_exec_plugin()
                    if getattr(self._loader, "token", None):
                        self._configuration.api_key["BearerToken"] = self._loader.token
                    self._checked_at = time.monotonic()
        return self._current()


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    server: str
    ssl: ssl.SSLContext | bool | None
    token_source: TokenSource
    server_hostname: str | None = None


def _ssl_context(
    ca_file: str | None, cert_file: str | None, key_file: str | None, verify: bool
) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca_file) if verify else ssl.create_default_context()
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cert_file:
        context.load_cert_chain(cert_file, key_file)
    return context


async def load_kubeconfig(path: str | None = None, context: str | None = None) -> ClusterConfig:
    """The cluster of a kubeconfig file (``$KUBECONFIG`` or ~/.kube/config when ``path`` is None).

    Static credentials are read by `kubeconfig.read_static`; a user with a plugin goes to
    kubernetes_asyncio's loader (a little blocking I/O on the loop, done once at start-up).
    """
    if path is None:
        # Both readers merge a KUBECONFIG list ("a:b") as kubectl does.
        path = os.environ.get("KUBECONFIG") or os.path.join(os.environ.get("HOME", ""), ".kube", "config")
    try:
        static = await asyncio.to_thread(read_static, path, context)
    except OSError as exc:
        raise ConfigError(f"cannot read kubeconfig {path}: {exc}") from exc
    if static is not None:
        return await _static_cluster(static, path)
    return await _loaded_cluster(path, context)


async def _static_cluster(static: StaticKubeconfig, path: str) -> ClusterConfig:
    context_ssl: ssl.SSLContext | None = None
    if static.server.startswith("https://"):
        try:
            context_ssl = await asyncio.to_thread(static_ssl_context, static)
        except (OSError, ssl.SSLError, ValueError) as exc:
            raise ConfigError(f"kubeconfig {path}: bad TLS material: {exc}") from exc
    tokens: TokenSource = StaticToken(static.authorization)
    if static.token_file is not None:
        tokens = FileTokenSource(static.token_file)
        await tokens.authorization()  # fail now, not on the first request
    return ClusterConfig(static.server, context_ssl, tokens, static.tls_server_name)


async def _loaded_cluster(path: str, context: str | None) -> ClusterConfig:
    from kubernetes_asyncio.client import Configuration
    from kubernetes_asyncio.config import ConfigException, load_kube_config

    configuration = Configuration()
    try:
        loader = await load_kube_config(
            config_file=path, context=context, client_configuration=configuration, persist_config=False
        )
    except (ConfigException, OSError, KeyError, AssertionError) as exc:
        message = f"cannot load kubeconfig {path} (context {context or 'current'}): {exc}"
        if isinstance(exc, FileNotFoundError) and not _temporary_directory_usable():
            message += (
                "; the loader writes the kubeconfig's inline *-data certificates to temporary files: "
                "give the controller a writable temporary directory (an emptyDir at /tmp, "
                "docker run --tmpfs /tmp) or reference the certificate files by path"
            )
        raise ConfigError(message) from exc
    server = str(configuration.host).rstrip("/")
    context_ssl: ssl.SSLContext | None = None
    if server.startswith("https://"):
        try:
            context_ssl = await asyncio.to_thread(
                _ssl_context,
                configuration.ssl_ca_cert,
                configuration.cert_file,
                configuration.key_file,
                bool(configuration.verify_ssl),
            )
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"kubeconfig {path}: bad TLS material: {exc}") from exc
    return ClusterConfig(
        server=server,
        ssl=context_ssl,
        token_source=_KubeconfigTokenSource(loader, configuration),
        server_hostname=getattr(configuration, "tls_server_name", None) or None,
    )


def _temporary_directory_usable() -> bool:
    try:
        tempfile.gettempdir()
    except FileNotFoundError:
        return False
    return True


async def load_in_cluster(
    *, environ: Mapping[str, str] | None = None, account_dir: str = SERVICE_ACCOUNT_DIR
) -> ClusterConfig:
    """The cluster a pod runs in: service host/port from the environment, service-account token and CA."""
    env = os.environ if environ is None else environ
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise ConfigError("not in a cluster: KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT unset")
    if ":" in host:  # IPv6
        host = f"[{host}]"
    token = FileTokenSource(os.path.join(account_dir, "token"))
    await token.authorization()  # fail now, not on the first request
    try:
        context = await asyncio.to_thread(_ssl_context, os.path.join(account_dir, "ca.crt"), None, None, True)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load the service account CA in {account_dir}: {exc}") from exc
    return ClusterConfig(server=f"https://{host}:{port}", ssl=context, token_source=token)
