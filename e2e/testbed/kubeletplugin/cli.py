"""``python -m e2e.testbed.kubeletplugin``: run the kubelet plugin until SIGTERM/SIGINT.

Reads claims from the API server (``--kubeconfig``, else $KUBECONFIG, else the
pod's service account), publishes this node's ResourceSlice (again every
``--republish-interval`` seconds) and serves the registration and DRA sockets.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from e2e.testbed.kubeclient import KubeClient, in_cluster_available
from e2e.testbed.kubeletplugin.claims import KubeClaimSource
from e2e.testbed.kubeletplugin.config import (
    DEFAULT_CDI_DIR,
    DEFAULT_DRIVER_NAME,
    DEFAULT_PLUGINS_DIR,
    DEFAULT_REGISTRY_DIR,
    PluginConfig,
)
from e2e.testbed.kubeletplugin.plugin import KubeletPlugin, PluginError
from e2e.testbed.kubeletplugin.slices import SLICE_DRIVER_NAME, republish_forever
from e2e.testbed.spec import GPU_MODELS, GpuSpec, NodeSpec, load_spec

log = logging.getLogger("e2e.testbed.kubeletplugin")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m e2e.testbed.kubeletplugin",
        description="Kubelet plugin of the fake NVIDIA DRA driver.",
    )
    p.add_argument(
        "--node-name",
        default=os.environ.get("NODE_NAME"),
        help="node this plugin serves (default: $NODE_NAME)",
    )
    p.add_argument(
        "--kubeconfig",
        type=Path,
        default=Path(os.environ["KUBECONFIG"]) if os.environ.get("KUBECONFIG") else None,
        help="kubeconfig (default: $KUBECONFIG, else the in-cluster service account)",
    )
    p.add_argument("--driver-name", default=DEFAULT_DRIVER_NAME)
    p.add_argument(
        "--registry-dir",
        type=Path,
        default=DEFAULT_REGISTRY_DIR,
        help="kubelet plugin registry directory (registration socket)",
    )
    p.add_argument(
        "--plugins-dir",
        type=Path,
        default=DEFAULT_PLUGINS_DIR,
        help="parent of the plugin's own directory (DRA socket, checkpoint)",
    )
    p.add_argument("--cdi-dir", type=Path, default=DEFAULT_CDI_DIR, help="where CDI spec files are written")
    gpus = p.add_argument_group("the node's fake GPUs (for its ResourceSlice)")
    gpus.add_argument("--testbed-spec", type=Path, help="take this node's GPUs from a test-bed spec file")
    gpus.add_argument(
        "--gpus",
        type=int,
        default=int(os.environ.get("FAKE_GPUS", "1")),
        help="number of GPUs without --testbed-spec (default: $FAKE_GPUS or 1)",
    )
    gpus.add_argument(
        "--gpu-model",
        default=os.environ.get("FAKE_GPU_MODEL", "Tesla-T4"),
        choices=sorted(GPU_MODELS),
        help="GPU model without --testbed-spec (default: $FAKE_GPU_MODEL)",
    )
    p.add_argument("--no-publish", action="store_true", help="do not publish the node's ResourceSlice")
    p.add_argument(
        "--republish-interval",
        type=float,
        default=60.0,
        help="seconds between re-publications of the slice; 0: only at start",
    )
    p.add_argument("--log-level", default=os.environ.get("LOG_LEVEL", "INFO"))
    return p


def node_spec(args: argparse.Namespace) -> NodeSpec:
    if args.testbed_spec is not None:
        spec = load_spec(args.testbed_spec)
        for node in spec.nodes:
            if node.name == args.node_name:
                return node
        raise ValueError(f"node {args.node_name} is not in {args.testbed_spec}")
    if args.gpus < 0:
        raise ValueError("--gpus must be >= 0")
    return NodeSpec(name=args.node_name, gpus=GpuSpec(count=args.gpus, model=args.gpu_model))


def kube_client(kubeconfig: Path | None) -> KubeClient:
    if kubeconfig is not None:
        return KubeClient.from_kubeconfig(kubeconfig, user_agent="fake-dra-kubelet-plugin")
    if in_cluster_available():
        return KubeClient.in_cluster(user_agent="fake-dra-kubelet-plugin")
    raise ValueError("no --kubeconfig, no $KUBECONFIG and not running in a cluster")


async def serve(
    config: PluginConfig,
    kube: KubeClient,
    node: NodeSpec | None,
    republish_interval: float,
    stop: asyncio.Event,
) -> None:
    """Serve until ``stop`` is set; publish ``node``'s slice unless it is None."""
    async with kube, KubeletPlugin(config, KubeClaimSource(kube)):
        publisher: asyncio.Task[None] | None = None
        if node is not None:
            publisher = asyncio.create_task(
                republish_forever(kube, node, republish_interval), name="republish-slice"
            )
        try:
            await stop.wait()
        finally:
            if publisher is not None:
                publisher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await publisher
    log.info("stopped; sockets removed")


async def amain(args: argparse.Namespace) -> int:
    config = PluginConfig(
        node_name=args.node_name,
        driver_name=args.driver_name,
        registry_dir=args.registry_dir,
        plugins_dir=args.plugins_dir,
        cdi_dir=args.cdi_dir,
    )
    node: NodeSpec | None = None
    if not args.no_publish:
        if config.driver_name != SLICE_DRIVER_NAME:
            raise ValueError(
                f"the test-bed's ResourceSlices are for {SLICE_DRIVER_NAME}; "
                f"use --no-publish with --driver-name {config.driver_name}"
            )
        node = await asyncio.to_thread(node_spec, args)
    kube = await asyncio.to_thread(kube_client, args.kubeconfig)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await serve(config, kube, node, args.republish_interval, stop)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if not args.node_name:
        parser().error("--node-name (or $NODE_NAME) is required")
    try:
        return asyncio.run(amain(args))
    except (ValueError, PluginError) as err:
        log.error("%s", err)
        return 2


if __name__ == "__main__":
    sys.exit(main())
