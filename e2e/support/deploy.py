"""Installing the project on a cluster and running its controller, for demos and e2e tests.

`install_crds` applies manifests/crds/ and waits until they are established;
`apply_manifests` server-side-applies example manifests; `kustomize_build`
renders a kustomization with the cached kustomize and `apply_objects`
server-side-applies any objects (paths found through API discovery);
`request_token` and `token_kubeconfig` give a ServiceAccount's kubeconfig;
`ControllerProcess` runs `reconciler run` as a child process with its log in a
file.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from e2e.support.process import ManagedProcess
from e2e.testbed import KubeClient, api_path
from e2e.testbed.paths import binary_paths
from e2e.testbed.ports import free_ports

__all__ = [
    "CRD_DIR",
    "ROOT",
    "ControllerProcess",
    "Discovery",
    "apply_manifests",
    "apply_objects",
    "free_port",
    "install_crds",
    "kustomize_build",
    "object_path",
    "request_token",
    "token_kubeconfig",
]

ROOT = Path(__file__).resolve().parents[2]
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
    await wait_established(kube, crds, within)


async def wait_established(kube: KubeClient, crds: Iterable[dict[str, Any]], within: float = 30.0) -> None:
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


def kustomize_build(directory: Path) -> list[dict[str, Any]]:
    """The objects `kustomize build directory` renders (kustomize from e2e/build-binaries.sh)."""
    kustomize = binary_paths().kustomize
    result = subprocess.run(
        [str(kustomize), "build", str(directory)], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"kustomize build {directory} failed:\n{result.stderr}")
    return [d for d in yaml.safe_load_all(result.stdout) if isinstance(d, dict)]


class Discovery:
    """Plural and scope of a kind, from the API server's discovery (any kind, CRDs included)."""

    def __init__(self, kube: KubeClient) -> None:
        self._kube = kube
        self._cache: dict[str, dict[str, tuple[str, bool]]] = {}

    async def path(self, obj: dict[str, Any]) -> str:
        api_version, kind = obj["apiVersion"], obj["kind"]
        kinds = self._cache.get(api_version)
        if kinds is None or kind not in kinds:
            prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            listing = await self._kube.get(prefix)
            kinds = {
                r["kind"]: (r["name"], bool(r["namespaced"]))
                for r in listing.get("resources", [])
                if "/" not in r["name"]
            }
            self._cache[api_version] = kinds
        if kind not in kinds:
            raise LookupError(f"the API server does not serve {kind} in {api_version}")
        plural, namespaced = kinds[kind]
        meta = obj["metadata"]
        return api_path(api_version, plural, meta.get("namespace") if namespaced else None, meta["name"])


async def apply_objects(
    kube: KubeClient, objects: Iterable[dict[str, Any]], field_manager: str = FIELD_MANAGER
) -> list[dict[str, Any]]:
    """Server-side apply each object in order; CRDs are waited for until established."""
    discovery = Discovery(kube)
    applied: list[dict[str, Any]] = []
    for obj in objects:
        result = await kube.apply(await discovery.path(obj), obj, field_manager)
        if obj["kind"] == "CustomResourceDefinition":
            await wait_established(kube, [result])
        applied.append(result)
    return applied


async def request_token(kube: KubeClient, namespace: str, name: str, seconds: int = 3600) -> str:
    """A bound token of a ServiceAccount from the TokenRequest API."""
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": seconds},
    }
    answer = await kube.create(api_path("v1", "serviceaccounts", namespace, name, "token"), request)
    return str(answer["status"]["token"])


def token_kubeconfig(admin_kubeconfig: Path, token: str, user: str, path: Path) -> Path:
    """A kubeconfig for the admin kubeconfig's cluster that authenticates with a bearer token."""
    admin = yaml.safe_load(admin_kubeconfig.read_text())
    current = admin["current-context"]
    context = next(c["context"] for c in admin["contexts"] if c["name"] == current)
    cluster = next(c for c in admin["clusters"] if c["name"] == context["cluster"])
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": user, "context": {"cluster": cluster["name"], "user": user}}],
        "current-context": user,
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (below the ephemeral range)."""
    return free_ports(1)[0]


class ControllerProcess(ManagedProcess):
    """`reconciler run` as a child process (its own process group), logging to a file.

    Its metrics and health probes listen on 127.0.0.1 ports of their own (``metrics_port``,
    ``health_port``; chosen once, kept across restarts), never on the default :8080/:8081.
    Its visibility API is off unless ``visibility_port`` is given (then on that 127.0.0.1 port).
    Its metrics are plain HTTP (``--metrics-secure=false``, allowed on loopback) unless
    ``metrics_secure``: then HTTPS, for bearer tokens allowed get on /metrics.
    Its admission webhooks are off unless ``webhook_port`` is given (then they listen on that
    127.0.0.1 port; certificate flags go in ``extra``). ``env`` adds to the environment it
    inherits (e.g. the POD_NAME and POD_NAMESPACE a Deployment's pod would have).
    """

    what = "the controller"

    def __init__(
        self,
        config: Path,
        kubeconfig: Path,
        log_path: Path,
        *extra: str,
        metrics_port: int | None = None,
        health_port: int | None = None,
        webhook_port: int | None = None,
        metrics_secure: bool = False,
        env: Mapping[str, str] | None = None,
        visibility_port: int | None = None,
    ) -> None:
        self.config = config
        self.metrics_secure = metrics_secure
        self.env = dict(env or {})
        self.kubeconfig = kubeconfig
        self.log_path = log_path
        self.extra = extra
        self.metrics_port = metrics_port or free_port()
        self.health_port = health_port or free_port()
        self.webhook_port = webhook_port
        self.visibility_port = visibility_port
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
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
                f"--metrics-secure={'true' if self.metrics_secure else 'false'}",
                "--health-probe-bind-address",
                f"127.0.0.1:{self.health_port}",
                "--webhook-bind-address",
                f"127.0.0.1:{self.webhook_port}" if self.webhook_port else "0",
                "--visibility-bind-address",
                f"127.0.0.1:{self.visibility_port}" if self.visibility_port else "0",
                *self.extra,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env=env,
            start_new_session=True,
        )
        log.close()

    # How often a controller that could not bind one of its ports is started again on new ones.
    port_retries = 2

    def wait_ready(self, within: float | None = None) -> None:
        """Until /readyz answers 200. A controller that exited because one of its loopback ports
        was taken between `free_port` choosing it and the bind (another test-bed's process on the
        machine got it first) is started again on newly chosen ports, `port_retries` times at most;
        the new ports are this object's attributes, read them after this returns."""
        for attempt in range(self.port_retries + 1):
            try:
                super().wait_ready(within)
                return
            except RuntimeError as err:
                if attempt == self.port_retries or self.alive() or "address already in use" not in str(err):
                    raise
            self._choose_ports()
            self.start()

    def _choose_ports(self) -> None:
        self.metrics_port = free_port()
        self.health_port = free_port()
        if self.webhook_port is not None:
            self.webhook_port = free_port()
        if self.visibility_port is not None:
            self.visibility_port = free_port()

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid
