"""Kueue's manager (built by `e2e/build-binaries.sh --kueue`) run out of cluster.

Kueue runs against the test-bed's kubeconfig with a Configuration derived from the
scenario's: no leader election, no internal cert management, VisibilityOnDemand off (it
needs an in-cluster Service), metrics, health probes and webhooks bound to loopback ports.
Its webhook server serves the test-bed's serving certificate (valid for 127.0.0.1) and its
Job and kueue.x-k8s.io webhooks are registered with `url` client configs, so a Job is
mutated and validated at creation as in a real install. With internal cert management off,
Kueue reads its metrics certificate from the fixed path /etc/kueue/metrics/certs: it runs
in a private mount namespace (unshare) whose /etc is an overlay, so that path exists for
it alone and the host's /etc is untouched.
"""

from __future__ import annotations

import base64
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e2e.conformance.podhooks import is_pod_hook, scoped_to
from e2e.support.deploy import free_port
from e2e.support.process import ManagedProcess
from e2e.testbed.paths import VERSIONS_FILE, cache_dir

Obj = dict[str, Any]

# webhooks of these API groups are registered; the others belong to integrations not enabled
WEBHOOK_GROUPS = frozenset({"batch", "kueue.x-k8s.io"})
# with the leaderworkerset framework also those of the sets and of their pods (core: "")
LWS_WEBHOOK_GROUPS = WEBHOOK_GROUPS | {"leaderworkerset.x-k8s.io", ""}
# The CRDs whose v1beta1 Kueue converts with its webhook (its config/components/crd patches
# webhook_in_*.yaml; the CRDs of the build carry no conversion, so the runner adds it on loopback)
KUEUE_CONVERSION_CRDS = tuple(
    f"{plural}.kueue.x-k8s.io"
    for plural in ("clusterqueues", "cohorts", "localqueues", "workloads", "multikueueclusters")
)


@dataclass(frozen=True)
class KueueBuild:
    version: str
    binary: Path
    crds: Path
    webhooks: Path

    def missing(self) -> list[Path]:
        return [p for p in (self.binary, self.crds, self.webhooks) if not p.exists()]


def kueue_build(cache: Path | None = None) -> KueueBuild:
    values = dict(
        line.split("=", 1)
        for line in VERSIONS_FILE.read_text().splitlines()
        if "=" in line and not line.lstrip().startswith("#")
    )
    version = values["KUEUE_VERSION"].strip()
    # Built with the TrainJob integration, against Kubeflow Trainer's module (build-binaries.sh).
    root = (cache or cache_dir()) / f"kueue-{version}-trainer-{values['TRAINER_VERSION'].strip()}"
    return KueueBuild(version, root / "bin" / "kueue", root / "crds", root / "webhook" / "manifests.yaml")


def kueue_configuration(
    base: Obj, *, metrics: int, health: int, webhook: int, cert_dir: Path, visibility: int | None = None
) -> Obj:
    """The scenario's Configuration with the out-of-cluster settings on top (with `visibility`, the
    visibility server on that loopback port; else VisibilityOnDemand off)."""
    config = dict(base)
    config.update(
        {
            "namespace": "kueue-system",
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "metrics": {"bindAddress": f"127.0.0.1:{metrics}"},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
            "webhook": {"host": "127.0.0.1", "port": webhook, "certDir": str(cert_dir)},
            "featureGates": {
                **(base.get("featureGates") or {}),
                "VisibilityOnDemand": visibility is not None,
            },
        }
    )
    if visibility is not None:
        config["visibilityServer"] = {"bindAddress": "127.0.0.1", "bindPort": visibility}
    return config


