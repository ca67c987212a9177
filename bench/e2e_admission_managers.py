"""The manager under test in bench/e2e_admission.py: this controller (`reconciler run`) or
Kueue v0.18.1 (built by `e2e/build-binaries.sh --kueue`), started the same way on the
test-bed, with what the bench needs to know of each: its pid (CPU, peak RSS), the field
manager that unsuspends Jobs, and the component its Events carry."""

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

# Kueue's shipped manager Configuration (config/components/manager): workers per kind and
# the client's rate, which its defaults (20 qps, burst 30) would otherwise set lower.
KUEUE_SHIPPED = {
    "controller": {
        "groupKindConcurrency": {
            "Job.batch": 5,
            "Pod": 5,
            "Workload.kueue.x-k8s.io": 5,
            "LocalQueue.kueue.x-k8s.io": 1,
            "Cohort.kueue.x-k8s.io": 1,
            "ClusterQueue.kueue.x-k8s.io": 1,
            "ResourceFlavor.kueue.x-k8s.io": 1,
        }
    },
    "clientConnection": {"qps": 50, "burst": 100},
}


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


async def start(controller: Controller, bed: Testbed, log_dir: Path, agent: str) -> RunningManager:
    if controller == "ours":
        process = ControllerProcess(CONTROLLER_CONFIG, bed.kubeconfig, log_dir / "controller.log")
        await asyncio.to_thread(process.start)
        await wait_log(process.log_path, "caches synced", 60)
        assert process.pid is not None
        return RunningManager("controller", process.pid, agent, agent, process)
    build = kueue_build()
    base = {**yaml.safe_load(CONTROLLER_CONFIG.read_text()), **KUEUE_SHIPPED}
    kueue = KueueProcess(build, bed.kubeconfig, log_dir / "kueue", base)
    kueue.workdir.mkdir(parents=True, exist_ok=True)
    kueue.start(bed.pki.serving_cert, bed.pki.serving_key)
    await kueue.wait_ready_async(90)
    assert kueue.process is not None
    return RunningManager("kueue", kueue.process.pid, "kueue", "kueue-admission", kueue)


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
