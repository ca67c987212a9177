"""JobSet's own manager (built by `e2e/build-binaries.sh --jobset`) run out of cluster on the
test-bed, with its CRD and its admission webhooks.

It runs against the test-bed's kubeconfig with a configuration of its own: no leader election,
no internal cert management, its webhook server on a loopback port serving a certificate for
127.0.0.1, metrics off, health probes on a loopback port. Its webhook configurations (from its
module, with the patches that give its pod webhooks their object selectors, as its kustomize
build applies them) are registered with `url` client configs, so a JobSet is defaulted and
validated at creation as in a real install, and its Jobs' pods are checked by its pod webhooks.
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
    "JOBSET_FRAMEWORK",
    "JobSetBuild",
    "JobSetProcess",
    "enables_jobset",
    "install_jobset_crds",
    "jobset_build",
    "jobset_webhooks",
]

Obj = dict[str, Any]


@dataclass(frozen=True)
class JobSetBuild:
    version: str
    binary: Path
    crds: Path
    webhook: Path

    def missing(self) -> list[Path]:
        return [p for p in (self.binary, self.crds, self.webhook / "manifests.yaml") if not p.exists()]

    def crd_files(self) -> list[Path]:
        return sorted(self.crds.glob("*.yaml"))


def jobset_build(cache: Path | None = None) -> JobSetBuild:
    values = dict(
        line.split("=", 1)
        for line in VERSIONS_FILE.read_text().splitlines()
        if "=" in line and not line.lstrip().startswith("#")
    )
    version = values["JOBSET_VERSION"].strip()
    root = (cache or cache_dir()) / f"jobset-{version}"
    return JobSetBuild(version, root / "bin" / "jobset", root / "crds", root / "webhook")


def jobset_webhooks(build: JobSetBuild, port: int, ca_pem: bytes) -> list[Obj]:
    """JobSet's webhook configurations, patched, each webhook called at 127.0.0.1:port."""
    patches = {
        "MutatingWebhookConfiguration": build.webhook / "mutating-patch.yaml",
        "ValidatingWebhookConfiguration": build.webhook / "validating-patch.yaml",
    }
    return upstream_on_loopback(
        load_documents(build.webhook / "manifests.yaml"), patches, port, ca_pem, "jobset"
    )


class JobSetProcess(ManagedProcess):
    """JobSet's manager as a child process (its own process group), logging to a file."""

    what = "the JobSet manager"

    def __init__(self, build: JobSetBuild, kubeconfig: Path, workdir: Path) -> None:
        self.build = build
        self.kubeconfig = kubeconfig
        self.workdir = workdir
        self.health_port = free_port()
        self.webhook_port = free_port()
        self.cert_dir = workdir / "certs"
        self.log_path = workdir / "jobset.log"
        self.ca_pem = b""
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.cert_dir.mkdir(parents=True, exist_ok=True)
        self.ca_pem = loopback_certificate(self.cert_dir).ca.cert_pem
        config = {
            "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
            "kind": "Configuration",
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {"host": "127.0.0.1", "port": self.webhook_port, "certDir": str(self.cert_dir)},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": "0"},
        }
        config_path = self.workdir / "jobset-config.yaml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [str(self.build.binary), f"--config={config_path}", "--zap-log-level=2"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "KUBECONFIG": str(self.kubeconfig)},
            start_new_session=True,
        )
        log.close()


JOBSET_FRAMEWORK = "jobset.x-k8s.io/jobset"


def enables_jobset(configuration: Path) -> bool:
    """Whether a Configuration file names the jobset framework in integrations.frameworks."""
    doc = yaml.safe_load(configuration.read_text()) or {}
    return JOBSET_FRAMEWORK in ((doc.get("integrations") or {}).get("frameworks") or [])


async def install_jobset_crds(kube: Any, build: JobSetBuild | None = None) -> None:
    """JobSet's CRD from its module (`e2e/build-binaries.sh --jobset`), established."""
    build = build or jobset_build()
    if build.missing():
        raise FileNotFoundError(f"JobSet is not built ({build.missing()[0]}): run e2e/setup.sh --jobset")
    await wait_established(kube, await apply_manifests(kube, *build.crd_files()))
