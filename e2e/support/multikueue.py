"""A MultiKueue manager for the worker tests (issue 41): a second control plane of its own
(no nodes: a manager runs no pods) running real Kueue v0.18.1 (built by
`e2e/build-binaries.sh --kueue`) with MultiKueue, its Job and kueue.x-k8s.io webhooks on a
loopback port; and the objects that connect it to its workers (one or more): each worker's
kubeconfig in a Secret (certificates embedded, as Kueue requires) and its MultiKueueCluster, a
MultiKueueConfig listing them all, the MultiKueue AdmissionCheck and a ClusterQueue that uses it.
On a worker: this controller with Kueue's CRDs (`worker_controller`, batch/v1 Jobs), also with
JobSet's controller (`worker_with_jobset`).
"""

from __future__ import annotations

import asyncio
import base64
import sys
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e2e.conformance.kueue import (
    WEBHOOK_GROUPS,
    KueueBuild,
    KueueProcess,
    kueue_build,
    webhook_configurations,
)
from e2e.support.deploy import ControllerProcess, apply_objects, install_crds
from e2e.support.jobset import JobSetProcess, install_jobset_crds, jobset_build, jobset_webhooks
from e2e.support.webhooks import register, unregister, wait_until_jobs_are_suspended
from e2e.support.workloads import KUEUE
from e2e.testbed import KubeClient, Testbed, api_path
from e2e.testbed.names import DEVICE_CLASS_NAME
from e2e.testbed.scenario import single_gpu_claim_template, status_condition, wait_for
from e2e.testbed.spec import TestbedSpec

__all__ = [
    "CHECK",
    "MANAGER_CONFIGURATION",
    "ORIGIN",
    "WORKER",
    "Manager",
    "connect_workers",
    "embedded_kubeconfig",
    "install_manager",
    "manager_queues",
    "running_manager",
    "worker_controller",
    "worker_with_jobset",
]

Obj = dict[str, Any]
ORIGIN = "mk-e2e"
WORKER = "worker1"
CHECK = "multikueue"
SYSTEM = "kueue-system"
GPU_CLASS = "gpu.nvidia.com"
# The manager's Configuration: batch/v1 Jobs, GPUs through DRA charged as on the workers.
MANAGER_CONFIGURATION: Obj = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
    "kind": "Configuration",
    "integrations": {"frameworks": ["batch/job"]},
    "resources": {"deviceClassMappings": [{"name": "nvidia.com/gpu", "deviceClassNames": [GPU_CLASS]}]},
    "multiKueue": {"origin": ORIGIN, "gcInterval": "30s", "workerLostTimeout": "2m"},
}


@dataclass
class Manager:
    bed: Testbed
    kueue: KueueProcess


def embedded_kubeconfig(path: Path) -> str:
    """The test-bed's admin kubeconfig with its files' contents embedded (Kueue refuses file
    paths in a MultiKueue kubeconfig)."""
    config = yaml.safe_load(path.read_text())
    for entry in config["clusters"]:
        cluster = entry["cluster"]
        ca = Path(cluster.pop("certificate-authority")).read_bytes()
        cluster["certificate-authority-data"] = base64.b64encode(ca).decode()
    for entry in config["users"]:
        user = entry["user"]
        for key in ("client-certificate", "client-key"):
            if key in user:
                user[f"{key}-data"] = base64.b64encode(Path(user.pop(key)).read_bytes()).decode()
    return str(yaml.safe_dump(config, sort_keys=False))


async def install_manager(kube: KubeClient, build: KueueBuild) -> None:
    """Kueue's CRDs and its namespace on the manager."""
    crds = [yaml.safe_load(p.read_text()) for p in sorted(build.crds.glob("*.yaml"))]
    await apply_objects(kube, crds)
    await apply_objects(kube, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM}}])


async def register_webhooks(
    kube: KubeClient, manager: Manager, build: KueueBuild, groups: frozenset[str] = WEBHOOK_GROUPS
) -> None:
    ca = manager.bed.pki.ca_cert.read_bytes()
    await apply_objects(kube, webhook_configurations(build.webhooks, manager.kueue.webhook_port, ca, groups))
    await wait_until_jobs_are_suspended(kube, "default")


