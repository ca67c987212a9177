"""The process: metrics, probe and webhook servers, leader election, and the controller while leading.

The admission webhooks (and their certificate manager) run on every replica,
leader or not, from start to exit; a webhook server that cannot listen ends
the process. Without leader election the controller runs at once
(``standalone``). With it, a replica starts as a ``follower`` running only the
elector and the servers; once it holds the Lease it becomes ``leader`` and starts the whole
controller (watches, reconciler, writer), which rebuilds its ledger from the
API before deciding anything. Followers never write (but for the webhooks'
certificate Secret and CA bundles).

Leadership lost (no renewal within the renew deadline, or another holder in
the Lease) ends the process at once with exit code 1, without draining
writes: two writers must never overlap. On SIGTERM the leader stops its
watches, lets in-flight writes finish (the Lease is still renewed meanwhile),
steps down to ``follower`` and releases the Lease, so a follower takes over
without waiting for it to expire.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, NoReturn

import structlog

from reconciler.config import Configuration
from reconciler.integrations import check_frameworks, describe_unimplemented
from reconciler.kube.leader import ElectionConfig, LeaderElector
from reconciler.observability.health import Health
from reconciler.observability.metrics import Metrics, ReplicaRole
from reconciler.observability.server import Server, health_app, start_server
from reconciler.observability.tls import ServingCertificate
from reconciler.runtime.loop.controller import ControllerOptions, make_client, run_controller, signal_stop
from reconciler.runtime.loop.metrics_endpoint import MetricsEndpoint, serve_metrics
from reconciler.visibility.dryrun import DryRunner
from reconciler.visibility.server import Published, VisibilityServer, serve_visibility
from reconciler.webhook.service import WebhookOptions, build_webhooks

__all__ = ["EXIT_LEADERSHIP_LOST", "ProcessOptions", "run_process"]

log = structlog.get_logger(__name__)

EXIT_LEADERSHIP_LOST = 1


@dataclass(frozen=True)
class ProcessOptions:
    controller: ControllerOptions = field(default_factory=ControllerOptions)
    metrics_bind_address: str = "127.0.0.1:8080"
    # /metrics over HTTPS with token authentication and authorization; None: plain HTTP, loopback only.
    metrics_tls: ServingCertificate | None = None
    health_bind_address: str = ":8081"
    leader_election: ElectionConfig | None = None
    version: str = "0+unknown"
    webhook: WebhookOptions | None = None  # None: no admission webhooks
    # The visibility API (an aggregated API server) on HOST:PORT over HTTPS with this certificate;
    # None: not served. Every replica listens; only the leader answers from its queues.
    visibility_bind_address: str | None = None
    visibility_tls: ServingCertificate | None = None
    # The dry run the visibility server answers (`POST .../whatifs`); None: not served.
    dry_run: DryRunner | None = None


def _exit_now(code: int) -> NoReturn:
    sys.stderr.flush()
    os._exit(code)


async def run_process(
    config: Configuration,
    options: ProcessOptions,
    stop: asyncio.Event | None = None,
    *,
    exit_now: Callable[[int], NoReturn] = _exit_now,
    ready: Callable[[Metrics, Health, list[Server]], None] | None = None,
) -> None:
    """Run until ``stop`` (SIGTERM/SIGINT by default). ``ready`` sees the servers once they listen."""
    stop = stop or signal_stop()
    election = options.leader_election
    role: ReplicaRole = "standalone" if election is None else "follower"
    metrics = Metrics(role, version=options.version)
    unimplemented = check_frameworks(config)
    metrics.config_ignored([*(f.path for f in config.ignored_fields), *(u.path for u in unimplemented)])
    if config.ignored_fields:
        ignored = {f.path: f.reason for f in config.ignored_fields}
        log.warning("configuration fields without effect in this controller", ignored=ignored)
    if unimplemented:
        log.warning(describe_unimplemented(unimplemented))
    health = Health(role=role, identity=election.identity if election else "")
    servers: list[Server] = []
    webhook_client = None
    webhooks: asyncio.Task[None] | None = None
    endpoint: MetricsEndpoint | None = None
    published = Published(dry_run=options.dry_run)
    visibility: VisibilityServer | None = None
    try:
        endpoint = await serve_metrics(
            metrics,
            options.metrics_bind_address,
            options.metrics_tls,
            lambda: make_client(options.controller.kubeconfig),
        )
        if endpoint.server is not None:
            servers.append(endpoint.server)
            https = options.metrics_tls is not None
            log.info(
                "serving metrics",
                address=options.metrics_bind_address,
                port=endpoint.server.port,
                https=https,
            )
        probes = await start_server(health_app(health), options.health_bind_address)
        if probes is not None:
            servers.append(probes)
            log.info("serving health probes", address=options.health_bind_address, port=probes.port)
        if options.webhook is not None:
            webhook_client = await make_client(options.controller.kubeconfig)
            service = build_webhooks(config, options.webhook, webhook_client)
            health.webhook = service.not_serving_reason
            webhooks = asyncio.get_running_loop().create_task(service.run(), name="webhooks")
        visibility = await _serve_visibility(options, published, servers)
        if ready is not None:
            ready(metrics, health, servers)
        if election is None:
            work = run_controller(
                config, options.controller, stop, metrics=metrics, health=health, published=published
            )
        else:
            work = _run_elected(
                config, options.controller, election, stop, metrics, health, exit_now, published
            )
        await _alongside(work, webhooks, stop)
    finally:
        if webhooks is not None:
            webhooks.cancel()
            await asyncio.gather(webhooks, return_exceptions=True)
        if webhook_client is not None:
            await webhook_client.close()
        if visibility is not None:
            await visibility.stop()
        for server in servers:
            await server.close()
        if endpoint is not None:
            await endpoint.close()


async def _serve_visibility(
    options: ProcessOptions, published: Published, servers: list[Server]
) -> VisibilityServer | None:
    """The visibility API's server when one is asked for (it joins ``servers``)."""
    if options.visibility_bind_address is None or options.visibility_tls is None:
        return None
    visibility = await serve_visibility(
        options.visibility_bind_address,
        options.visibility_tls.context,
        lambda: make_client(options.controller.kubeconfig),
        published,
    )
    if visibility is not None:
        servers.append(visibility.server)
        log.info("serving the visibility API", address=options.visibility_bind_address, port=visibility.port)
    return visibility


