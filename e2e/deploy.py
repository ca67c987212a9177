"""Installing the project on a cluster and running its controller, for demos and e2e tests.

`install_crds` applies manifests/crds/ and waits until they are established;
`apply_manifests` server-side-applies example manifests; `ControllerProcess`
runs `reconciler run` as a child process with its log in a file.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from e2e.testbed import KubeClient, api_path

__all__ = ["CRD_DIR", "ROOT", "ControllerProcess", "apply_manifests", "install_crds", "object_path"]

ROOT = Path(__file__).resolve().parent.parent
CRD_DIR = ROOT / "manifests" / "crds"
FIELD_MANAGER = "dra-quota-e2e"

# plural and scope of the kinds the examples use
_KINDS: dict[tuple[str, str], tuple[str, bool]] = {
    ("v1", "Namespace"): ("namespaces", False),
    ("batch/v1", "Job"): ("jobs", True),
    ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"): ("resourceflavors", False),
    ("kueue.x-k8s.io/v1beta2", "ClusterQueue"): ("clusterqueues", False),
    ("kueue.x-k8s.io/v1beta2", "LocalQueue"): ("localqueues", True),
    ("kueue.x-k8s.io/v1beta2", "Workload"): ("workloads", True),
    ("resource.k8s.io/v1", "ResourceClaimTemplate"): ("resourceclaimtemplates", True),
    ("resource.k8s.io/v1", "DeviceClass"): ("deviceclasses", False),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): ("customresourcedefinitions", False),
}


def object_path(obj: dict[str, Any]) -> str:
    plural, namespaced = _KINDS[(obj["apiVersion"], obj["kind"])]
    meta = obj["metadata"]
    return api_path(obj["apiVersion"], plural, meta.get("namespace") if namespaced else None, meta["name"])


def load_documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]


async def apply_manifests(kube: KubeClient, *paths: Path) -> list[dict[str, Any]]:
    applied: list[dict[str, Any]] = []
    for path in paths:
        for doc in load_documents(path):
            applied.append(await kube.apply(object_path(doc), doc, FIELD_MANAGER))
    return applied


async def install_crds(kube: KubeClient, within: float = 30.0) -> None:
    crds = await apply_manifests(kube, *sorted(CRD_DIR.glob("*.yaml")))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    for crd in crds:
        path = object_path(crd)
        while True:
            current = await kube.get(path)
            conditions = (current.get("status") or {}).get("conditions") or []
            if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
                break
            if loop.time() > deadline:
                raise TimeoutError(f"CRD {crd['metadata']['name']} not established after {within}s")
            await asyncio.sleep(0.2)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class ControllerProcess:
    """`reconciler run` as a child process (its own process group), logging to a file.

    Its metrics and health probes listen on 127.0.0.1 ports of their own (``metrics_port``,
    ``health_port``; chosen once, kept across restarts), never on the default :8080/:8081.
    """

    def __init__(
        self,
        config: Path,
        kubeconfig: Path,
        log_path: Path,
        *extra: str,
        metrics_port: int | None = None,
        health_port: int | None = None,
    ) -> None:
        self.config = config
        self.kubeconfig = kubeconfig
        self.log_path = log_path
        self.extra = extra
        self.metrics_port = metrics_port or free_port()
        self.health_port = health_port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "reconciler.cli",
                "run",
                "--config",
                str(self.config),
                "--kubeconfig",
                str(self.kubeconfig),
                "--log-format",
                "json",
                "--metrics-bind-address",
                f"127.0.0.1:{self.metrics_port}",
                "--health-probe-bind-address",
                f"127.0.0.1:{self.health_port}",
                *self.extra,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env=env,
            start_new_session=True,
        )
        log.close()

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self, grace: float = 15.0) -> int | None:
        """SIGTERM, then SIGKILL after `grace` seconds; returns the exit code."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.process.returncode

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
