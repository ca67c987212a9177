"""A real node next to the test-bed: containerd 2 + runc + the bridge CNI + the kubelet.

Everything lives in one run folder (``<run>/node``): containerd's root, state and socket,
the kubelet's root dir (so its plugin registry is ``<run>/node/kubelet/plugins_registry``),
pod logs, CDI specs and the CNI configuration. Needs root. Each workaround for this
sandbox (cgroup v1, no swap accounting, no registry) is named where it is made; the list
is in e2e/kubelet/README.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from e2e.kubelet.images import PAUSE_IMAGE, busybox_archive, import_archive
from e2e.testbed.paths import VERSIONS_FILE, cache_dir, read_versions

RUNC = Path(os.environ.get("TESTBED_RUNC", "/usr/sbin/runc"))
CNI_BIN_DIR = Path("/usr/lib/cni")
NODE_NAME = "kubelet-node-1"
GPU_LABEL = "nvidia.com/gpu.product=Tesla-T4"
# Pod addresses of the bridge CNI (no kube-proxy: pods reach no Service, only the host).
POD_SUBNET = "10.244.0.0/24"
BRIDGE = "dqtb0"
# The bridge's own address: the node's InternalIP and where the kubelet's API listens. The
# kubelet refuses a loopback node IP ("nodeIP can't be loopback address"), and the host's
# external address would expose the kubelet's (anonymous) API; this one is host-only.
NODE_IP = "10.244.0.1"


@dataclass(frozen=True)
class NodeBinaries:
    kubelet: Path
    containerd: Path
    shim: Path
    ctr: Path
    crictl: Path

    def missing(self) -> list[str]:
        return [
            str(p) for p in (self.kubelet, self.containerd, self.shim, self.ctr) if not os.access(p, os.X_OK)
        ]


def node_binaries() -> NodeBinaries:
    values: dict[str, str] = {}
    for raw in VERSIONS_FILE.read_text().splitlines():
        key, sep, value = raw.strip().partition("=")
        if sep and not key.startswith("#"):
            values[key] = value.strip()
    cache = cache_dir()
    k8s = cache / f"kubernetes-{read_versions().kubernetes}" / "bin"
    containerd = cache / f"containerd-{values['CONTAINERD_VERSION']}" / "bin"
    return NodeBinaries(
        kubelet=k8s / "kubelet",
        containerd=containerd / "containerd",
        shim=containerd / "containerd-shim-runc-v2",
        ctr=containerd / "ctr",
        crictl=cache / f"cri-tools-{values['CRI_TOOLS_VERSION']}" / "bin" / "crictl",
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class NodeError(RuntimeError):
    pass


class RealNode:
    """containerd + kubelet processes registering node ``name`` with the API server of
    ``kubeconfig`` (the test-bed's admin kubeconfig; the CA is ``ca_cert``)."""

    def __init__(self, run_dir: Path, kubeconfig: Path, ca_cert: Path, name: str = NODE_NAME) -> None:
        self.dir = run_dir / "node"
        self.kubeconfig = kubeconfig
        self.ca_cert = ca_cert
        self.name = name
        self.bins = node_binaries()
        self.containerd_dir = self.dir / "containerd"
        self.socket = self.containerd_dir / "containerd.sock"
        self.kubelet_dir = self.dir / "kubelet"
        self.registry_dir = self.kubelet_dir / "plugins_registry"
        self.plugins_dir = self.kubelet_dir / "plugins"
        self.cdi_dir = self.dir / "cdi"
        self.pod_logs_dir = self.dir / "pod-logs"
        self.logs_dir = self.dir / "logs"
        self.kubelet_port = free_port()
        self.healthz_port = free_port()
        self._procs: dict[str, subprocess.Popen[bytes]] = {}

    # -- configuration -------------------------------------------------------------------

    def containerd_config(self) -> str:
        d = self.containerd_dir
        cri = "plugins.'io.containerd.cri.v1.runtime'"
        return f"""version = 3
root = "{d / "root"}"
state = "{d / "state"}"

[grpc]
  address = "{self.socket}"

[ttrpc]
  address = "{d / "containerd.sock.ttrpc"}"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{PAUSE_IMAGE}"

[{cri}]
  # The fake driver's kubelet plugin writes its CDI specs here (on by default in
  # containerd 2; the directory is the run folder's).
  enable_cdi = true
  cdi_spec_dirs = ["{self.cdi_dir}"]
  # No CAP_SYS_RESOURCE in this sandbox's bounding set: runc cannot lower a process's
  # oom_score_adj (the kubelet asks -998 for sandboxes). Clamp to containerd's own value.
  restrict_oom_score_adj = true
  [{cri}.containerd]
    default_runtime_name = "runc"
    [{cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [{cri}.containerd.runtimes.runc.options]
        BinaryName = "{RUNC}"
        SystemdCgroup = false
  [{cri}.cni]
    bin_dirs = ["{CNI_BIN_DIR}"]
    conf_dir = "{self.dir / "cni" / "net.d"}"
"""

    def cni_config(self) -> str:
        return json.dumps(
            {
                "cniVersion": "1.0.0",
                "name": "dra-quota-testbed",
                "plugins": [
                    {
                        "type": "bridge",
                        "bridge": BRIDGE,
                        "isGateway": True,
                        "ipMasq": False,
                        "ipam": {
                            "type": "host-local",
                            "ranges": [[{"subnet": POD_SUBNET, "gateway": NODE_IP}]],
                            "routes": [{"dst": "0.0.0.0/0"}],
                            "dataDir": str(self.dir / "cni" / "ipam"),
                        },
                    }
                ],
            },
            indent=2,
        )

    def kubelet_config(self) -> str:
        return json.dumps(
            {
                "apiVersion": "kubelet.config.k8s.io/v1beta1",
                "kind": "KubeletConfiguration",
                # This machine has cgroup v1 (hybrid) and no systemd: cgroupfs, and
                # failCgroupV1 false (the kubelet refuses cgroup v1 by default since 1.35).
                "cgroupDriver": "cgroupfs",
                "failCgroupV1": False,
                "failSwapOn": False,
                # The machine's cgroup tree is not the kubelet's: no QoS/kubepods hierarchy.
                "cgroupsPerQOS": False,
                "enforceNodeAllocatable": [],
                "protectKernelDefaults": False,
                "containerRuntimeEndpoint": f"unix://{self.socket}",
                # On the host-only bridge address; the API server (no kubelet client
                # certificate here) reads logs anonymously, so the kubelet's API allows that.
                "address": NODE_IP,
                "port": self.kubelet_port,
                "readOnlyPort": 0,
                "healthzBindAddress": "127.0.0.1",
                "healthzPort": self.healthz_port,
                "authentication": {
                    "anonymous": {"enabled": True},
                    "webhook": {"enabled": False},
                    "x509": {"clientCAFile": str(self.ca_cert)},
                },
                "authorization": {"mode": "AlwaysAllow"},
                "podLogsDir": str(self.pod_logs_dir),
                "resolvConf": "/etc/resolv.conf",
                # The sandbox's disk may be nearly full: never evict or GC images for it.
                "evictionHard": {
                    "memory.available": "1Mi",
                    "nodefs.available": "0%",
                    "imagefs.available": "0%",
                },
                "imageGCHighThresholdPercent": 100,
                "imageGCLowThresholdPercent": 99,
                "localStorageCapacityIsolation": False,
                "serializeImagePulls": False,
                "nodeStatusReportFrequency": "10s",
                "nodeStatusUpdateFrequency": "5s",
                "syncFrequency": "10s",
                "fileCheckFrequency": "10s",
                "volumeStatsAggPeriod": "0s",
            },
            indent=2,
        )

    # -- lifecycle -----------------------------------------------------------------------

    def start(self, timeout: float = 120.0) -> None:
        missing = self.bins.missing()
        if missing:
            raise NodeError(f"missing {missing}: run `e2e/build-binaries.sh --node`")
        for tool in (RUNC, CNI_BIN_DIR / "bridge", CNI_BIN_DIR / "host-local"):
            if not tool.exists():
                raise NodeError(f"{tool} missing: apt-get install runc containernetworking-plugins")
        for d in (
            self.containerd_dir,
            self.kubelet_dir,
            self.cdi_dir,
            self.pod_logs_dir,
            self.logs_dir,
            self.dir / "cni" / "net.d",
            self.registry_dir,
            self.plugins_dir,
        ):
            d.mkdir(parents=True, exist_ok=True)
        self._bridge()
        (self.containerd_dir / "config.toml").write_text(self.containerd_config())
        (self.dir / "cni" / "net.d" / "10-dra-quota-testbed.conflist").write_text(self.cni_config())
        (self.kubelet_dir / "config.json").write_text(self.kubelet_config())
        env = {**os.environ, "PATH": f"{self.bins.shim.parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
        self._spawn(
            "containerd",
            [str(self.bins.containerd), "--config", str(self.containerd_dir / "config.toml")],
            env,
        )
        self._wait(
            lambda: self.socket.exists() and self._ctr("version").returncode == 0, "containerd", timeout
        )
        import_archive(self.bins.ctr, self.socket, busybox_archive(self.dir / "busybox.tar"))
        self._spawn(
            "kubelet",
            [
                str(self.bins.kubelet),
                f"--config={self.kubelet_dir / 'config.json'}",
                f"--kubeconfig={self.kubeconfig}",
                f"--root-dir={self.kubelet_dir}",
                f"--cert-dir={self.kubelet_dir / 'pki'}",
                f"--hostname-override={self.name}",
                f"--node-ip={NODE_IP}",
                f"--node-labels={GPU_LABEL}",
                "--v=2",
            ],
            env,
        )
        self._wait(self._healthy, "kubelet /healthz", timeout)

    def _bridge(self) -> None:
        """Create the CNI's bridge with the node's address before the kubelet starts (the
        bridge plugin would create it only with the first pod)."""
        if subprocess.run(["ip", "link", "show", BRIDGE], capture_output=True).returncode != 0:
            subprocess.run(["ip", "link", "add", BRIDGE, "type", "bridge"], check=True, capture_output=True)
        subprocess.run(
            ["ip", "addr", "replace", f"{NODE_IP}/24", "dev", BRIDGE], check=True, capture_output=True
        )
        subprocess.run(["ip", "link", "set", BRIDGE, "up"], check=True, capture_output=True)

    def import_image(self, archive: Path) -> str:
        return import_archive(self.bins.ctr, self.socket, archive)

    def stop(self) -> None:
        """Stop the kubelet, remove every pod sandbox through the CRI (containerd tears down
        their network namespaces), kill what is left (shims outlive containerd), stop
        containerd, delete the bridge and unmount what was mounted under the node folder."""
        self._terminate("kubelet")
        if "containerd" in self._procs and self._procs["containerd"].poll() is None:
            if self.bins.crictl.exists():
                subprocess.run(
                    [
                        str(self.bins.crictl),
                        "--runtime-endpoint",
                        f"unix://{self.socket}",
                        "rmp",
                        "--all",
                        "--force",
                    ],
                    capture_output=True,
                    timeout=120,
                    check=False,
                )
            tasks = self._ctr("tasks", "ls", "-q").stdout.split()
            for task in tasks:
                self._ctr("tasks", "kill", "-s", "SIGKILL", task)
            deadline = time.monotonic() + 15
            for task in tasks:
                while self._ctr("tasks", "delete", task).returncode != 0 and time.monotonic() < deadline:
                    time.sleep(0.3)
        self._terminate("containerd")
        self._kill_shims()
        subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True, check=False)
        self.unmount_all()
        # The images (a few hundred MB); logs, configuration and CDI specs stay for a look.
        shutil.rmtree(self.containerd_dir / "root", ignore_errors=True)

    def _kill_shims(self) -> None:
        needle = str(self.socket).encode()
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                cmdline = (proc / "cmdline").read_bytes()
                if cmdline.startswith(str(self.bins.shim).encode()) and needle in cmdline:
                    os.kill(int(proc.name), signal.SIGKILL)

    def unmount_all(self) -> None:
        prefix = str(self.dir) + "/"
        mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
        for point in reversed(mounts):
            point = point.replace("\\040", " ")
            if point.startswith(prefix):
                subprocess.run(["umount", "-l", point], check=False, capture_output=True)

    def remove(self) -> None:
        self.unmount_all()
        shutil.rmtree(self.dir, ignore_errors=True)

    def log_tail(self, name: str, lines: int = 40) -> str:
        path = self.logs_dir / f"{name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    # -- helpers -------------------------------------------------------------------------

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        with (self.logs_dir / f"{name}.log").open("ab") as log:  # the child keeps its own descriptor
            self._procs[name] = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )

    def _terminate(self, name: str, grace: float = 15.0) -> None:
        proc = self._procs.get(name)
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    def _ctr(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bins.ctr), "--address", str(self.socket), "-n", "k8s.io", *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.healthz_port}/healthz", timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def _wait(self, check: Callable[[], bool], what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self._procs.items():
                if proc.poll() is not None:
                    raise NodeError(
                        f"{name} exited ({proc.returncode}) while waiting for {what}:\n{self.log_tail(name)}"
                    )
            if check():
                return
            time.sleep(0.5)
        raise NodeError(f"{what} not ready within {timeout:.0f}s")
