"""KubeRay's ray-operator (built by `e2e/build-binaries.sh --kuberay` from
github.com/ray-project/kuberay/ray-operator at the version e2e/versions.env pins) run out of
cluster on the test-bed, with its RayCluster and RayJob CRDs.

It runs against the test-bed's kubeconfig with flags of its own: no leader election, metrics
off, health probes on a loopback port, logs on the console. Its webhooks are off (KubeRay serves
them only with ENABLE_WEBHOOKS=true; its Helm chart ships them off).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from e2e.support.deploy import free_port
from e2e.support.process import ManagedProcess
from e2e.support.upstream import UpstreamBuild, enables, install_upstream_crds, upstream_build

__all__ = [
    "RAY_API",
    "RAY_FRAMEWORKS",
    "KubeRayProcess",
    "enables_ray",
    "install_kuberay_crds",
    "kuberay_build",
]

RAY_API = "ray.io/v1"
RAY_FRAMEWORKS = ("ray.io/rayjob", "ray.io/raycluster")


class KubeRayBuild(UpstreamBuild):
    def missing(self) -> list[Path]:
        return [p for p in (self.binary, self.crds) if not p.exists()]


def kuberay_build(cache: Path | None = None) -> KubeRayBuild:
    found = upstream_build("kuberay", "KUBERAY_VERSION", "kuberay", cache)
    root = found.binary.parent.parent
    return KubeRayBuild(
        found.name, found.flag, found.version, root / "bin" / "ray-operator", found.crds, found.webhook
    )


class KubeRayProcess(ManagedProcess):
    """KubeRay's operator as a child process (its own process group), logging to a file."""

    what = "the KubeRay operator"

    def __init__(self, build: KubeRayBuild, kubeconfig: Path, workdir: Path) -> None:
        self.build = build
        self.kubeconfig = kubeconfig
        self.health_port = free_port()
        self.log_path = workdir / "kuberay.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [
                str(self.build.binary),
                "--enable-leader-election=false",
                "--metrics-addr=0",
                f"--health-probe-bind-address=127.0.0.1:{self.health_port}",
                "--log-stdout-encoder=console",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "KUBECONFIG": str(self.kubeconfig)},
            start_new_session=True,
        )
        log.close()


def enables_ray(configuration: Path) -> bool:
    """Whether a Configuration file names a ray framework in integrations.frameworks."""
    return any(enables(configuration, name) for name in RAY_FRAMEWORKS)


async def install_kuberay_crds(kube: Any, build: KubeRayBuild | None = None) -> None:
    """KubeRay's RayCluster and RayJob CRDs from its module, established."""
    await install_upstream_crds(kube, build or kuberay_build(), "KubeRay")