Install = Callable[[KubeClient], Awaitable[None]]


@contextmanager
def running_manager(
    workdir: Path,
    workers: Mapping[str, Path],
    *,
    frameworks: tuple[str, ...] = ("batch/job",),
    webhook_groups: frozenset[str] = WEBHOOK_GROUPS,
    install: Install | None = None,
) -> Iterator[Manager]:
    """A manager control plane (no nodes) running Kueue with MultiKueue over `workers` (each
    worker's name and its admin kubeconfig; `install`: what else its API needs first, e.g. a
    kind's CRD); stopped on exit."""
    build = kueue_build()
    missing = build.missing()
    if missing:
        raise RuntimeError(f"Kueue is not built ({missing[0]}): run e2e/setup.sh --kueue")
    bed = Testbed(run_dir=workdir / "manager-bed", spec=TestbedSpec(nodes=[]))
    bed.start()
    config = {**MANAGER_CONFIGURATION, "integrations": {"frameworks": list(frameworks)}}
    kueue = KueueProcess(build, bed.kubeconfig, workdir, config)
    manager = Manager(bed, kueue)
    try:

        async def prepare() -> None:
            async with KubeClient.from_kubeconfig(bed.kubeconfig) as kube:
                await install_manager(kube, build)
                if install is not None:
                    await install(kube)

        asyncio.run(prepare())
        kueue.start(bed.pki.serving_cert, bed.pki.serving_key)
        kueue.wait_ready()

        async def connect() -> None:
            async with KubeClient.from_kubeconfig(bed.kubeconfig) as kube:
                await register_webhooks(kube, manager, build, webhook_groups)
                await connect_workers(kube, workers)

        asyncio.run(connect())
        yield manager
    except BaseException:
        print(f"kueue log tail:\n{kueue.log_tail(60)}", file=sys.stderr)
        raise
    finally:
        kueue.stop()
        bed.stop()


async def connect_workers(kube: KubeClient, workers: Mapping[str, Path]) -> None:
    """Per worker its kubeconfig Secret and MultiKueueCluster; the MultiKueueConfig listing them
    all (in the mapping's order) and the AdmissionCheck; until Kueue says each is active."""
    objects: list[Obj] = []
    for name, kubeconfig in workers.items():
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": f"{name}-kubeconfig", "namespace": SYSTEM},
                "stringData": {"kubeconfig": embedded_kubeconfig(kubeconfig)},
            }
        )
        objects.append(
            {
                "apiVersion": KUEUE,
                "kind": "MultiKueueCluster",
                "metadata": {"name": name},
                "spec": {
                    "clusterSource": {
                        "kubeConfig": {"locationType": "Secret", "location": f"{name}-kubeconfig"}
                    }
                },
            }
        )
    config = {
        "apiVersion": KUEUE,
        "kind": "MultiKueueConfig",
        "metadata": {"name": "workers"},
        "spec": {"clusters": list(workers)},
    }
    check = {
        "apiVersion": KUEUE,
        "kind": "AdmissionCheck",
        "metadata": {"name": CHECK},
        "spec": {
            "controllerName": "kueue.x-k8s.io/multikueue",
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "workers"},
        },
    }
    await apply_objects(kube, [*objects, config, check])
    for name in workers:
        await _active(kube, api_path(KUEUE, "multikueueclusters", name=name))
    await _active(kube, api_path(KUEUE, "admissionchecks", name=CHECK))


async def _active(kube: KubeClient, path: str) -> None:
    async def active() -> bool:
        return status_condition(await kube.get(path), "Active").get("status") == "True"

    await wait_for(f"{path} to be Active", active, within=60, interval=0.5)


