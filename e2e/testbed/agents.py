"""The test-bed's Python half in one process: node simulator, pod simulator (with the
nodes' kubelets' DRA side), fake DRA driver (API half).

Serves ``/healthz`` (alive), ``/readyz`` (nodes, DeviceClass and slices
published, informers synced) and ``/plugins`` (JSON: driver plugins registered
per node) on a loopback port. With ``nodes_dir``, each node's kubelet watches
``<nodes_dir>/<node>/plugins_registry`` and pods with claims start only after
the driver's plugin prepared them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import aiohttp
from aiohttp import web

from e2e.testbed.fakedriver import FakeDraDriver
from e2e.testbed.kubeclient import ApiError, KubeClient
from e2e.testbed.kubeletsim import KubeletSimulator
from e2e.testbed.nodedirs import node_dirs
from e2e.testbed.nodesim import NodeSimulator
from e2e.testbed.podsim import PodSimulator
from e2e.testbed.spec import TestbedSpec

log = logging.getLogger(__name__)
T = TypeVar("T")


async def _retry(what: str, action: Callable[[], Awaitable[T]]) -> T:
    """Retry ``action`` until it succeeds (the API server may still be starting)."""
    delay = 0.2
    while True:
        try:
            return await action()
        except (ApiError, aiohttp.ClientError, OSError, TimeoutError) as err:
            log.warning("%s failed: %s; retrying in %.1fs", what, err, delay)
            await asyncio.sleep(delay * random.uniform(0.8, 1.2))
            delay = min(delay * 2, 5.0)


class _Health:
    def __init__(self) -> None:
        self.ready = False
        self.kubelets: KubeletSimulator | None = None

    async def plugins(self, _request: web.Request) -> web.Response:
        kubelets = self.kubelets
        nodes = {n: kubelets.registered(n) for n in kubelets.nodes()} if kubelets is not None else {}
        return web.json_response(nodes)

    async def healthz(self, _request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(self, _request: web.Request) -> web.Response:
        return web.Response(text="ok" if self.ready else "starting", status=200 if self.ready else 503)


async def run_agents(
    kubeconfig: Path, spec: TestbedSpec, health_port: int, nodes_dir: Path | None = None
) -> None:
    """Run until cancelled."""
    health = _Health()
    app = web.Application()
    app.router.add_get("/healthz", health.healthz)
    app.router.add_get("/readyz", health.readyz)
    app.router.add_get("/plugins", health.plugins)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", health_port).start()
    tasks: list[asyncio.Task[None]] = []
    try:
        async with KubeClient.from_kubeconfig(kubeconfig, user_agent="testbed-agents") as kube:
            version = await _retry("reading /version", lambda: kube.get("/version"))
            kubelet_version = str(version.get("gitVersion", "v0.0.0"))
            nodes = NodeSimulator(kube, spec, kubelet_version)
            await _retry("creating nodes", nodes.ensure_nodes)
            driver = FakeDraDriver(kube, spec)
            await _retry("publishing DeviceClass and ResourceSlices", driver.publish)
            kubelets: KubeletSimulator | None = None
            pods: PodSimulator | None = None

            def plugins_changed(node: str) -> None:
                if pods is not None:
                    pods.plugins_changed(node)

            if nodes_dir is not None:
                kubelets = KubeletSimulator(
                    {n.name: node_dirs(nodes_dir, n.name).registry_dir for n in spec.nodes}, plugins_changed
                )
                health.kubelets = kubelets
            pods = PodSimulator(kube, nodes.node_ips, spec.pod_run_seconds, kubelets)
            tasks = [
                asyncio.create_task(nodes.heartbeat_forever(), name="node-heartbeat"),
                asyncio.create_task(driver.refresh_forever(), name="driver-refresh"),
                asyncio.create_task(pods.run(), name="pod-simulator"),
            ]
            await pods.wait_synced()
            health.ready = True
            log.info("agents ready: %d node(s), kube-apiserver %s", len(spec.nodes), kubelet_version)
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()
                raise RuntimeError(f"{task.get_name()} ended unexpectedly")
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await runner.cleanup()


def main(kubeconfig: Path, spec: TestbedSpec, health_port: int, nodes_dir: Path | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    async def entry() -> None:
        work = asyncio.create_task(run_agents(kubeconfig, spec, health_port, nodes_dir), name="agents")
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, work.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await work
        log.info("agents stopped")

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(entry())
