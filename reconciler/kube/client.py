"""The HTTP client for the Kubernetes API: one aiohttp session, typed errors, timeouts everywhere.

Everything that talks to the API server goes through ``KubeClient``; tests
point its plain constructor at a local HTTP server.
"""

from __future__ import annotations

import asyncio
import ssl as _ssl
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping
from typing import Any

import aiohttp
import structlog

from reconciler.api.resources import Resource
from reconciler.kube.auth import ClusterConfig, StaticToken, TokenSource, load_in_cluster, load_kubeconfig
from reconciler.kube.backoff import Backoff
from reconciler.kube.errors import ServerError, TooManyRequests, TransportError, Unauthorized, api_error

__all__ = ["KubeClient"]

log = structlog.get_logger(__name__)

_IDEMPOTENT = frozenset({"GET", "HEAD"})
_READ_CHUNK = 256 * 1024
_MAX_RETRY_AFTER = 60.0
_RETRY_BACKOFF = Backoff(initial=0.2, maximum=5.0)


class KubeClient:
    """A small async client for the Kubernetes API.

    ``request`` returns the body of a 2xx answer and raises the error tree of
    ``reconciler.kube.errors`` otherwise. GETs are retried (transport errors,
    5xx, 429 honouring Retry-After) with jittered backoff, at most
    ``retry_attempts`` tries; writes never are: the caller decides. A 401
    makes the credentials reload (service-account token file, exec plugin)
    and the request is sent once more, whatever its verb.
    """

    def __init__(
        self,
        server: str,
        *,
        ssl: _ssl.SSLContext | bool | None = None,
        token: str | None = None,
        session: aiohttp.ClientSession | None = None,
        token_source: TokenSource | None = None,
        server_hostname: str | None = None,
        retry_attempts: int = 4,
        retry_backoff: Backoff = _RETRY_BACKOFF,
        connect_timeout: float = 10.0,
        user_agent: str = "dra-quota-reconciler",
    ) -> None:
        if token is not None and token_source is not None:
            raise ValueError("give token or token_source, not both")
        self.server = server.rstrip("/")
        self._ssl: _ssl.SSLContext | bool | None = ssl
        self._tokens: TokenSource = token_source or StaticToken(f"Bearer {token}" if token else None)
        self._session = session
        self._owns_session = session is None
        self._server_hostname = server_hostname
        self._retry_attempts = max(1, retry_attempts)
        self._retry_backoff = retry_backoff
        self._connect_timeout = connect_timeout
        self._user_agent = user_agent
        self._closed = False

    # --- construction -------------------------------------------------------------------------

    @classmethod
    def _from_config(cls, config: ClusterConfig, **kwargs: Any) -> KubeClient:
        return cls(
            config.server,
            ssl=config.ssl,
            token_source=config.token_source,
            server_hostname=config.server_hostname,
            **kwargs,
        )

    @classmethod
    async def from_kubeconfig(
        cls, path: str | None = None, context: str | None = None, **kwargs: Any
    ) -> KubeClient:
        """A client for a kubeconfig's cluster (``$KUBECONFIG`` or ~/.kube/config by default)."""
        return cls._from_config(await load_kubeconfig(path, context), **kwargs)

    @classmethod
    async def in_cluster(cls, **kwargs: Any) -> KubeClient:
        """A client for the cluster this pod runs in (service-account token, re-read periodically)."""
        return cls._from_config(await load_in_cluster(), **kwargs)

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the session (if this client made it). Idempotent."""
        self._closed = True
        if self._session is not None and self._owns_session:
            session, self._session = self._session, None
            await session.close()

    def _get_session(self) -> aiohttp.ClientSession:
        if self._closed:
            raise RuntimeError("KubeClient is closed")
        if self._session is None:
            # No connection limit: every watch holds a connection for minutes.
            connector = aiohttp.TCPConnector(limit=0, ssl=self._ssl if self._ssl is not None else True)
            self._session = aiohttp.ClientSession(connector=connector)
        return self._session

    async def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": self._user_agent}
        authorization = await self._tokens.authorization()
        if authorization:
            headers["Authorization"] = authorization
        if content_type is not None:
            headers["Content-Type"] = content_type
        return headers

    def _extra(self) -> dict[str, Any]:
        return {"server_hostname": self._server_hostname} if self._server_hostname else {}

    # --- plain requests -----------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: bytes | None = None,
        content_type: str = "application/json",
        timeout: float = 30.0,  # noqa: ASYNC109 (a per-request HTTP timeout, not a deadline)
    ) -> bytes:
        """The body of a 2xx answer; raises the error tree otherwise. GETs are retried, writes are not."""
        method = method.upper()
        attempts = self._retry_attempts if method in _IDEMPOTENT else 1
        delays: Iterator[float] = self._retry_backoff.delays()
        attempt = 1
        reauthenticated = False
        while True:
            try:
                return await self._request_once(method, path, params, body, content_type, timeout)
            except Unauthorized:
                # Rejected before any processing: safe to repeat for any verb, once, with new credentials.
                if reauthenticated:
                    raise
                reauthenticated = True
                self._tokens.invalidate()
                log.info("401 Unauthorized; retrying with fresh credentials", method=method, path=path)
            except (TransportError, ServerError, TooManyRequests) as exc:
                if attempt >= attempts:
                    raise
                delay = next(delays)
                if isinstance(exc, TooManyRequests) and exc.retry_after is not None:
                    delay = max(delay, min(exc.retry_after, _MAX_RETRY_AFTER))
                log.info(
                    "retrying request", method=method, path=path, attempt=attempt, delay=delay, error=str(exc)
                )
                await asyncio.sleep(delay)
                attempt += 1

    async def _request_once(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        body: bytes | None,
        content_type: str,
        timeout: float,  # noqa: ASYNC109
    ) -> bytes:
        session = self._get_session()
        headers = await self._headers(content_type if body is not None else None)
        client_timeout = aiohttp.ClientTimeout(
            total=timeout, sock_connect=min(self._connect_timeout, timeout)
        )
        try:
            async with session.request(
                method,
                self.server + path,
                params=params,
                data=body,
                headers=headers,
                timeout=client_timeout,
                allow_redirects=False,
                **self._extra(),
            ) as resp:
                data = await resp.read()
                if 200 <= resp.status < 300:
                    return data
                raise api_error(resp.status, data, retry_after_header=resp.headers.get("Retry-After"))
        except (aiohttp.ClientError, TimeoutError) as exc:
            if isinstance(exc, aiohttp.InvalidURL):
                raise
            raise TransportError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> bytes:
        return await self.request("GET", path, params=params)

    async def create(self, resource: Resource, namespace: str | None, body: bytes) -> bytes:
        return await self.request(
            "POST", resource.list_path(namespace if resource.namespaced else None), body=body
        )

    async def merge_patch(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        patch: bytes,
        *,
        subresource: str | None = None,
    ) -> bytes:
        """JSON merge patch; put ``metadata.resourceVersion`` in it for a precondition (409 on mismatch)."""
        return await self._patch(resource.item_path(namespace, name, subresource), patch, "merge-patch")

    async def json_patch(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        patch: bytes,
        *,
        subresource: str | None = None,
    ) -> bytes:
        """JSON patch (RFC 6902); a failed ``test`` op answers 422 Invalid."""
        return await self._patch(resource.item_path(namespace, name, subresource), patch, "json-patch")

    async def _patch(self, path: str, patch: bytes, kind: str) -> bytes:
        return await self.request("PATCH", path, body=patch, content_type=f"application/{kind}+json")

    async def delete(
        self, resource: Resource, namespace: str | None, name: str, *, propagation: str | None = None
    ) -> None:
        """Delete; NotFound is raised, callers decide whether that is fine."""
        params = {"propagationPolicy": propagation} if propagation else None
        await self.request("DELETE", resource.item_path(namespace, name), params=params)

    # --- streams ------------------------------------------------------------------------------

    async def stream_lines(
        self,
        path: str,
        params: Mapping[str, str],
        *,
        connect_timeout: float,
        read_timeout: float,
        on_open: Callable[[], None] | None = None,
    ) -> AsyncGenerator[bytes, None]:
        """The complete, non-blank lines of a streaming GET (a watch).

        The HTTP status is checked before anything is yielded (non-2xx raises
        the error tree: 410 is ``Gone``). Lines are split here, without any
        length limit. A partial last line (the stream was cut mid-object) is
        dropped and logged; a connection broken mid-body raises
        ``TransportError``. Use it under ``contextlib.aclosing`` so an
        abandoned stream closes its connection at once. ``on_open`` is called
        once the server has answered 2xx (before any line).
        """
        session = self._get_session()
        headers = await self._headers(None)
        client_timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=connect_timeout, sock_read=read_timeout
        )
        resp: aiohttp.ClientResponse | None = None
        try:
            try:
                resp = await session.get(
                    self.server + path,
                    params=params,
                    headers=headers,
                    timeout=client_timeout,
                    allow_redirects=False,
                    **self._extra(),
                )
                if not 200 <= resp.status < 300:
                    if resp.status == 401:
                        self._tokens.invalidate()
                    data = await resp.read()
                    raise api_error(resp.status, data, retry_after_header=resp.headers.get("Retry-After"))
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise TransportError(f"GET {path} (stream): {type(exc).__name__}: {exc}") from exc
            if on_open is not None:
                on_open()
            buffer = bytearray()
            while True:
                try:
                    chunk = await resp.content.readany()
                except (aiohttp.ClientError, TimeoutError) as exc:
                    raise TransportError(f"GET {path} (stream): {type(exc).__name__}: {exc}") from exc
                if not chunk:
                    break
                scan = len(buffer)
                buffer += chunk
                end = buffer.find(b"\n", scan)
                if end < 0:
                    continue
                start = 0
                while end >= 0:
                    line = bytes(buffer[start:end])
                    start = end + 1
                    if line.strip():
                        yield line
                    end = buffer.find(b"\n", start)
                del buffer[:start]
            if buffer.strip():
                log.warning(
                    "stream ended mid-line; partial line dropped", path=path, partial_bytes=len(buffer)
                )
        finally:
            if resp is not None:
                # close, not release: an unfinished body must not go back to the pool.
                resp.close()
