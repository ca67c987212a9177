"""The test-bed's control plane with one real node instead of the simulated ones.

``RealKubeletBed.start()``: the test-bed (kube-apiserver, etcd, controller-manager,
scheduler) with an empty node list; its agents run once to create the fake driver's
DeviceClass and are then stopped (they would delete any ResourceSlice of a node missing
from their spec, and simulate pods). Then containerd + the kubelet (``RealNode``), and the
fake driver's kubelet plugin as a process (``python -m e2e.testbed.kubeletplugin``),
registering with that kubelet and publishing the node's ResourceSlice (one Tesla T4).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from e2e.kubelet.node import BRIDGE, NODE_NAME, NodeError, RealNode
from e2e.kubelet.service import ServiceForwarder
from e2e.testbed import KubeClient, Testbed, TestbedSpec, api_path
from e2e.testbed.components import AGENTS
from e2e.testbed.names import DRIVER_NAME
from e2e.testbed.paths import E2E_DIR

REPO_ROOT = E2E_DIR.parent
Obj = dict[str, Any]


class RealKubeletBed:
    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        # Webhook calls go to the Service's endpoints (pod IPs), not its ClusterIP: there is
        # no kube-proxy.
        self.testbed = Testbed(
            run_dir,
            TestbedSpec(nodes=[]),
            apiserver_args=(
                "--enable-aggregator-routing=true",
                # The node's Hostname address does not resolve; its InternalIP is the bridge's.
                "--kubelet-preferred-address-types=InternalIP",
            ),
        )
        self.node: RealNode | None = None
        self.service: ServiceForwarder | None = None
        self._plugin: subprocess.Popen[bytes] | None = None
        self.timings: dict[str, float] = {}

    @property
    def kubeconfig(self) -> Path:
        return self.testbed.kubeconfig

    def start(self) -> None:
        t0 = time.monotonic()
        self.testbed.start()
        asyncio.run(self._wait_device_class())
        self.testbed.stop_component(AGENTS)
        self.timings["control plane"] = time.monotonic() - t0
        t0 = time.monotonic()
        self.node = RealNode(self.run_dir, self.testbed.kubeconfig, self.testbed.pki.ca_cert)
        self.node.start()
        self.service = ServiceForwarder(self.testbed.ports["kube-apiserver"], BRIDGE)
        self.service.start()
        asyncio.run(self._wait_node_ready())
        self.timings["containerd + kubelet, node Ready"] = time.monotonic() - t0
        t0 = time.monotonic()
        self._start_plugin()
        asyncio.run(self.wait_registered())
        self.timings["kubelet plugin registered, slice published"] = time.monotonic() - t0

    def stop(self) -> None:
        self.stop_plugin()
        if self.node is not None:
            self.node.stop()
        if self.service is not None:
            self.service.stop()
        self.testbed.stop()

    def __enter__(self) -> RealKubeletBed:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------------------------

    def _start_plugin(self) -> None:
        assert self.node is not None
        with (self.node.logs_dir / "kubelet-plugin.log").open(
            "ab"
        ) as log:  # the child keeps its own descriptor
            self._plugin = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "e2e.testbed.kubeletplugin",
                    f"--node-name={self.node.name}",
                    f"--kubeconfig={self.kubeconfig}",
                    f"--driver-name={DRIVER_NAME}",
                    f"--registry-dir={self.node.registry_dir}",
                    f"--plugins-dir={self.node.plugins_dir}",
                    f"--cdi-dir={self.node.cdi_dir}",
                    "--gpus=1",
                    "--gpu-model=Tesla-T4",
                    "--republish-interval=30",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYTHONUNBUFFERED": "1"},
                start_new_session=True,
            )

    async def _poll(self, what: str, check: Any, within: float = 120.0) -> Any:
        async with KubeClient.from_kubeconfig(self.kubeconfig) as kube:
            deadline = time.monotonic() + within
            while time.monotonic() < deadline:
                result = await check(kube)
                if result:
                    return result
                if self._plugin is not None and self._plugin.poll() is not None and self.node is not None:
                    raise NodeError(f"the kubelet plugin exited:\n{self.node.log_tail('kubelet-plugin')}")
                await asyncio.sleep(0.5)
        tail = self.node.log_tail("kubelet") if self.node else ""
        raise NodeError(f"{what}: not within {within:.0f}s; kubelet log tail:\n{tail}")

    async def _wait_device_class(self) -> None:
        async def check(kube: KubeClient) -> bool:
            return (
                await kube.get_or_none(api_path("resource.k8s.io/v1", "deviceclasses", name=DRIVER_NAME))
                is not None
            )

        await self._poll("DeviceClass gpu.nvidia.com", check, 60)

    async def _wait_node_ready(self) -> None:
        async def check(kube: KubeClient) -> bool:
            node = await kube.get_or_none(api_path("v1", "nodes", name=NODE_NAME))
            conditions = (node or {}).get("status", {}).get("conditions", [])
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

        await self._poll(f"node {NODE_NAME} Ready", check, 180)
        await self._untaint()

    async def _untaint(self) -> None:
        """The kubelet registers its node with the not-ready taint; the node lifecycle
        controller removes it once Ready, but the test-bed runs without that controller
        (it would mark the simulated nodes NotReady). So it is removed here."""
        async with KubeClient.from_kubeconfig(self.kubeconfig) as kube:
            path = api_path("v1", "nodes", name=NODE_NAME)
            node = await kube.get(path)
            taints = node["spec"].get("taints", [])
            kept = [t for t in taints if t["key"] != "node.kubernetes.io/not-ready"]
            if kept != taints:
                await kube.patch(path, {"spec": {"taints": kept or None}})

    def registrations(self) -> int:
        """How often the kubelet connected to the driver's DRA socket (from its log)."""
        if self.node is None:
            return 0
        path = self.node.logs_dir / "kubelet.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return sum(
            1
            for line in text.splitlines()
            if '"Connection changed"' in line
            and f'driverName="{DRIVER_NAME}"' in line
            and "connected=true" in line
        )

    def stop_plugin(self) -> None:
        """Stop the plugin process (SIGTERM: it removes its sockets, the kubelet drops it)."""
        if self._plugin is not None and self._plugin.poll() is None:
            self._plugin.terminate()
            try:
                self._plugin.wait(15)
            except subprocess.TimeoutExpired:
                self._plugin.kill()
                self._plugin.wait(5)
        self._plugin = None

    async def wait_registered(self, more_than: int = 0, within: float = 90.0) -> None:
        """Until the kubelet has connected to the driver (more than ``more_than`` times in all)
        and the node's ResourceSlice exists."""

        async def check(kube: KubeClient) -> bool:
            slices = (await kube.get(api_path("resource.k8s.io/v1", "resourceslices")))["items"]
            published = any(s["spec"].get("nodeName") == NODE_NAME for s in slices)
            return published and self.registrations() > more_than

        await self._poll("the kubelet plugin registered and its ResourceSlice published", check, within)


async def run_pod(
    kube: KubeClient, namespace: str, name: str, image: str, script: str, within: float = 120.0
) -> str:
    """Create a one-container pod running ``sh -c script`` and return its log once it ended."""
    pod: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "containers": [
                {"name": "main", "image": image, "imagePullPolicy": "Never", "command": ["sh", "-c", script]}
            ],
        },
    }
    await kube.create(api_path("v1", "pods", namespace), pod)
    deadline = time.monotonic() + within
    phase = ""
    while time.monotonic() < deadline:
        got = await kube.get(api_path("v1", "pods", namespace, name))
        phase = got.get("status", {}).get("phase", "")
        if phase in ("Succeeded", "Failed"):
            break
        await asyncio.sleep(0.5)
    else:
        raise NodeError(f"pod {namespace}/{name} still {phase or 'unscheduled'} after {within:.0f}s")
    log = await kube.get(api_path("v1", "pods", namespace, name, "log"))
    return str(log.get("raw", log))
