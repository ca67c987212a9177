"""The running controller: watchers, inbox, reconciler and writer, wired and owned.

Watchers only parse and enqueue; the reconciler is the inbox's only consumer
and the only owner of state; the writer performs API calls and posts their
results back to the inbox. On SIGTERM the watchers stop, in-flight writes get
a grace period, and everything is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import structlog

from reconciler.api.resources import Resource
from reconciler.config import Configuration
from reconciler.integrations import check_frameworks
from reconciler.kube import Informer, KubeClient, WatchEvent
from reconciler.observability.health import ControllerState, Health, WatchState
from reconciler.observability.metrics import Metrics
from reconciler.runtime.loop.notices import announce_unimplemented
from reconciler.runtime.loop.pending_source import ReconcilerPending
from reconciler.runtime.loop.reconciler import Reconciler
from reconciler.runtime.loop.snapshot import state_snapshot
from reconciler.runtime.queues.config_reload import ConfigReload, watch_config
from reconciler.runtime.shared.writer import WriteDone, Writer
from reconciler.visibility.server import Published

__all__ = ["ControllerOptions", "make_client", "run_controller", "signal_stop"]

log = structlog.get_logger(__name__)


class _Flush:
    """Inbox marker: time to write ClusterQueue status."""


class _Wake:
    """Inbox marker: parked workloads are due to be tried again (only a batch is needed)."""


FLUSH = _Flush()
Item = WatchEvent[Any] | WriteDone | ConfigReload | _Flush | _Wake


@dataclass(frozen=True)
class ControllerOptions:
    kubeconfig: str | None = None
    write_concurrency: int = 32
    status_interval: float = 0.5
    shutdown_grace: float = 10.0
    max_batch: int = 2000
    # /healthz fails when inbox items have waited this long without a batch being handled.
    stall_after: float = 60.0
    # The Configuration file, polled for new DeviceClass mappings (None: never reloaded).
    config_path: str | None = None
    config_reload_interval: float = 2.0
    # The controller's own namespace (its jobs are not managed, as kube-system's); None: the
    # Configuration's `namespace`, else kueue-system.
    namespace: str | None = None
    # Seconds before parked workloads are tried again once quota moves (Kueue's batch period;
    # the moves meanwhile share one retry). 0: at once.
    retry_parked_after: float = 1.0
    # Asked before each write is sent (with leader election: the Lease is surely still ours).
    may_write: Callable[[], bool] | None = None


async def make_client(kubeconfig: str | None) -> KubeClient:
    """A client from the kubeconfig given, else in-cluster when in a pod, else the default kubeconfig."""
    if kubeconfig or not os.environ.get("KUBERNETES_SERVICE_HOST"):
        return await KubeClient.from_kubeconfig(kubeconfig)
    return await KubeClient.in_cluster()


@dataclass
class _Progress:
    """When the reconciler last finished a batch (monotonic), for the liveness probe."""

    last_batch: float


async def _consume(
    inbox: asyncio.Queue[Item],
    reconciler: Reconciler,
    max_batch: int,
    progress: _Progress | None = None,
    metrics: Metrics | None = None,
) -> None:
    # A batch when parked workloads are due to be tried again (else the next tick would be).
    wake: asyncio.TimerHandle | None = None
    wake_for: float | None = None
    try:
        while True:
            await _consume_batch(inbox, reconciler, max_batch, progress, metrics)
            due = reconciler.retry_due
            if due is not None and due != wake_for:
                if wake is not None:
                    wake.cancel()
                # (a little after: the loop may run a timer up to its clock's resolution early)
                wake = asyncio.get_running_loop().call_at(due + 0.005, inbox.put_nowait, _Wake())
                wake_for = due
    finally:
        if wake is not None:
            wake.cancel()


async def _consume_batch(
    inbox: asyncio.Queue[Item],
    reconciler: Reconciler,
    max_batch: int,
    progress: _Progress | None,
    metrics: Metrics | None,
) -> None:
    """Handle one batch of inbox items, then decide."""
    items = [await inbox.get()]
    started = time.monotonic()
    while len(items) < max_batch:
        try:
            items.append(inbox.get_nowait())
        except asyncio.QueueEmpty:
            break
    flush = False
    for item in items:
        if isinstance(item, _Flush | _Wake):
            flush = flush or isinstance(item, _Flush)
            continue
        try:
            reconciler.handle(item)
        except Exception:
            # One bad object must not stop the controller; the next event retries it.
            log.exception("failed to handle an inbox item", item=_describe(item))
    try:
        reconciler.after_batch()
        if flush:
            reconciler.flush_status()
    except Exception:
        log.exception("failed to decide after a batch")
    finished = time.monotonic()
    if progress is not None:
        progress.last_batch = finished
    if metrics is not None:
        metrics.reconcile_batch(finished - started)
    # Let the writer's and the watches' tasks run before the next batch: `inbox.get()` does
    # not yield while items wait, and a batch's own writes can put items back at once (a
    # superseded write's answer), so without this the loop could starve the very writes
    # whose answers it waits for.
    await asyncio.sleep(0)


def _describe(item: Item) -> str:
    if isinstance(item, WatchEvent):
        return f"{item.kind} {item.resource.plural} {item.key[0]}/{item.key[1]}"
    if isinstance(item, WriteDone):
        return f"write {item.action.purpose}"
    if isinstance(item, ConfigReload):
        return f"configuration {item.path}"
    return "flush" if isinstance(item, _Flush) else "wake"


async def _tick(inbox: asyncio.Queue[Item], interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        inbox.put_nowait(FLUSH)


def _controller_state(
    informers: list[Informer[Any]],
    reconciler: Reconciler,
    inbox: asyncio.Queue[Item],
    progress: _Progress,
    consumer: asyncio.Task[None] | None,
    stall_after: float,
) -> ControllerState:
    now = time.monotonic()
    watches = [
        WatchState(
            name=i.resource.plural,
            synced=i.synced,
            idle_seconds=now - i.last_contact_monotonic,
            stale_after=2 * i.inactivity_timeout,
        )
        for i in informers
    ]
    stalled = None
    if consumer is not None and consumer.done():
        stalled = "the reconciler task has ended"
    elif inbox.qsize() and now - progress.last_batch > stall_after:
        stalled = f"{inbox.qsize()} inbox items and no batch handled for {now - progress.last_batch:.0f}s"
    return ControllerState(watches, ledger_rebuilt=reconciler.ready, stalled=stalled)


def _relist(informers: list[Informer[Any]], resource: Resource) -> None:
    """The writer found the cache of `resource` behind the server: its watches relist."""
    for informer in informers:
        if informer.resource.plural == resource.plural and informer.resource.group == resource.group:
            informer.relist_soon()


def _writer(
    client: KubeClient, inbox: asyncio.Queue[Item], options: ControllerOptions, metrics: Metrics
) -> Writer:
    """The writer, bounded as configured; with leader election it sends only while the Lease is ours."""
    return Writer(
        client,
        inbox.put_nowait,
        concurrency=options.write_concurrency,
        metrics=metrics,
        may_write=options.may_write,
    )


async def run_controller(
    config: Configuration,
    options: ControllerOptions,
    stop: asyncio.Event | None = None,
    *,
    metrics: Metrics | None = None,
    health: Health | None = None,
    published: Published | None = None,
) -> None:
    """Run until `stop` is set (or SIGTERM/SIGINT when no event is given). With ``metrics``, writes
    and decisions are counted and a scrape reads this controller's state; with ``health``, the
    probes see its watches and ledger; with ``published``, the visibility API reads its queues."""
    stop = stop or signal_stop()
    metrics = metrics or Metrics()
    client = await make_client(options.kubeconfig)
    inbox: asyncio.Queue[Item] = asyncio.Queue()
    writer = _writer(client, inbox, options, metrics)
    reconciler = Reconciler(
        config, writer.submit, instance=socket.gethostname(), metrics=metrics, namespace=options.namespace
    )
    reconciler.ctx.engine.queues.retry_period = options.retry_parked_after
    informers: list[Informer[Any]] = [
        Informer(
            client,
            row.resource,
            row.projection,
            inbox.put_nowait,
            label_selector=row.label_selector,
            optional=row.optional,
        )
        for row in reconciler.watched_kinds
    ]
    writer.on_behind = partial(_relist, informers)
    progress = _Progress(time.monotonic())
    consumer: asyncio.Task[None] | None = None
    metrics.state_source = lambda: state_snapshot(reconciler, informers, inbox.qsize())
    metrics.inventory_source = reconciler.inventory.sample
    _publish(published, ReconcilerPending(reconciler))
    if health is not None:
        health.controller = lambda: _controller_state(
            informers, reconciler, inbox, progress, consumer, options.stall_after
        )
    tasks: list[asyncio.Task[None]] = []
    notice: asyncio.Task[None] | None = None
    try:
        loop = asyncio.get_running_loop()
        notice = loop.create_task(announce_unimplemented(client, check_frameworks(config)), name="notice")
        tasks = [loop.create_task(i.run(), name=f"watch-{i.resource.plural}") for i in informers]
        consumer = loop.create_task(
            _consume(inbox, reconciler, options.max_batch, progress, metrics), name="reconciler"
        )
        tasks.append(consumer)
        tasks.append(loop.create_task(_tick(inbox, options.status_interval), name="status-tick"))
        if options.config_path is not None:
            reload = watch_config(options.config_path, options.config_reload_interval, inbox.put_nowait)
            tasks.append(loop.create_task(reload, name="config-reload"))
        log.info("controller started", watching=[r.plural for r in reconciler.watched])
        stopped = loop.create_task(stop.wait(), name="stop")
        done, _ = await asyncio.wait([stopped, *tasks], return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task is not stopped and task.exception() is not None:
                log.error("a controller task failed", task=task.get_name(), error=repr(task.exception()))
                raise task.exception()  # type: ignore[misc]
        stopped.cancel()
        if health is not None:
            health.stopping = True
        log.info("shutting down", in_flight=writer.in_flight(), writes=writer.in_flight_writes())
    finally:
        owned = [*tasks, *([notice] if notice is not None else [])]
        for task in owned:
            task.cancel()
        await asyncio.gather(*owned, return_exceptions=True)
        await writer.drain(options.shutdown_grace)
        await client.close()
        metrics.state_source = None
        metrics.inventory_source = None
        _publish(published, None)
        if health is not None:
            health.controller = None
        log.info("controller stopped")


def _publish(published: Published | None, source: ReconcilerPending | None) -> None:
    if published is not None:
        published.source = source


def signal_stop() -> asyncio.Event:
    """An event set on SIGTERM or SIGINT."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    return stop
