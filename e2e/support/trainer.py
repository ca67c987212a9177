"""Kubeflow Trainer's own manager (built by `e2e/build-binaries.sh --trainer`) run out of cluster on
the test-bed, with its CRDs (TrainJob, TrainingRuntime, ClusterTrainingRuntime) and its admission
webhooks.

It runs against the test-bed's kubeconfig with a configuration of its own
(config.trainer.kubeflow.org/v1alpha1, decoded strictly: no leader election, no certificate
management, its webhook server on a loopback port, metrics off, health probes on a loopback
port). Its configuration has no certificate directory: controller-runtime's default,
`$TMPDIR/k8s-webhook-server/serving-certs`, is pointed at the run's own by TMPDIR. Its webhook
configurations (from its module; its kustomize patches only rename them and their Service) are
registered with `url` client configs, so a TrainJob is defaulted and validated at creation (its
runtime must exist) and a runtime is validated, as in a real install. It makes each TrainJob's
JobSet, so JobSet's CRD must be installed before it starts.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from e2e.support.deploy import load_documents
from e2e.support.upstream import (
    UpstreamBuild,
    UpstreamProcess,
    enables,
    install_upstream_crds,
    upstream_build,
)
from e2e.support.webhooks import loopback_certificate, on_loopback

__all__ = [
    "TRAINJOB_FRAMEWORK",
    "TrainerProcess",
    "enables_trainjob",
    "install_trainer_crds",
    "trainer_build",
    "trainer_webhooks",
]

TRAINJOB_FRAMEWORK = "trainer.kubeflow.org/trainjob"
Obj = dict[str, Any]


def trainer_build(cache: Path | None = None) -> UpstreamBuild:
    return upstream_build("trainer", "TRAINER_VERSION", "trainer", cache)


def trainer_webhooks(build: UpstreamBuild, port: int, ca_pem: bytes) -> list[Obj]:
    """The trainer's webhook configurations, each webhook called at 127.0.0.1:port."""
    out = []
    for doc in on_loopback(load_documents(build.webhook / "manifests.yaml"), port, ca_pem):
        doc["metadata"] = {"name": f"trainer-{doc['metadata']['name']}"}
        out.append(doc)
    return out


class TrainerProcess(UpstreamProcess):
    """The trainer's manager as a child process (its own process group), logging to a file."""

    what = "the Kubeflow Trainer manager"
    config_api = "config.trainer.kubeflow.org/v1alpha1"

    def __init__(self, build: UpstreamBuild, kubeconfig: Path, workdir: Path) -> None:
        super().__init__(build, kubeconfig, workdir)
        self.tmp_dir = workdir / "tmp"
        self.cert_dir = self.tmp_dir / "k8s-webhook-server" / "serving-certs"

    def start(self) -> None:
        self.cert_dir.mkdir(parents=True, exist_ok=True)
        self.ca_pem = loopback_certificate(self.cert_dir).ca.cert_pem
        config = {
            "apiVersion": self.config_api,
            "kind": "Configuration",
            "leaderElection": {"leaderElect": False},
            "certManagement": {"enable": False},
            "webhook": {"host": "127.0.0.1", "port": self.webhook_port},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": "0"},
        }
        config_path = self.workdir / "trainer-config.yaml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [str(self.build.binary), f"--config={config_path}", "--zap-log-level=2"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "KUBECONFIG": str(self.kubeconfig), "TMPDIR": str(self.tmp_dir)},
            start_new_session=True,
        )
        log.close()


def enables_trainjob(configuration: Path) -> bool:
    """Whether a Configuration file names the trainjob framework in integrations.frameworks."""
    return enables(configuration, TRAINJOB_FRAMEWORK)


async def install_trainer_crds(kube: Any, build: UpstreamBuild | None = None) -> None:
    """The trainer's CRDs from its module (`e2e/build-binaries.sh --trainer`), established."""
    await install_upstream_crds(kube, build or trainer_build(), "Kubeflow Trainer")
