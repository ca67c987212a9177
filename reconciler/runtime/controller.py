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
from dataclasses import dataclass
from typing import Any

import structlog

from reconciler.config import Configuration
from reconciler.core.projections import (
    ClusterQueue,
    Job,
    LocalQueue,
    Namespace,
    Pod,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceFlavor,
    Workload,
)
from reconciler.kube import (
    CLUSTER_QUEUES,
    JOBS,
    LOCAL_QUEUES,
    NAMESPACES,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_FLAVORS,
    WORKLOADS,
    Informer,
    KubeClient,
    WatchEvent,
)

from .reconciler import LABEL_SELECTORS, WATCHED, Reconciler
from .writer import WriteDone, Writer

__all__ = ["ControllerOptions", "run_controller"]

log = structlog.get_logger(__name__)

PROJECTIONS: dict[str, type[Any]] = {
    JOBS.plural: Job,
    WORKLOADS.plural: Workload,
    RESOURCE_CLAIM_TEMPLATES.plural: ResourceClaimTemplate,
    CLUSTER_QUEUES.plural: ClusterQueue,
    LOCAL_QUEUES.plural: LocalQueue,
    RESOURCE_FLAVORS.plural: ResourceFlavor,
    NAMESPACES.plural: Namespace,
    PODS.plural: Pod,
    RESOURCE_CLAIMS.plural: ResourceClaim,
}


class _Flush:
    """Inbox marker: time to write ClusterQueue status."""


FLUSH = _Flush()
Item = WatchEvent[Any] | WriteDone | _Flush


@dataclass(frozen=True)
class ControllerOptions:
    kubeconfig: str | None = None
    write_concurrency: int = 32
    status_interval: float = 0.5
    shutdown_grace: float = 10.0
    max_batch: int = 2000


async def _client(options: ControllerOptions) -> KubeClient:
    if options.kubeconfig or not os.environ.get("KUBERNETES_SERVICE_HOST"):
        return await KubeClient.from_kubeconfig(options.kubeconfig)
    return await KubeClient.in_cluster()


async def _consume(inbox: asyncio.Queue[Item], reconciler: Reconciler, max_batch: int) -> None:
    while True:
        items = [await inbox.get()]
        while len(items) < max_batch:
            try:
                items.append(inbox.get_nowait())
            except asyncio.QueueEmpty:
                break
        flush = False
        for item in items:
            if isinstance(item, _Flush):
                flush = True
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


def _describe(item: Item) -> str:
    if isinstance(item, WatchEvent):
        return f"{item.kind} {item.resource.plural} {item.key[0]}/{item.key[1]}"
    if isinstance(item, WriteDone):
        return f"write {item.action.purpose}"
    return "flush"


async def _tick(inbox: asyncio.Queue[Item], interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        inbox.put_nowait(FLUSH)


async def run_controller(
    config: Configuration, options: ControllerOptions, stop: asyncio.Event | None = None
) -> None:
    """Run until `stop` is set (or SIGTERM/SIGINT when no event is given)."""
    stop = stop or _signal_stop()
    client = await _client(options)
    inbox: asyncio.Queue[Item] = asyncio.Queue()
    writer = Writer(client, inbox.put_nowait, concurrency=options.write_concurrency)
    reconciler = Reconciler(config, writer.submit, instance=socket.gethostname())
    informers = [
        Informer(
            client,
            resource,
            PROJECTIONS[resource.plural],
            inbox.put_nowait,
            label_selector=LABEL_SELECTORS.get(resource.plural),
        )
        for resource in WATCHED
    ]
    tasks: list[asyncio.Task[None]] = []
    try:
        loop = asyncio.get_running_loop()
        tasks = [loop.create_task(i.run(), name=f"watch-{i.resource.plural}") for i in informers]
        tasks.append(loop.create_task(_consume(inbox, reconciler, options.max_batch), name="reconciler"))
        tasks.append(loop.create_task(_tick(inbox, options.status_interval), name="status-tick"))
        log.info("controller started", watching=[r.plural for r in WATCHED])
        stopped = loop.create_task(stop.wait(), name="stop")
        done, _ = await asyncio.wait([stopped, *tasks], return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task is not stopped and task.exception() is not None:
                log.error("a controller task failed", task=task.get_name(), error=repr(task.exception()))
                raise task.exception()  # type: ignore[misc]
        stopped.cancel()
        log.info("shutting down", in_flight=writer.in_flight())
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await writer.drain(options.shutdown_grace)
        await client.close()
        log.info("controller stopped")


def _signal_stop() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    return stop
