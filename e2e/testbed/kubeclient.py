"""The test-bed's one client for the Kubernetes API: asyncio over aiohttp (JSON in, JSON out).

Everything in e2e/ that talks to an API server uses it: the test-bed's agents,
the kubelet plugin, the tests. It authenticates with a kubeconfig (client
certificate or bearer token) or, in a pod, with the service account's token
file (re-read every minute: the kubelet rotates projected tokens).

Every request carries a timeout; watches use a read timeout a little longer
than the server-side ``timeoutSeconds`` they ask for.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
import tempfile
import time
from collections.abc import AsyncGenerator
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp
import yaml

Obj = dict[str, Any]

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
_TOKEN_REREAD_SECONDS = 60.0


class ApiError(Exception):
    """A non-2xx answer from the API server."""

    def __init__(self, status: int, body: Obj | str, method: str, path: str) -> None:
        self.status = status
        self.body = body
        self.reason = body.get("reason", "") if isinstance(body, dict) else ""
        message = body.get("message", "") if isinstance(body, dict) else str(body)[:300]
        super().__init__(f"{method} {path}: HTTP {status} {self.reason}: {message}")


def api_path(
    group_version: str,
    plural: str,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    """``api_path("v1", "pods", "ns", "p", "status")`` -> /api/v1/namespaces/ns/pods/p/status."""
    parts = ["/api/v1" if group_version == "v1" else f"/apis/{group_version}"]
    if namespace is not None:
        parts.append(f"namespaces/{namespace}")
    parts.append(plural)
    if name is not None:
        parts.append(name)
    if subresource is not None:
        parts.append(subresource)
    return "/".join(parts)


def _materialise(entry: dict[str, Any], key: str, base: Path) -> str | None:
    """Path of a kubeconfig file reference, writing ``<key>-data`` to a temp file if needed."""
    if entry.get(key):
        p = Path(entry[key])
        return str(p if p.is_absolute() else base / p)
    data = entry.get(f"{key}-data")
    if not data:
        return None
    fd, name = tempfile.mkstemp(prefix="testbed-kubeconfig-")
    with os.fdopen(fd, "wb") as f:
        f.write(base64.b64decode(data))
    return name


def load_kubeconfig(path: Path) -> tuple[str, ssl.SSLContext]:
    """Server URL and TLS context of the current context of a kubeconfig."""
    config = yaml.safe_load(path.read_text())
    current = config["current-context"]
    context = next(c["context"] for c in config["contexts"] if c["name"] == current)
    cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
    user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
    base = path.resolve().parent
    ca = _materialise(cluster, "certificate-authority", base)
    ctx = ssl.create_default_context(cafile=ca)
    cert = _materialise(user, "client-certificate", base)
    key = _materialise(user, "client-key", base)
    if cert is not None:
        ctx.load_cert_chain(cert, key)
    return str(cluster["server"]).rstrip("/"), ctx


def _bearer_token(path: Path) -> str | None:
    """The ``token`` of the current context's user, if it has one (else client certificates)."""
    config = yaml.safe_load(path.read_text())
    context = next(c["context"] for c in config["contexts"] if c["name"] == config["current-context"])
    user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
    token = user.get("token")
    return str(token) if token else None


