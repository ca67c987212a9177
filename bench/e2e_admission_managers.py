"""The manager under test in bench/e2e_admission.py: this controller (`reconciler run`) or
Kueue v0.18.1 (built by `e2e/build-binaries.sh --kueue`) with its shipped or tuned client and
worker settings, started the same way on the test-bed from one Configuration (the same
waitForPodsReady for both, on or off), with what the bench needs to know of each: its pid (CPU, peak RSS),
the field manager that unsuspends Jobs, the component its Events carry and its user agent."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import yaml

from e2e.conformance.kueue import KueueProcess, kueue_build
from e2e.support.deploy import ControllerProcess, apply_objects, install_crds
from e2e.support.flood import CONTROLLER_CONFIG
from e2e.testbed import KubeClient, Testbed

Controller = Literal["ours", "kueue"]
Crds = Literal["ours", "kueue"]
KueueSettings = Literal["shipped", "tuned"]
# The managers a --repeat run interleaves, by name: (controller, Kueue's settings).
MANAGERS: dict[str, tuple[Controller, KueueSettings]] = {
    "ours": ("ours", "shipped"),
    "kueue-tuned": ("kueue", "tuned"),
    "kueue-shipped": ("kueue", "shipped"),
}

# Both managers run with waitForPodsReady on and the same values: this controller turns it on
# when a v1beta2 Configuration leaves it out (timeout 30m, blockAdmission false, recoveryTimeout
# = timeout), Kueue v0.18.1 only when the field is present, so the bench writes it out for both.
WAIT_FOR_PODS_READY = {"timeout": "30m", "blockAdmission": False}
# Off for both: a v1beta2 Configuration cannot say it (this controller turns it on when the field
# is absent), so the bench writes the same Configuration as v1beta1 with `enable: false`, which
# both read as off (Kueue v0.18.1's conversion to v1beta2 drops the field); the other v1beta1
# defaults are those of v1beta2 for what the bench sets.
V1BETA1 = "config.kueue.x-k8s.io/v1beta1"
WAIT_FOR_PODS_READY_OFF = {"enable": False}

# Kueue's shipped manager Configuration (config/components/manager): workers per kind and
# the client's rate, which its defaults (20 qps, burst 30) would otherwise set lower.
SHIPPED_WORKERS = {
    "Job.batch": 5,
    "Pod": 5,
    "Workload.kueue.x-k8s.io": 5,
    "LocalQueue.kueue.x-k8s.io": 1,
    "Cohort.kueue.x-k8s.io": 1,
    "ClusterQueue.kueue.x-k8s.io": 1,
    "ResourceFlavor.kueue.x-k8s.io": 1,
}
KUEUE_SHIPPED: dict[str, Any] = {
    "controller": {"groupKindConcurrency": SHIPPED_WORKERS},
    "clientConnection": {"qps": 50, "burst": 100},
}

# Kueue tuned so that its client is not the bound, like this controller's writer (no token
# bucket, 32 writes in flight): a bucket of 1000 requests/s (burst 2000) is well above what the
# test-bed's API server serves on this machine (the ceiling's bare client reaches a few hundred
# requests/s), and 32 workers for Jobs, Pods and Workloads match the writer's 32 writes in flight.
KUEUE_TUNED: dict[str, Any] = {
    "controller": {
        "groupKindConcurrency": {**SHIPPED_WORKERS, "Job.batch": 32, "Pod": 32, "Workload.kueue.x-k8s.io": 32}
    },
    "clientConnection": {"qps": 1000, "burst": 2000},
}
KUEUE_SETTINGS: dict[KueueSettings, dict[str, Any]] = {"shipped": KUEUE_SHIPPED, "tuned": KUEUE_TUNED}


class Stoppable(Protocol):
    def stop(self, grace: float = 15.0) -> int | None: ...


@dataclass
class RunningManager:
    name: str
    pid: int
    # the managedFields manager of its Job writes; the Events' reporting component
    field_manager: str
    event_component: str
    process: Stoppable
    # the first word of its requests' User-Agent (the audit log's userAgent)
    user_agent: str

    def stop(self) -> int | None:
        return self.process.stop()


async def install(kube: KubeClient, crds: Crds) -> None:
    """The Workload and queue CRDs: this project's (manifests/crds) or Kueue's own."""
    if crds == "ours":
        await install_crds(kube)
        return
    build = kueue_build()
    if build.missing():
        missing = build.missing()[0]
        raise FileNotFoundError(f"Kueue is not built ({missing}): run e2e/build-binaries.sh --kueue")
    objects = await asyncio.to_thread(_load_crds, build.crds)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-system"}}
    await apply_objects(kube, [*objects, namespace])


def _load_crds(folder: Path) -> list[dict[str, Any]]:
    return [yaml.safe_load(p.read_text()) for p in sorted(folder.glob("*.yaml"))]


def bench_configuration(wait_for_pods_ready: bool = True) -> dict[str, Any]:
    """The Configuration both managers start from: the walkthrough's, waitForPodsReady written out
    (on: WAIT_FOR_PODS_READY; off: the same document as v1beta1 with `enable: false`)."""
    base: dict[str, Any] = yaml.safe_load(CONTROLLER_CONFIG.read_text())
    if not wait_for_pods_ready:
        return {**base, "apiVersion": V1BETA1, "waitForPodsReady": dict(WAIT_FOR_PODS_READY_OFF)}
    return {**base, "waitForPodsReady": dict(WAIT_FOR_PODS_READY)}


async def start(
    controller: Controller,
    bed: Testbed,
    log_dir: Path,
    agent: str,
    settings: KueueSettings = "shipped",
    extra: tuple[str, ...] = (),
    wait_for_pods_ready: bool = True,
) -> RunningManager:
    """Start the manager; `extra` are further flags of `reconciler run` (this controller only)."""
    configuration = bench_configuration(wait_for_pods_ready)
    if controller == "ours":
        config = log_dir / "bench-configuration.yaml"
        text = yaml.safe_dump(configuration, sort_keys=False)
        await asyncio.to_thread(config.write_text, text)
        process = ControllerProcess(config, bed.kubeconfig, log_dir / "controller.log", *extra)
        await asyncio.to_thread(process.start)
        await wait_log(process.log_path, "caches synced", 60)
        assert process.pid is not None
        return RunningManager("controller", process.pid, agent, agent, process, agent)
    build = kueue_build()
    base = {**configuration, **KUEUE_SETTINGS[settings]}
    kueue = KueueProcess(build, bed.kubeconfig, log_dir / "kueue", base)
    kueue.workdir.mkdir(parents=True, exist_ok=True)
    kueue.start(bed.pki.serving_cert, bed.pki.serving_key)
    await kueue.wait_ready_async(90)
    assert kueue.process is not None
    name = f"kueue ({settings})"
    return RunningManager(name, kueue.process.pid, "kueue", "kueue-admission", kueue, "kueue")


def _log_has(path: Path, text: str) -> bool:
    return path.exists() and text in path.read_text(errors="replace")


def _log_tail(path: Path) -> str:
    return path.read_text(errors="replace")[-3000:] if path.exists() else "(no log)"


async def wait_log(path: Path, text: str, within: float) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if await asyncio.to_thread(_log_has, path, text):
            return
        await asyncio.sleep(0.2)
    tail = await asyncio.to_thread(_log_tail, path)
    raise TimeoutError(f"{path.name}: no {text!r} after {within:.0f}s:\n{tail}")
