"""The AppWrapper controller (built by `e2e/build-binaries.sh --appwrapper` from
github.com/project-codeflare/appwrapper at the version e2e/versions.env pins, the one Kueue
v0.18.1's go.mod pins) run out of cluster on the test-bed, with its AppWrapper CRD.

AppWrapper v1.2.2 has one mode: an external Kueue admits its AppWrappers (it suspends nothing
itself, creates an AppWrapper's components once ``spec.suspend`` is false, with the
``podSetInfos`` Kueue gave it merged into their pod templates, and reports ``QuotaReserved``,
``PodsReady`` and its phase). Its configuration comes from a ConfigMap in ``$NAMESPACE`` (made
here before it starts): leader election off, metrics off, health probes on a loopback port, its
Autopilot node monitoring and anti-affinities off (they watch nvidia.com/gpu taints this test-bed
has none of), and its own webhooks off: they need its in-cluster cert rotation (a Secret and a
Service's DNS name); they add user labels and check components, nothing the tests here read.
Its /readyz would start the webhook server it does not run, so readiness is read from /healthz.
"""

from __future__ import annotations

import os
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from e2e.support.deploy import free_port
from e2e.support.process import ManagedProcess
from e2e.support.upstream import UpstreamBuild, install_upstream_crds, upstream_build
from e2e.testbed import ApiError, KubeClient, api_path

__all__ = [
    "APPWRAPPER_API",
    "APPWRAPPER_FRAMEWORK",
    "AppWrapperProcess",
    "appwrapper_build",
    "install_appwrapper_crds",
]

APPWRAPPER_API = "workload.codeflare.dev/v1beta2"
APPWRAPPER_FRAMEWORK = "workload.codeflare.dev/appwrapper"
SYSTEM_NAMESPACE = "appwrapper-system"
Obj = dict[str, Any]


class AppWrapperBuild(UpstreamBuild):
    def missing(self) -> list[Path]:
        return [p for p in (self.binary, self.crds) if not p.exists()]


def appwrapper_build(cache: Path | None = None) -> AppWrapperBuild:
    found = upstream_build("appwrapper", "APPWRAPPER_VERSION", "appwrapper", cache)
    return AppWrapperBuild(found.name, found.flag, found.version, found.binary, found.crds, found.webhook)


async def install_appwrapper_crds(kube: Any, build: AppWrapperBuild | None = None) -> None:
    await install_upstream_crds(kube, build or appwrapper_build(), "AppWrapper")


class AppWrapperProcess(ManagedProcess):
    """The AppWrapper controller as a child process (its own process group), logging to a file."""

    what = "the AppWrapper controller"

    def __init__(self, build: AppWrapperBuild, kubeconfig: Path, workdir: Path) -> None:
        self.build = build
        self.kubeconfig = kubeconfig
        self.health_port = free_port()
        self.log_path = workdir / "appwrapper.log"
        self.config_name = f"appwrapper-config-{self.health_port}"
        self.process: subprocess.Popen[bytes] | None = None

    def configuration(self) -> Obj:
        return {
            "appwrapper": {
                "autopilot": {"injectAntiAffinities": False, "monitorNodes": False},
                "userRBACAdmissionCheck": False,
            },
            "controllerManager": {
                "metrics": {"bindAddress": "0"},
                "health": {"bindAddress": f"127.0.0.1:{self.health_port}"},
                "leaderElection": False,
            },
            "webhooksEnabled": False,
        }

    async def write_configuration(self, kube: KubeClient) -> None:
        """Its namespace (where missing) and its ConfigMap."""
        try:
            namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}}
            await kube.create(api_path("v1", "namespaces"), namespace)
        except ApiError as err:
            if err.status != 409:
                raise
        config_map = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": self.config_name, "namespace": SYSTEM_NAMESPACE},
            "data": {"config.yaml": yaml.safe_dump(self.configuration())},
        }
        await kube.create(api_path("v1", "configmaps", SYSTEM_NAMESPACE), config_map)

    def start(self) -> None:
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [str(self.build.binary), f"--config={self.config_name}", "--zap-devel=false"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "KUBECONFIG": str(self.kubeconfig), "NAMESPACE": SYSTEM_NAMESPACE},
            start_new_session=True,
        )
        log.close()

    def wait_ready(self, within: float | None = None) -> None:
        """Until /healthz answers 200 (see the module's docstring)."""
        deadline = time.monotonic() + (self.ready_within if within is None else within)
        url = f"http://127.0.0.1:{self.health_port}/healthz"
        while time.monotonic() < deadline:
            if not self.alive():
                code = None if self.process is None else self.process.returncode
                raise RuntimeError(f"{self.what} exited ({code}):\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        raise TimeoutError(f"{self.what} was not ready:\n{self.log_tail()}")