def in_cluster_available() -> bool:
    """Whether this process runs in a pod with a service account token (see ``KubeClient.in_cluster``)."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and (SERVICE_ACCOUNT_DIR / "token").is_file()


class KubeClient:
    """Use as ``async with KubeClient.from_kubeconfig(path) as kube: ...``
    (or ``KubeClient.in_cluster()`` in a pod).

    ``token``: a fixed bearer token; ``token_file``: a bearer token read from
    that file, again every minute. Neither: the TLS context's client certificate.
    """

    def __init__(
        self,
        server: str,
        ssl_context: ssl.SSLContext,
        *,
        request_timeout: float = 30.0,
        user_agent: str = "dra-quota-testbed",
        token: str | None = None,
        token_file: Path | None = None,
    ) -> None:
        self.server = server
        self._ssl = ssl_context
        self._token = token
        self._token_file = token_file
        self._token_read_at = float("-inf")
        self.request_timeout = request_timeout
        self._user_agent = user_agent
        self._session: aiohttp.ClientSession | None = None

    @classmethod
    def from_kubeconfig(cls, path: Path, **kwargs: Any) -> KubeClient:
        server, ctx = load_kubeconfig(path)
        return cls(server, ctx, token=_bearer_token(path), **kwargs)

    @classmethod
    def in_cluster(cls, **kwargs: Any) -> KubeClient:
        """A client for the API server of the cluster this pod runs in, as its service account."""
        host = os.environ["KUBERNETES_SERVICE_HOST"]
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        if ":" in host:
            host = f"[{host}]"
        ctx = ssl.create_default_context(cafile=str(SERVICE_ACCOUNT_DIR / "ca.crt"))
        return cls(f"https://{host}:{port}", ctx, token_file=SERVICE_ACCOUNT_DIR / "token", **kwargs)

    async def __aenter__(self) -> KubeClient:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self._ssl, limit=64),
            headers={
                "User-Agent": self._user_agent,
                "Accept": "application/json",
                **({"Authorization": f"Bearer {self._token}"} if self._token else {}),
            },
        )
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("KubeClient used outside 'async with'")
        return self._session

    async def _refresh_token(self) -> None:
        """With a token file: (re-)read it when the last read is a minute old."""
        if self._token_file is None or time.monotonic() - self._token_read_at < _TOKEN_REREAD_SECONDS:
            return
        token = (await asyncio.to_thread(self._token_file.read_text)).strip()
        self.session.headers["Authorization"] = f"Bearer {token}"
        self._token_read_at = time.monotonic()

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: Obj | list[Obj] | None = None,
        content_type: str | None = None,
        timeout_seconds: float | None = None,
    ) -> Obj:
        await self._refresh_token()
        headers = {}
        data = None
        if body is not None:
            data = json.dumps(body)
            headers["Content-Type"] = content_type or "application/json"
        async with self.session.request(
            method,
            self.server + path,
            params=params,
            data=data,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=timeout_seconds or self.request_timeout),
        ) as resp:
            text = await resp.text()
            parsed: Any
            try:
                parsed = json.loads(text) if text else {}
            except ValueError:
                parsed = text
            if resp.status >= 400:
                raise ApiError(resp.status, parsed, method, path)
            return parsed if isinstance(parsed, dict) else {"raw": parsed}

    async def get(self, path: str, params: dict[str, str] | None = None) -> Obj:
        return await self.request("GET", path, params=params)

    async def get_or_none(self, path: str) -> Obj | None:
        try:
            return await self.get(path)
        except ApiError as err:
            if err.status == 404:
                return None
            raise

    async def list_all(
        self, path: str, params: dict[str, str] | None = None, page_size: int = 500
    ) -> tuple[list[Obj], str]:
        """All items (paged) and the list's resourceVersion."""
        items: list[Obj] = []
        query = dict(params or {})
        query["limit"] = str(page_size)
        while True:
            page = await self.get(path, query)
            items.extend(page.get("items") or [])
            cont = page.get("metadata", {}).get("continue")
            if not cont:
                return items, str(page.get("metadata", {}).get("resourceVersion", ""))
            query["continue"] = cont

    async def create(self, path: str, body: Obj) -> Obj:
        return await self.request("POST", path, body=body)

    async def patch(self, path: str, body: Obj | list[Obj], content_type: str = MERGE_PATCH) -> Obj:
        return await self.request("PATCH", path, body=body, content_type=content_type)

    async def apply(self, path: str, body: Obj, field_manager: str, force: bool = True) -> Obj:
        """Server-side apply (the body is JSON, which is valid YAML)."""
        params = {"fieldManager": field_manager, "force": "true" if force else "false"}
        return await self.request("PATCH", path, params=params, body=body, content_type=APPLY_PATCH)

    async def delete(self, path: str, body: Obj | None = None, params: dict[str, str] | None = None) -> Obj:
        return await self.request("DELETE", path, body=body, params=params)

    async def watch(
        self, path: str, params: dict[str, str], timeout_seconds: int = 300
    ) -> AsyncGenerator[Obj, None]:
        """Yield the events of one watch request until the server ends it.

        Raises ApiError for an HTTP error status (410 included) and the usual
        aiohttp/timeout errors when the connection breaks.
        """
        query = dict(params)
        query.update(watch="true", allowWatchBookmarks="true", timeoutSeconds=str(timeout_seconds))
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=timeout_seconds + 30)
        await self._refresh_token()
        async with self.session.get(self.server + path, params=query, timeout=timeout) as resp:
            if resp.status >= 400:
                text = await resp.text()
                try:
                    parsed: Obj | str = json.loads(text)
                except ValueError:
                    parsed = text
                raise ApiError(resp.status, parsed, "WATCH", path)
            buffer = b""
            async for chunk in resp.content.iter_any():
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
            if buffer.strip():
                yield json.loads(buffer)
