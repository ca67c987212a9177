"""Command lines and health endpoints of the test-bed's components.

Start order: etcd, kube-apiserver, then kube-controller-manager,
kube-scheduler, the Python agents (node simulator + fake DRA driver's API half)
and one ``driver-<node>`` process per node (the fake DRA driver's kubelet
plugin, ``python -m e2e.testbed.kubeletplugin``) together. Stop order is the reverse.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from e2e.testbed.names import DRIVER_NAME
from e2e.testbed.nodedirs import NodeDirs, node_dirs
from e2e.testbed.paths import E2E_DIR, BinaryPaths
from e2e.testbed.pki import FRONT_PROXY_CLIENT, Pki
from e2e.testbed.spec import TestbedSpec

ETCD = "etcd"
APISERVER = "kube-apiserver"
CONTROLLER_MANAGER = "kube-controller-manager"
SCHEDULER = "kube-scheduler"
AGENTS = "agents"
START_ORDER = (ETCD, APISERVER, CONTROLLER_MANAGER, SCHEDULER, AGENTS)
DRIVER_PREFIX = "driver-"  # + node name: that node's kubelet-plugin process
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
REPO_ROOT = E2E_DIR.parent

# Port keys in the run state.
PORT_NAMES = ("etcd-client", "etcd-peer", APISERVER, CONTROLLER_MANAGER, SCHEDULER, AGENTS)


@dataclass(frozen=True)
class ComponentPlan:
    """Everything needed to (re)start one component and to tell when it is healthy."""

    name: str
    argv: tuple[str, ...]
    health_url: str
    uses_tls: bool
    start_timeout: float
    env: tuple[tuple[str, str], ...] = ()
    stop_grace: float = 10.0  # seconds between SIGTERM and SIGKILL


@dataclass(frozen=True)
class RunLayout:
    run_dir: Path

    @property
    def pki_dir(self) -> Path:
        return self.run_dir / "pki"

    @property
    def kubeconfig(self) -> Path:
        return self.run_dir / "admin.kubeconfig"

    @property
    def etcd_data(self) -> Path:
        return self.run_dir / "etcd-data"

    @property
    def nodes_dir(self) -> Path:
        return self.run_dir / "nodes"

    def node(self, node_name: str) -> NodeDirs:
        return node_dirs(self.nodes_dir, node_name)

    @property
    def spec_file(self) -> Path:
        return self.run_dir / "spec.yaml"

    @property
    def state_file(self) -> Path:
        return self.run_dir / "state.json"

    @property
    def owner_pid_file(self) -> Path:
        return self.run_dir / "up.pid"

    def log(self, name: str) -> Path:
        return self.run_dir / "logs" / f"{name}.log"

    def pid(self, name: str) -> Path:
        return self.run_dir / f"{name}.pid"


def plan_components(
    binaries: BinaryPaths,
    pki: Pki,
    layout: RunLayout,
    ports: dict[str, int],
    pod_run_seconds: float | None,
    apiserver_args: tuple[str, ...] = (),
) -> dict[str, ComponentPlan]:
    etcd_client = f"http://127.0.0.1:{ports['etcd-client']}"
    etcd_peer = f"http://127.0.0.1:{ports['etcd-peer']}"
    kubeconfig = str(layout.kubeconfig)
    serving = (f"--tls-cert-file={pki.serving_cert}", f"--tls-private-key-file={pki.serving_key}")
    delegated = (f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}")
    plans = [
        ComponentPlan(
            name=ETCD,
            argv=(
                str(binaries.etcd),
                "--name=testbed",
                f"--data-dir={layout.etcd_data}",
                f"--listen-client-urls={etcd_client}",
                f"--advertise-client-urls={etcd_client}",
                f"--listen-peer-urls={etcd_peer}",
                f"--initial-advertise-peer-urls={etcd_peer}",
                f"--initial-cluster=testbed={etcd_peer}",
                "--unsafe-no-fsync=true",
                "--quota-backend-bytes=4294967296",
                "--log-level=warn",
            ),
            health_url=f"{etcd_client}/health",
            uses_tls=False,
            start_timeout=30,
        ),
        ComponentPlan(
            name=APISERVER,
            argv=(
                str(binaries.kube_apiserver),
                f"--etcd-servers={etcd_client}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                "--endpoint-reconciler-type=none",
                f"--secure-port={ports[APISERVER]}",
                f"--cert-dir={layout.run_dir / 'apiserver-certs'}",
                *serving,
                f"--client-ca-file={pki.ca_cert}",
                # The aggregation layer as in a real cluster: the front proxy's CA and identity.
                f"--requestheader-client-ca-file={pki.front_proxy_ca_cert}",
                f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--proxy-client-cert-file={pki.front_proxy_client_cert}",
                f"--proxy-client-key-file={pki.front_proxy_client_key}",
                "--authorization-mode=RBAC",
                "--service-account-issuer=https://kubernetes.default.svc",
                f"--service-account-key-file={pki.sa_public_key}",
                f"--service-account-signing-key-file={pki.sa_private_key}",
                f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
                "--allow-privileged=true",
                # Without it, SIGTERM waits for every open watch (up to the
                # 60s request timeout); with it, watches are ended cleanly.
                "--shutdown-watch-termination-grace-period=2s",
                "--profiling=false",
                "--v=1",
                *apiserver_args,
            ),
            health_url=f"https://127.0.0.1:{ports[APISERVER]}/readyz",
            uses_tls=True,
            start_timeout=120,
        ),
        ComponentPlan(
            name=CONTROLLER_MANAGER,
            argv=(
                str(binaries.kube_controller_manager),
                f"--kubeconfig={kubeconfig}",
                *delegated,
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={ports[CONTROLLER_MANAGER]}",
                *serving,
                f"--root-ca-file={pki.ca_cert}",
                f"--service-account-private-key-file={pki.sa_private_key}",
                # No kubelet heartbeats from a real kubelet: the node simulator
                # keeps nodes Ready itself, so node-lifecycle stays out.
                "--controllers=*,-node-lifecycle-controller",
                f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
                "--kube-api-qps=100",
                "--kube-api-burst=200",
                "--profiling=false",
                "--v=1",
            ),
            health_url=f"https://127.0.0.1:{ports[CONTROLLER_MANAGER]}/healthz",
            uses_tls=True,
            start_timeout=60,
        ),
        ComponentPlan(
            name=SCHEDULER,
            argv=(
                str(binaries.kube_scheduler),
                f"--kubeconfig={kubeconfig}",
                *delegated,
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={ports[SCHEDULER]}",
                *serving,
                "--profiling=false",
                "--v=1",
            ),
            health_url=f"https://127.0.0.1:{ports[SCHEDULER]}/healthz",
            uses_tls=True,
            start_timeout=60,
        ),
    ]
    agents_argv = [
        sys.executable,
        "-m",
        "e2e.testbed",
        "agents",
        f"--kubeconfig={kubeconfig}",
        f"--spec={layout.spec_file}",
        f"--health-port={ports[AGENTS]}",
        f"--nodes-dir={layout.nodes_dir}",
    ]
    if pod_run_seconds is not None:
        agents_argv.append(f"--pod-run-seconds={pod_run_seconds}")
    plans.append(
        ComponentPlan(
            name=AGENTS,
            argv=tuple(agents_argv),
            health_url=f"http://127.0.0.1:{ports[AGENTS]}/readyz",
            uses_tls=False,
            start_timeout=60,
            env=(("PYTHONPATH", str(REPO_ROOT)), ("PYTHONUNBUFFERED", "1")),
        )
    )
    return {p.name: p for p in plans}


def driver_component(node_name: str) -> str:
    return DRIVER_PREFIX + node_name


def is_driver_component(name: str) -> bool:
    return name.startswith(DRIVER_PREFIX)


def ordered_components(names: list[str] | tuple[str, ...]) -> list[str]:
    """Start order: the fixed components first, then the drivers in the order given."""
    unique = list(dict.fromkeys(names))
    return [n for n in START_ORDER if n in unique] + [n for n in unique if n not in START_ORDER]


def plan_drivers(layout: RunLayout, spec: TestbedSpec) -> dict[str, ComponentPlan]:
    """One kubelet-plugin process per node, with the node's directories in the run folder.

    ``--no-publish``: the agents publish every node's ResourceSlice (and delete
    those of nodes gone), so there is a single writer per slice.
    """
    plans = {}
    for node in spec.nodes:
        dirs = layout.node(node.name)
        registration, _ = dirs.socket_paths(DRIVER_NAME)
        name = driver_component(node.name)
        plans[name] = ComponentPlan(
            name=name,
            argv=(
                sys.executable,
                "-m",
                "e2e.testbed.kubeletplugin",
                f"--node-name={node.name}",
                f"--kubeconfig={layout.kubeconfig}",
                f"--driver-name={DRIVER_NAME}",
                f"--registry-dir={dirs.registry_dir}",
                f"--plugins-dir={dirs.plugins_dir}",
                f"--cdi-dir={dirs.cdi_dir}",
                "--no-publish",
            ),
            health_url=f"unix:{registration}",
            uses_tls=False,
            start_timeout=60,
            env=(("PYTHONPATH", str(REPO_ROOT)), ("PYTHONUNBUFFERED", "1")),
        )
    return plans