def webhook_configurations(
    manifests: Path,
    port: int,
    ca_bundle: bytes,
    groups: frozenset[str] = WEBHOOK_GROUPS,
    pod_namespaces: tuple[str, ...] = (),
) -> list[Obj]:
    """Kueue's webhook configurations for `groups`, pointing at 127.0.0.1:port by url; with
    `pod_namespaces` (a scenario enabling the pod framework) its pod webhooks too, scoped to those
    namespaces (podhooks.py)."""
    out: list[Obj] = []
    ca = base64.b64encode(ca_bundle).decode()
    for doc in yaml.safe_load_all(manifests.read_text()):
        if not isinstance(doc, dict):
            continue
        hooks = []
        for hook in doc.get("webhooks") or []:
            hook_groups = {g for rule in hook.get("rules") or [] for g in rule.get("apiGroups") or []}
            if pod_namespaces and is_pod_hook(hook):
                hook = scoped_to(hook, pod_namespaces)
            elif not hook_groups or not hook_groups <= groups:
                continue
            path = hook["clientConfig"]["service"]["path"]
            hooks.append({**hook, "clientConfig": {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca}})
        if hooks:
            name = f"kueue-{doc['metadata']['name']}"
            out.append(
                {
                    "apiVersion": doc["apiVersion"],
                    "kind": doc["kind"],
                    "metadata": {"name": name},
                    "webhooks": hooks,
                }
            )
    return out


VISIBILITY_CERTS = Path("/visibility")


class KueueProcess(ManagedProcess):
    """Kueue's manager as a child process in a private mount namespace, logging to a file."""

    what = "kueue"
    ready_within = 90.0

    def __init__(
        self,
        build: KueueBuild,
        kubeconfig: Path,
        workdir: Path,
        base_config: Obj,
        *,
        visibility: bool = False,
    ) -> None:
        self.build = build
        self.visibility_port = free_port() if visibility else None
        self.kubeconfig = kubeconfig
        self.workdir = workdir
        self.metrics_port = free_port()
        self.health_port = free_port()
        self.webhook_port = free_port()
        self.cert_dir = workdir / "certs"
        self.config = kueue_configuration(
            base_config,
            metrics=self.metrics_port,
            health=self.health_port,
            webhook=self.webhook_port,
            cert_dir=self.cert_dir,
            visibility=self.visibility_port,
        )
        self.log_path = workdir / "kueue.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, serving_cert: Path, serving_key: Path) -> None:
        self.cert_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(serving_cert, self.cert_dir / "tls.crt")
        shutil.copyfile(serving_key, self.cert_dir / "tls.key")
        config_path = self.workdir / "kueue-config.yaml"
        config_path.write_text(yaml.safe_dump(self.config, sort_keys=False))
        overlay = self.workdir / "etc-overlay"
        for sub in ("upper", "work"):
            (overlay / sub).mkdir(parents=True, exist_ok=True)
        q = shlex.quote
        script = (
            f"mount -t overlay overlay -o lowerdir=/etc,upperdir={q(str(overlay / 'upper'))},"
            f"workdir={q(str(overlay / 'work'))} /etc"
            " && mkdir -p /etc/kueue/metrics/certs"
            f" && cp {q(str(self.cert_dir / 'tls.crt'))} {q(str(self.cert_dir / 'tls.key'))}"
            " /etc/kueue/metrics/certs/"
            f"{self._visibility_mount()}"
            f" && exec {q(str(self.build.binary))} --config={q(str(config_path))} --zap-log-level=2"
            f" --kubeconfig={q(str(self.kubeconfig))}"
        )
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "KUBECONFIG": str(self.kubeconfig)},
            start_new_session=True,
        )
        log.close()

    def _visibility_mount(self) -> str:
        """With the visibility server: its certificate where it reads it, /visibility/tls.{crt,key}
        (a fixed path in Kueue), bind-mounted from the run's folder in the private mount namespace;
        the host keeps an empty /visibility (made once) for the mount point."""
        if self.visibility_port is None:
            return ""
        VISIBILITY_CERTS.mkdir(exist_ok=True)
        q = shlex.quote
        return f" && mount --bind {q(str(self.cert_dir))} {q(str(VISIBILITY_CERTS))}"
