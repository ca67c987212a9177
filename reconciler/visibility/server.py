"""The visibility API's HTTPS server: discovery, pending workloads, behind the front proxy's identity.

Requests come from the API server's aggregator (an APIService points at this port): each is
authenticated by the front proxy's client certificate and user headers and authorized by a
SubjectAccessReview (``access.py``), then answered from the leader's in-memory queues through a
``PendingSource`` the controller publishes while it runs (no API read per request). A replica
that does not lead, or a leader whose queues are not rebuilt yet, answers 503 with a ``Status``
saying so. The request-header CA is read from ``kube-system/extension-apiserver-authentication``
at start (again every 10 s until it is found, then every minute) and loaded into the server's
TLS context, which asks clients for a certificate and verifies any that is sent.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog
from aiohttp import web

from reconciler.kube.client import KubeClient
from reconciler.kube.reviews import ApiReviewer, ReviewedUser
from reconciler.observability.server import Server, start_server

from . import discovery, dryrun
from .access import (
    AUTHENTICATION_CONFIGMAP,
    Authorizer,
    Refusal,
    RequestHeaderConfig,
    authenticate,
    common_name,
)
from .summary import (
    GROUP,
    VERSIONS,
    PageError,
    PendingEntry,
    cluster_queue_summary,
    local_queue_summary,
    parse_page,
)

__all__ = ["PendingSource", "Published", "VisibilityServer", "serve_visibility", "visibility_app"]

log = structlog.get_logger(__name__)

NOT_LEADING = (
    "this replica does not lead: only the elected leader holds the pending queues "
    "(ask again; the APIService's Service may reach another replica)"
)
NOT_READY = "the controller is rebuilding its queues from the API server; ask again in a moment"
DRY_RUN_BUSY = "a dry run is already running on this replica; ask again in a moment"
DRY_RUN_TIMEOUT = 60.0


class PendingSource(Protocol):
    @property
    def ready(self) -> bool:
        """False while the queues are being rebuilt from the API (after start)."""
        ...

    def pending(self, cluster_queue: str) -> list[PendingEntry] | None:
        """The ClusterQueue's pending workloads in queue order; None when there is no such queue."""
        ...

    def cluster_queue_of(self, namespace: str, local_queue: str) -> str | None:
        """The LocalQueue's ClusterQueue; None when there is no such LocalQueue."""
        ...


@dataclass
class Published:
    """What the controller publishes: its queues while it leads and is ready, else why not; and
    the dry run (any replica answers it: it reads the API, not the leader's queues)."""

    source: PendingSource | None = None
    unavailable: str = NOT_LEADING
    requestheader: RequestHeaderConfig | None = None
    dry_run: dryrun.DryRunner | None = None


_USER = web.RequestKey("visibility.user", ReviewedUser)


def _json(body: dict[str, Any], status: int = 200) -> web.Response:
    return web.Response(status=status, text=json.dumps(body), content_type="application/json")