async def manager_queues(kube: KubeClient, namespace: str, device_class: Obj, gpus: int) -> str:
    """On the manager: the namespace, the GPU DeviceClass and claim template (Kueue reads them
    to charge the Job), a flavor, a ClusterQueue of `gpus` GPUs with the MultiKueue check and
    LocalQueue `lq`; returns the ClusterQueue's name."""
    cq = f"mk-{namespace}"
    objects = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": GPU_CLASS},
            "spec": device_class["spec"],
        },
        single_gpu_claim_template(namespace),
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": f"mk-{namespace}"}},
        {
            "apiVersion": KUEUE,
            "kind": "ClusterQueue",
            "metadata": {"name": cq},
            "spec": {
                "namespaceSelector": {},
                "admissionChecksStrategy": {"admissionChecks": [{"name": CHECK}]},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "nvidia.com/gpu"],
                        "flavors": [
                            {
                                "name": f"mk-{namespace}",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "4"},
                                    {"name": "nvidia.com/gpu", "nominalQuota": gpus},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": KUEUE,
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": namespace},
            "spec": {"clusterQueue": cq},
        },
    ]
    await apply_objects(kube, objects)
    # Kueue's webhook hands a job to MultiKueue (spec.managedBy) only once its cache knows the
    # ClusterQueue and its check: wait for that before anything is submitted.
    await _active(kube, api_path(KUEUE, "clusterqueues", name=cq))
    await _active(kube, api_path(KUEUE, "localqueues", namespace, "lq"))
    return cq


def worker_configuration(frameworks: tuple[str, ...]) -> Obj:
    """A worker controller's Configuration: `frameworks`, GPUs charged through DRA."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "integrations": {"frameworks": list(frameworks)},
        "resources": {
            "deviceClassMappings": [{"name": "nvidia.com/gpu", "deviceClassNames": [DEVICE_CLASS_NAME]}]
        },
    }


@contextmanager
def worker_controller(
    bed: Testbed, workdir: Path, frameworks: tuple[str, ...] = ("batch/job",)
) -> Iterator[ControllerProcess]:
    """A worker's side on `bed` for `frameworks` whose controllers already run there (batch/v1
    Jobs: kube-controller-manager's): Kueue's CRDs and this controller, ready; stopped on exit
    (it must exit cleanly)."""

    async def crds() -> None:
        async with KubeClient.from_kubeconfig(bed.kubeconfig) as kube:
            await install_crds(kube)

    asyncio.run(crds())
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.yaml").write_text(yaml.safe_dump(worker_configuration(frameworks)))
    controller = ControllerProcess(workdir / "config.yaml", bed.kubeconfig, workdir / "controller.log")
    controller.start()
    try:
        controller.wait_ready()
        yield controller
    finally:
        code = controller.stop()
        assert code == 0, f"the controller did not stop cleanly (exit {code}):\n{controller.log_tail(30)}"


@contextmanager
def worker_with_jobset(bed: Testbed, workdir: Path) -> Iterator[ControllerProcess]:
    """The worker's side on `bed`: JobSet's manager with its CRD and webhooks, Kueue's CRDs, and
    this controller with the batch/job and jobset frameworks, GPUs charged through DRA."""
    build = jobset_build()
    missing = build.missing()
    if missing:
        raise RuntimeError(f"JobSet {build.version} is not built ({missing}): run e2e/setup.sh --jobset")
    jobset = JobSetProcess(build, bed.kubeconfig, workdir / "jobset")

    async def up() -> list[Obj]:
        async with KubeClient.from_kubeconfig(bed.kubeconfig) as kube:
            await install_jobset_crds(kube, build)
            jobset.start()
            await jobset.wait_ready_async()
            return await register(kube, jobset_webhooks(build, jobset.webhook_port, jobset.ca_pem))

    hooks = asyncio.run(up())
    try:
        with worker_controller(bed, workdir, ("batch/job", "jobset.x-k8s.io/jobset")) as controller:
            yield controller
    finally:

        async def down() -> None:
            async with KubeClient.from_kubeconfig(bed.kubeconfig) as kube:
                await unregister(kube, hooks)

        asyncio.run(down())
        jobset.stop()
