"""The per-kind controller tests' common set-up (pods, serving, Ray, TrainJob, JobSet, Kubeflow,
LeaderWorkerSet, topology): a test-bed of a module's own, this controller started for one test
module with a list of frameworks (its webhooks on loopback when asked), a test namespace it serves
(queues, a ResourceClaimTemplate, the kind's shipped webhooks scoped to the namespace, a probe that
the API server calls them), and waiting for a Workload's condition."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.support.deploy import ControllerProcess, free_port, install_crds
from e2e.support.queues import drop_queues, make_queues
from e2e.support.webhooks import (
    loopback_certificate,
    on_loopback,
    register,
    scoped,
    shipped_configurations,
    unregister,
)
from e2e.support.workloads import KUEUE
from e2e.testbed import KubeClient, Testbed, TestbedSpec, api_path
from e2e.testbed.names import DEVICE_CLASS_NAME
from e2e.testbed.scenario import single_gpu_claim_spec, status_condition, wait_for

__all__ = [
    "Served",
    "claim_template",
    "namespace_served",
    "own_bed",
    "start_controller",
    "stop_controller",
    "workload_where",
]

Obj = dict[str, Any]


@dataclass(frozen=True)
class Served:
    """A running controller; `ca_pem` signs its webhook certificate (None: webhooks off)."""

    process: ControllerProcess
    ca_pem: bytes | None

    @property
    def port(self) -> int:
        assert self.process.webhook_port is not None, "this controller serves no webhooks"
        return self.process.webhook_port


def own_bed(tmp_path_factory: pytest.TempPathFactory, name: str, spec: TestbedSpec) -> Iterator[Testbed]:
    """A test-bed of the module's own (`yield from` it in a module fixture): started, then stopped."""
    testbed = Testbed(run_dir=tmp_path_factory.mktemp(f"testbed-{name}"), spec=spec)
    testbed.start()
    try:
        yield testbed
    finally:
        testbed.stop()


def start_controller(
    kubeconfig: Path,
    folder: Path,
    frameworks: Sequence[str],
    *,
    webhooks: bool = True,
    extra: Obj | None = None,
) -> Served:
    """`reconciler run` with Kueue's CRDs installed, `frameworks` on, GPUs charged through DRA,
    `extra` merged into its Configuration; with `webhooks`, a certificate for 127.0.0.1 made in
    `folder` (mounted as cert-manager would) and the webhook server on a free port. Returns once
    it answers its readiness probe."""

    async def install() -> None:
        async with KubeClient.from_kubeconfig(kubeconfig) as kube:
            await install_crds(kube)

    asyncio.run(install())
    config: Obj = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "integrations": {"frameworks": list(frameworks)},
        "resources": {
            "deviceClassMappings": [{"name": "nvidia.com/gpu", "deviceClassNames": [DEVICE_CLASS_NAME]}]
        },
        **(extra or {}),
    }
    args: list[str] = []
    ca_pem: bytes | None = None
    port: int | None = None
    if webhooks:
        ca_pem = loopback_certificate(folder / "certs").ca.cert_pem
        config["internalCertManagement"] = {"enable": False}
        args, port = ["--webhook-cert-dir", str(folder / "certs")], free_port()
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    process = ControllerProcess(
        folder / "config.yaml", kubeconfig, folder / "controller.log", *args, webhook_port=port
    )
    process.start()
    process.wait_ready()
    return Served(process, ca_pem)


def stop_controller(served: Served) -> None:
    code = served.process.stop()
    assert code == 0, f"the controller did not stop cleanly (exit {code}):\n{served.process.log_tail(30)}"


async def claim_template(kube: KubeClient, namespace: str, name: str) -> None:
    """A ResourceClaimTemplate asking for one GPU."""
    await kube.create(
        api_path("resource.k8s.io/v1", "resourceclaimtemplates", namespace),
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"spec": single_gpu_claim_spec()},
        },
    )


@asynccontextmanager
async def namespace_served(
    kube: KubeClient,
    served: Served,
    namespace: str,
    webhooks: Collection[str],
    *,
    gpus: int,
    claims: Sequence[str] = ("one-gpu",),
    base: str = "kueue",
    ready: tuple[str, Callable[[], Awaitable[bool]]] | None = None,
) -> AsyncIterator[str]:
    """Queues with `gpus` GPUs for `namespace`, a one-GPU template per name in `claims`, and the
    shipped webhooks named in `webhooks` registered for this namespace only (named
    `<base>-<namespace>-...`: Kueue's `kueue-` sorts before an upstream's own, so it is called
    first, as in a real install); `ready` (what, probe) waits until the API server calls them.
    Everything is taken away again at the end, also when the wait fails."""
    await make_queues(kube, namespace, gpus=gpus)
    hooks: list[Obj] = []
    try:
        for name in claims:
            await claim_template(kube, namespace, name)
        if webhooks:
            shipped = [
                {**c, "webhooks": [w for w in c["webhooks"] if w["name"] in webhooks]}
                for c in shipped_configurations()
            ]
            hooks = scoped(
                on_loopback(shipped, served.port, served.ca_pem), f"{base}-{namespace}", namespace, ("x", "y")
            )
            await register(kube, hooks)
        if ready is not None:
            await wait_for(ready[0], ready[1], within=60, interval=0.5)
        yield namespace
    finally:
        if hooks:
            await unregister(kube, hooks)
        await drop_queues(kube, namespace)


async def workload_where(
    kube: KubeClient, namespace: str, name: str, kind: str, status: str, within: float = 120
) -> Obj:
    """The Workload once its condition `kind` has `status`."""

    async def probe() -> Obj | None:
        workload = await kube.get_or_none(api_path(KUEUE, "workloads", namespace, name))
        if workload is None or status_condition(workload, kind).get("status") != status:
            return None
        return workload

    found: Obj = await wait_for(f"Workload {name}: {kind}={status}", probe, within=within, interval=0.3)
    return found