def _refuse(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> web.Response:
    return _json(discovery.status(code, reason, message, details), code)


def _forbidden(user: ReviewedUser, path: str, kind: str, attributes: dict[str, str]) -> web.Response:
    """Kubernetes' words for a request its authorizer denied."""
    if kind == "nonResourceAttributes":
        return _refuse(403, "Forbidden", f'forbidden: User "{user.username}" cannot get path "{path}"')
    group, verb = attributes["group"], attributes["verb"]
    resource = attributes["resource"] + (
        f"/{attributes['subresource']}" if "subresource" in attributes else ""
    )
    namespace = attributes.get("namespace")
    where = f'in the namespace "{namespace}"' if namespace is not None else "at the cluster scope"
    name = attributes.get("name", "")
    subject = f'{attributes["resource"]}.{group} "{name}"' if name else f"{attributes['resource']}.{group}"
    message = (
        f'{subject} is forbidden: User "{user.username}" cannot {verb} resource "{resource}" in API '
        f'group "{group}" {where}'
    )
    return _refuse(403, "Forbidden", message, {"name": name, "group": group, "kind": attributes["resource"]})


class _Api:
    """The handlers: each request authenticated (middleware), authorized, then answered."""

    def __init__(self, published: Published, authorizer: Authorizer) -> None:
        self.published = published
        self.authorizer = authorizer
        self.dry_running = asyncio.Lock()

    @web.middleware
    async def authenticated(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        transport = request.transport
        peercert = transport.get_extra_info("peercert") if transport is not None else None
        config = self.published.requestheader
        user = authenticate(
            config, common_name(peercert), request.headers, lambda h: request.headers.getall(h, [])
        )
        if isinstance(user, Refusal):
            log.info("visibility: request not authenticated", path=request.path, why=user.message)
            return _refuse(user.code, user.reason, user.message)
        request[_USER] = user
        try:
            return await handler(request)
        except web.HTTPNotFound:
            return _refuse(404, "NotFound", "the server could not find the requested resource")
        except web.HTTPMethodNotAllowed:
            return _refuse(
                405, "MethodNotAllowed", f"the server does not allow this method on {request.path}"
            )

    async def refusal(
        self, request: web.Request, kind: str, attributes: dict[str, str]
    ) -> web.Response | None:
        """None when the user may; else the answer (403, or 500 when the review failed)."""
        user = request[_USER]
        try:
            decision = await self.authorizer.decide(user, kind, attributes)
        except Exception as err:
            log.warning("visibility: the SubjectAccessReview failed", user=user.username, error=str(err))
            return _refuse(500, "InternalError", f"authorization of user {user.username} failed: {err}")
        return None if decision.allowed else _forbidden(user, request.path, kind, attributes)

    async def document(self, request: web.Request, body: dict[str, Any]) -> web.Response:
        refusal = await self.refusal(request, "nonResourceAttributes", {"path": request.path, "verb": "get"})
        return refusal or _json(body)

    async def apis(self, request: web.Request) -> web.Response:
        aggregated = discovery.aggregated_discovery(request.headers.get("Accept", ""))
        if aggregated is None:
            return await self.document(request, discovery.api_group_list())
        body, content_type = aggregated
        refusal = await self.refusal(request, "nonResourceAttributes", {"path": request.path, "verb": "get"})
        if refusal is not None:
            return refusal
        response = _json(body)
        response.headers["Content-Type"] = content_type
        return response

    async def group(self, request: web.Request) -> web.Response:
        if request.match_info["group"] not in discovery.GROUPS:
            raise web.HTTPNotFound()
        return await self.document(request, discovery.api_group(request.match_info["group"]))

    async def version(self, request: web.Request) -> web.Response:
        group, ver = request.match_info["group"], request.match_info["version"]
        if ver not in discovery.GROUPS.get(group, ()):
            raise web.HTTPNotFound()
        if group == dryrun.WHATIF_GROUP:
            return await self.document(request, discovery.whatif_resource_list())
        return await self.document(request, discovery.resource_list(ver))

    async def openapi_v2(self, request: web.Request) -> web.Response:
        return await self.document(request, discovery.openapi_v2())

    async def openapi_v3(self, request: web.Request) -> web.Response:
        return await self.document(request, {"paths": {}})

    async def pending(self, request: web.Request) -> web.Response:
        info = request.match_info
        ver, name, namespace = info["version"], info["name"], info.get("namespace")
        if info["group"] != GROUP or ver not in VERSIONS:
            raise web.HTTPNotFound()
        resource = "localqueues" if namespace is not None else "clusterqueues"
        attributes = {"verb": "get", "group": GROUP, "version": ver, "resource": resource}
        attributes |= {"subresource": "pendingworkloads", "name": name}
        if namespace is not None:
            attributes["namespace"] = namespace
        refusal = await self.refusal(request, "resourceAttributes", attributes)
        if refusal is not None:
            return refusal
        try:
            page = parse_page(request.query)
        except PageError as err:
            return _refuse(400, "BadRequest", str(err))
        source = self.published.source
        if source is None:
            return _refuse(503, "ServiceUnavailable", self.published.unavailable)
        if not source.ready:
            return _refuse(503, "ServiceUnavailable", NOT_READY)
        if namespace is None:
            listed = source.pending(name)
            if listed is None:
                return _json(discovery.not_found("clusterqueue", name), 404)
            return _json(cluster_queue_summary(listed, page, ver))
        cluster_queue = source.cluster_queue_of(namespace, name)
        if cluster_queue is None:
            return _json(discovery.not_found("localqueue", name), 404)
        members = source.pending(cluster_queue) or []
        return _json(local_queue_summary(members, namespace, name, page, ver))

    async def what_if(self, request: web.Request) -> web.Response:
        """The dry run: one at a time per replica (it reads every queue object and Workload)."""
        info = request.match_info
        namespace = info["namespace"]
        if info["group"] != dryrun.WHATIF_GROUP or info["version"] != dryrun.VERSION:
            raise web.HTTPNotFound()
        attributes = {"verb": "create", "group": dryrun.WHATIF_GROUP, "version": dryrun.VERSION}
        attributes |= {"resource": dryrun.RESOURCE, "namespace": namespace}
        refusal = await self.refusal(request, "resourceAttributes", attributes)
        if refusal is not None:
            return refusal
        runner = self.published.dry_run
        if runner is None:
            return _refuse(503, "ServiceUnavailable", "this controller does not serve dry runs")
        try:
            asked, objects = dryrun.parse_request(await request.read(), namespace)
        except dryrun.RequestError as err:
            return _refuse(422, "Invalid", f"{dryrun.KIND}: {err}")
        if self.dry_running.locked():
            response = _refuse(429, "TooManyRequests", DRY_RUN_BUSY)
            response.headers["Retry-After"] = "2"
            return response
        async with self.dry_running:
            try:
                answer = await asyncio.wait_for(runner(namespace, objects), DRY_RUN_TIMEOUT)
            except dryrun.RequestError as err:
                return _refuse(422, "Invalid", f"{dryrun.KIND}: {err}")
            except TimeoutError:
                return _refuse(504, "Timeout", f"the dry run took over {DRY_RUN_TIMEOUT:.0f} s; ask again")
            except Exception as err:
                log.warning("visibility: a dry run failed", namespace=namespace, error=str(err))
                return _refuse(500, "InternalError", f"the dry run failed: {err}")
        return _json(dryrun.answer_document(asked, namespace, answer), 201)


def visibility_app(published: Published, authorizer: Authorizer) -> web.Application:
    """The aiohttp application (its TLS context, which verifies the front proxy, is the caller's)."""
    api = _Api(published, authorizer)
    app = web.Application(middlewares=[api.authenticated])
    base = "/apis/{group}/{version}"
    app.router.add_get("/apis", api.apis)
    app.router.add_get("/apis/{group}", api.group)
    app.router.add_get(base, api.version)
    app.router.add_get(base + "/clusterqueues/{name}/pendingworkloads", api.pending)
    app.router.add_get(base + "/namespaces/{namespace}/localqueues/{name}/pendingworkloads", api.pending)
    app.router.add_post(base + "/namespaces/{namespace}/whatifs", api.what_if)
    app.router.add_get("/openapi/v2", api.openapi_v2)
    app.router.add_get("/openapi/v3", api.openapi_v3)
    return app


async def read_requestheader(client: KubeClient) -> RequestHeaderConfig:
    """The front proxy's settings the API server publishes; raises when unreadable or incomplete."""
    namespace, name = AUTHENTICATION_CONFIGMAP
    body = await client.request("GET", f"/api/v1/namespaces/{namespace}/configmaps/{name}", timeout=10.0)
    data = json.loads(body).get("data") or {}
    return RequestHeaderConfig.from_configmap({str(k): str(v) for k, v in data.items()})


@dataclass
class VisibilityServer:
    server: Server
    follow: asyncio.Task[None]
    client: KubeClient
    published: Published
    loaded: set[str] = field(default_factory=set)

    @property
    def port(self) -> int:
        return self.server.port

    async def stop(self) -> None:
        """Stop re-reading the front proxy's settings and close the client (the server itself is
        closed by its owner, with the process's other servers)."""
        self.follow.cancel()
        await asyncio.gather(self.follow, return_exceptions=True)
        await self.client.close()


async def _follow_requestheader(
    client: KubeClient, context: ssl.SSLContext, published: Published, loaded: set[str]
) -> None:
    """Read the request-header settings until found, then keep them current (new CAs are added)."""
    while True:
        try:
            config = await read_requestheader(client)
        except Exception as err:
            if published.requestheader is None:
                log.warning("visibility: cannot read the front proxy's settings yet", error=str(err))
            await asyncio.sleep(10.0 if published.requestheader is None else 60.0)
            continue
        if config.client_ca not in loaded:
            context.load_verify_locations(cadata=config.client_ca)
            loaded.add(config.client_ca)
            log.info("visibility: front proxy CA loaded", allowed_names=list(config.allowed_names))
        published.requestheader = config
        await asyncio.sleep(60.0)


async def serve_visibility(
    address: str,
    context: ssl.SSLContext,
    make_client: Callable[[], Awaitable[KubeClient]],
    published: Published,
    *,
    authorizer: Authorizer | None = None,
) -> VisibilityServer | None:
    """Listen on ``address`` (HOST:PORT; '0': no server) with ``context`` (the serving certificate);
    the client made by ``make_client`` reads the front proxy's settings and reviews access."""
    if address.strip() == "0":
        return None
    context.verify_mode = ssl.CERT_OPTIONAL
    client = await make_client()
    try:
        authorizer = authorizer or Authorizer(ApiReviewer(client))
        server = await start_server(visibility_app(published, authorizer), address, ssl_context=context)
    except BaseException:
        await client.close()
        raise
    if server is None:
        await client.close()
        return None
    loaded: set[str] = set()
    follow = asyncio.get_running_loop().create_task(
        _follow_requestheader(client, context, published, loaded), name="visibility-requestheader"
    )
    return VisibilityServer(server, follow, client, published, loaded)
