"""What the upstream managers run out of cluster on the test-bed share (JobSet's in jobset.py,
LeaderWorkerSet's in lws.py): their build in the cache (binary, CRDs, webhook manifests and the
patches their kustomize build applies), their webhook configurations called on loopback, the
manager as a child process with a configuration of its own (no leader election, no internal cert
management, webhook server and health probes on loopback ports, metrics off), and whether a
Configuration enables their framework."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

from e2e.support.deploy import apply_manifests, free_port, load_documents, wait_established
from e2e.support.process import ManagedProcess
from e2e.support.webhooks import loopback_certificate, register, unregister, upstream_on_loopback
from e2e.testbed import KubeClient
from e2e.testbed.paths import VERSIONS_FILE, cache_dir

__all__ = [
    "UpstreamBuild",
    "UpstreamProcess",
    "enables",
    "install_upstream_crds",
    "run_for_module",
    "upstream_build",
    "upstream_webhooks",
]

Obj = dict[str, Any]
P = TypeVar("P", bound="UpstreamProcess")


@dataclass(frozen=True)
class UpstreamBuild:
    name: str  # e.g. "jobset": the cache folder `<name>-<version>`, the setup.sh flag `--<flag>`
    flag: str
    version: str
    binary: Path
    crds: Path
    webhook: Path

    def missing(self) -> list[Path]:
        return [p for p in (self.binary, self.crds, self.webhook / "manifests.yaml") if not p.exists()]

    def crd_files(self) -> list[Path]:
        return sorted(self.crds.glob("*.yaml"))


def upstream_build(name: str, version_key: str, flag: str, cache: Path | None = None) -> UpstreamBuild:
    """The cached build of `name` at the version e2e/versions.env pins under `version_key`."""
    values = dict(
        line.split("=", 1)
        for line in VERSIONS_FILE.read_text().splitlines()
        if "=" in line and not line.lstrip().startswith("#")
    )
    version = values[version_key].strip()
    root = (cache or cache_dir()) / f"{name}-{version}"
    return UpstreamBuild(name, flag, version, root / "bin" / name, root / "crds", root / "webhook")


def upstream_webhooks(build: UpstreamBuild, port: int, ca_pem: bytes) -> list[Obj]:
    """The manager's webhook configurations, patched, each webhook called at 127.0.0.1:port."""
    patches = {
        "MutatingWebhookConfiguration": build.webhook / "mutating-patch.yaml",
        "ValidatingWebhookConfiguration": build.webhook / "validating-patch.yaml",
    }
    manifests = load_documents(build.webhook / "manifests.yaml")
    return upstream_on_loopback(manifests, patches, port, ca_pem, build.name)


async def install_upstream_crds(kube: Any, build: UpstreamBuild, what: str) -> None:
    """The manager's CRDs from its module (`e2e/build-binaries.sh --<flag>`), established."""
    if build.missing():
        raise FileNotFoundError(
            f"{what} is not built ({build.missing()[0]}): run e2e/setup.sh --{build.flag}"
        )
    await wait_established(kube, await apply_manifests(kube, *build.crd_files()))


def enables(configuration: Path, framework: str) -> bool:
    """Whether a Configuration file names `framework` in integrations.frameworks."""
    doc = yaml.safe_load(configuration.read_text()) or {}
    return framework in ((doc.get("integrations") or {}).get("frameworks") or [])


class UpstreamProcess(ManagedProcess):
    """An upstream manager as a child process (its own process group), logging to a file."""

    what = "an upstream manager"
    config_api = ""  # its Configuration's apiVersion

    def __init__(self, build: UpstreamBuild, kubeconfig: Path, workdir: Path) -> None:
        self.build = build
        self.kubeconfig = kubeconfig
        self.workdir = workdir
        self.health_port = free_port()
        self.webhook_port = free_port()
        self.cert_dir = workdir / "certs"
        self.log_path = workdir / f"{build.name}.log"
        self.ca_pem = b""
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.cert_dir.mkdir(parents=True, exist_ok=True)
        ca = self.cert_dir / "ca.crt"
        # Started again (a restart), it keeps its certificate: its registered webhooks trust it.
        self.ca_pem = ca.read_bytes() if ca.is_file() else loopback_certificate(self.cert_dir).ca.cert_pem
        config = {
            "apiVersion": self.config_api,
            "kind": "Configuration",
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {"host": "127.0.0.1", "port": self.webhook_port, "certDir": str(self.cert_dir)},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": "0"},
        }
        config_path = self.workdir / f"{self.build.name}-config.yaml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        log = self.log_path.open("ab")
        # A flag such as --leader-elect (default true) wins only when given: the file's stands.
        self.process = subprocess.Popen(
            [str(self.build.binary), f"--config={config_path}", "--zap-log-level=2"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "KUBECONFIG": str(self.kubeconfig)},
            start_new_session=True,
        )
        log.close()


def run_for_module(process: P, kubeconfig: Path, what: str) -> Generator[P, None, int | None]:
    """An upstream manager for a test module (`code = yield from run_for_module(...)` in a module
    fixture, which yields the process): its CRDs installed, started, its webhooks registered on
    loopback; at the end unregistered and stopped. Returns the manager's exit code."""

    async def up() -> list[Obj]:
        async with KubeClient.from_kubeconfig(kubeconfig) as kube:
            await install_upstream_crds(kube, process.build, what)
            process.start()
            await process.wait_ready_async()
            hooks = upstream_webhooks(process.build, process.webhook_port, process.ca_pem)
            return await register(kube, hooks)

    hooks = asyncio.run(up())
    yield process

    async def down() -> None:
        async with KubeClient.from_kubeconfig(kubeconfig) as kube:
            await unregister(kube, hooks)

    asyncio.run(down())
    return process.stop()
