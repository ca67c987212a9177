"""LeaderWorkerSet's own manager (built by `e2e/build-binaries.sh --lws`) run out of cluster on
the test-bed, with its CRD and its admission webhooks.

It runs against the test-bed's kubeconfig with a configuration of its own
(config.lws.x-k8s.io/v1alpha1): no leader election, no internal cert management (its
cert rotator would want a Secret and a Service), its webhook server on a loopback port serving a
certificate for 127.0.0.1, metrics off, health probes on a loopback port. Its webhook
configurations (from its module, with the patches that give its pod webhooks their object
selector, as its kustomize build applies them) are registered with `url` client configs: its
set webhooks default and validate a LeaderWorkerSet at creation, and its pod webhook labels each
leader pod with its group's index and each worker with its own (the LWS controller's pod
reconciler and this controller's grouping read them).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e2e.support.deploy import apply_manifests, free_port, load_documents, wait_established
from e2e.support.process import ManagedProcess
from e2e.support.webhooks import loopback_certificate, upstream_on_loopback
from e2e.testbed.paths import VERSIONS_FILE, cache_dir

__all__ = [
    "LWS_API",
    "LWS_FRAMEWORK",
    "LwsBuild",
    "LwsProcess",
    "enables_lws",
    "install_lws_crds",
    "lws_build",
    "lws_webhooks",
]

LWS_API = "leaderworkerset.x-k8s.io/v1"
LWS_FRAMEWORK = "leaderworkerset.x-k8s.io/leaderworkerset"
Obj = dict[str, Any]


@dataclass(frozen=True)
class LwsBuild:
    version: str
    binary: Path
    crds: Path
    webhook: Path

    def missing(self) -> list[Path]:
        return [p for p in (self.binary, self.crds, self.webhook / "manifests.yaml") if not p.exists()]

    def crd_files(self) -> list[Path]:
        return sorted(self.crds.glob("*.yaml"))


def lws_build(cache: Path | None = None) -> LwsBuild:
    values = dict(
        line.split("=", 1)
        for line in VERSIONS_FILE.read_text().splitlines()
        if "=" in line and not line.lstrip().startswith("#")
    )
    version = values["LWS_VERSION"].strip()
    root = (cache or cache_dir()) / f"lws-{version}"
    return LwsBuild(version, root / "bin" / "lws", root / "crds", root / "webhook")


def lws_webhooks(build: LwsBuild, port: int, ca_pem: bytes) -> list[Obj]:
    """LeaderWorkerSet's webhook configurations, patched, each webhook called at 127.0.0.1:port."""
    patches = {
        "MutatingWebhookConfiguration": build.webhook / "mutating-patch.yaml",
        "ValidatingWebhookConfiguration": build.webhook / "validating-patch.yaml",
    }
    return upstream_on_loopback(
        load_documents(build.webhook / "manifests.yaml"), patches, port, ca_pem, "lws"
    )


class LwsProcess(ManagedProcess):
    """LeaderWorkerSet's manager as a child process (its own process group), logging to a file."""

    what = "the LeaderWorkerSet manager"

    def __init__(self, build: LwsBuild, kubeconfig: Path, workdir: Path) -> None:
        self.build = build
        self.kubeconfig = kubeconfig
        self.workdir = workdir
        self.health_port = free_port()
        self.webhook_port = free_port()
        self.cert_dir = workdir / "certs"
        self.log_path = workdir / "lws.log"
        self.ca_pem = b""
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.cert_dir.mkdir(parents=True, exist_ok=True)
        self.ca_pem = loopback_certificate(self.cert_dir).ca.cert_pem
        config = {
            "apiVersion": "config.lws.x-k8s.io/v1alpha1",
            "kind": "Configuration",
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {"host": "127.0.0.1", "port": self.webhook_port, "certDir": str(self.cert_dir)},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": "0"},
        }
        config_path = self.workdir / "lws-config.yaml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        log = self.log_path.open("ab")
        # --leader-elect defaults to true as a flag, but a flag only wins when given: the
        # configuration's leaderElect stands. The metrics flag likewise defers to the file.
        self.process = subprocess.Popen(
            [str(self.build.binary), f"--config={config_path}", "--zap-log-level=2"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "KUBECONFIG": str(self.kubeconfig)},
            start_new_session=True,
        )
        log.close()


def enables_lws(configuration: Path) -> bool:
    """Whether a Configuration file names the leaderworkerset framework in integrations.frameworks."""
    doc = yaml.safe_load(configuration.read_text()) or {}
    return LWS_FRAMEWORK in ((doc.get("integrations") or {}).get("frameworks") or [])


async def install_lws_crds(kube: Any, build: LwsBuild | None = None) -> None:
    """LeaderWorkerSet's CRD from its module (`e2e/build-binaries.sh --lws`), established."""
    build = build or lws_build()
    if build.missing():
        raise FileNotFoundError(
            f"LeaderWorkerSet is not built ({build.missing()[0]}): run e2e/setup.sh --lws"
        )
    await wait_established(kube, await apply_manifests(kube, *build.crd_files()))