async def _alongside(
    work: Coroutine[Any, Any, None], webhooks: asyncio.Task[None] | None, stop: asyncio.Event
) -> None:
    """Run ``work``; if the webhooks end first (they only end by failing), stop it and raise their error."""
    task = asyncio.get_running_loop().create_task(work, name="process")
    try:
        if webhooks is not None:
            await asyncio.wait([task, webhooks], return_when=asyncio.FIRST_COMPLETED)
            if webhooks.done() and not task.done():
                log.error("the webhook server failed; stopping", error=repr(webhooks.exception()))
                stop.set()
                await asyncio.gather(task, return_exceptions=True)
                webhooks.result()
        await task
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _first(work: Coroutine[Any, Any, None], stop: asyncio.Event) -> bool:
    """Run ``work`` until it returns (True) or ``stop`` is set first (False; ``work`` is cancelled)."""
    loop = asyncio.get_running_loop()
    task = loop.create_task(work)
    stopped = loop.create_task(stop.wait())
    try:
        await asyncio.wait([task, stopped], return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in (task, stopped):
            t.cancel()
        await asyncio.gather(task, stopped, return_exceptions=True)
    return task.done() and not task.cancelled() and task.exception() is None


async def _run_elected(
    config: Configuration,
    options: ControllerOptions,
    election: ElectionConfig,
    stop: asyncio.Event,
    metrics: Metrics,
    health: Health,
    exit_now: Callable[[int], NoReturn],
    published: Published,
) -> None:
    client = await make_client(options.kubeconfig)
    elector = LeaderElector(client, election, observe=metrics.api_request)
    health.leader = lambda: elector.leader
    try:
        log.info("waiting to become leader", lease=f"{election.namespace}/{election.name}")
        if not await _first(elector.acquire(), stop):
            log.info("stopped before becoming leader")
            return
        metrics.set_role("leader")
        health.role = "leader"
        loop = asyncio.get_running_loop()
        holding = loop.create_task(elector.hold(), name="leader-renew")
        controller = loop.create_task(
            # A leader paused past its renew deadline sends nothing on waking, before hold() sees it.
            run_controller(
                config,
                dataclasses.replace(options, may_write=elector.holds),
                stop,
                metrics=metrics,
                health=health,
                published=published,
            ),
            name="controller",
        )
        try:
            await asyncio.wait([holding, controller], return_when=asyncio.FIRST_COMPLETED)
            if holding.done():
                log.error("lost leadership; exiting at once", error=str(holding.exception()))
                exit_now(EXIT_LEADERSHIP_LOST)
            # The controller has stopped (SIGTERM, or it failed): step down, then give the Lease up.
            holding.cancel()
            await asyncio.gather(holding, return_exceptions=True)
            health.role = "follower"
            metrics.set_role("follower")
            await elector.release()
            controller.result()  # a controller failure ends the process with it
        finally:
            for task in (holding, controller):
                task.cancel()
            await asyncio.gather(holding, controller, return_exceptions=True)
    finally:
        await client.close()
