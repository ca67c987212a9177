"""Floods of queue-labelled GPU Jobs on the test-bed: nodes per pool, queues per pool, the Jobs.

Used by e2e/test_controller_faults.py, e2e/test_controller_ha.py and bench/e2e_admission.py.

- :func:`pool_nodes`, :class:`QueueSetup`, :func:`create_queues`: simulated GPU nodes per pool and,
  per ClusterQueue, its namespace, ResourceFlavor (nodeLabels selecting the pool), LocalQueue and the
  ResourceClaimTemplate ``single-gpu``; :func:`four_queues`, the fault tests' four small queues.
- :func:`flood_job`, :func:`flood`, :func:`create_jobs`: suspended, queue-labelled Jobs with one GPU
  claim and a cpu request, created with bounded concurrency (retrying connection failures).

What watches the quota invariants meanwhile is :class:`e2e.support.invariants.InvariantMonitor`;
the end state is checked by :func:`e2e.support.final_state.verify_final`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import aiohttp

from e2e.support.deploy import ROOT, object_path
from e2e.support.workloads import KUEUE, QUEUE_LABEL, FlavorResource, parse_quantity
from e2e.testbed import ApiError, GpuSpec, KubeClient, NodeSpec, api_path
from e2e.testbed.kubeclient import Obj
from e2e.testbed.scenario import gpu_job, single_gpu_claim_template

GPU = "nvidia.com/gpu"
POOL_LABEL = "testbed.dra-quota.dev/pool"
CONTROLLER_CONFIG: Path = ROOT / "examples" / "walkthrough" / "00-configuration.yaml"
TRANSIENT = (aiohttp.ClientError, OSError, asyncio.TimeoutError)


def pool_nodes(pool: str, nodes: int, gpus: int, *, pods: int = 110, cpu: str = "16") -> list[NodeSpec]:
    """``nodes`` simulated nodes labelled with ``POOL_LABEL=pool``, each with ``gpus`` Tesla T4s."""
    return [
        NodeSpec(
            name=f"{pool}-{i}",
            labels={POOL_LABEL: pool, "nvidia.com/gpu.product": "Tesla-T4"},
            cpu=cpu,
            memory="64Gi",
            pods=pods,
            gpus=GpuSpec(count=gpus, model="Tesla-T4"),
        )
        for i in range(1, nodes + 1)
    ]


@dataclass(frozen=True)
class QueueSetup:
    """One ClusterQueue with one flavor (nodeLabels: the pool), its namespace and LocalQueue."""

    cluster_queue: str
    namespace: str
    flavor: str
    pool: str
    quota: dict[str, str]  # resource -> nominalQuota
    local_queue: str = "lq"

    def quota_limits(self) -> dict[FlavorResource, Fraction]:
        return {(self.cluster_queue, self.flavor, r): parse_quantity(q) for r, q in self.quota.items()}


async def create_queues(kube: KubeClient, queues: Iterable[QueueSetup]) -> None:
    """Namespace, ResourceFlavor, ClusterQueue, LocalQueue and ResourceClaimTemplate per queue."""
    for q in queues:
        objects: list[Obj] = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": q.namespace}},
            {
                "apiVersion": KUEUE,
                "kind": "ResourceFlavor",
                "metadata": {"name": q.flavor},
                "spec": {"nodeLabels": {POOL_LABEL: q.pool}},
            },
            {
                "apiVersion": KUEUE,
                "kind": "ClusterQueue",
                "metadata": {"name": q.cluster_queue},
                "spec": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": q.namespace}},
                    "resourceGroups": [
                        {
                            "coveredResources": list(q.quota),
                            "flavors": [
                                {
                                    "name": q.flavor,
                                    "resources": [{"name": r, "nominalQuota": v} for r, v in q.quota.items()],
                                }
                            ],
                        }
                    ],
                },
            },
            {
                "apiVersion": KUEUE,
                "kind": "LocalQueue",
                "metadata": {"name": q.local_queue, "namespace": q.namespace},
                "spec": {"clusterQueue": q.cluster_queue},
            },
            single_gpu_claim_template(q.namespace),
        ]
        for obj in objects:
            await kube.apply(object_path(obj), obj, "dra-quota-e2e-flood")


def four_queues() -> list[QueueSetup]:
    # Small quotas: on a and d the GPUs bind, on b the cpu, on c both in turn.
    quotas = {
        "a": {"cpu": "3", GPU: "4"},
        "b": {"cpu": "1500m", GPU: "4"},
        "c": {"cpu": "2", GPU: "3"},
        "d": {"cpu": "4", GPU: "3"},
    }
    return [
        QueueSetup(f"flood-cq-{p}", f"flood-{p}", f"flood-t4-{p}", f"pool-{p}", quota)
        for p, quota in quotas.items()
    ]


def flood_job(
    name: str, namespace: str, queue: str, *, run_seconds: float | str, cpu: str, labelled: bool = True
) -> Obj:
    """A suspended Job (one pod, one GPU through the claim template ``single-gpu``, ``cpu`` requested)."""
    job = gpu_job(name, namespace, run_seconds=run_seconds, suspend=True)
    if labelled:
        job["metadata"]["labels"] = {QUEUE_LABEL: queue}
    container = job["spec"]["template"]["spec"]["containers"][0]
    container["resources"]["requests"] = {"cpu": cpu}
    return job


async def create_jobs(
    kube: KubeClient, jobs: list[Obj], *, concurrency: int = 16, within: float = 120.0
) -> dict[tuple[str, str], float]:
    """Create the Jobs (``concurrency`` at a time); the ``time.time()`` each POST was sent, by key.

    Connection failures and 5xx/429 are retried until ``within`` seconds have passed; a 409 on a
    retry means the earlier attempt got through.
    """
    sent: dict[tuple[str, str], float] = {}
    limit = asyncio.Semaphore(concurrency)
    deadline = time.monotonic() + within

    async def one(job: Obj) -> None:
        meta = job["metadata"]
        key = (meta["namespace"], meta["name"])
        path = api_path("batch/v1", "jobs", meta["namespace"])
        attempt = 0
        async with limit:
            while True:
                attempt += 1
                sent.setdefault(key, time.time())
                try:
                    await kube.create(path, job)
                    return
                except ApiError as err:
                    if err.status == 409 and attempt > 1:
                        return
                    if err.status < 500 and err.status != 429:
                        raise
                except TRANSIENT:
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(f"could not create Job {key[0]}/{key[1]} within {within:.0f}s")
                await asyncio.sleep(0.5)

    await asyncio.gather(*(one(job) for job in jobs))
    return sent


def flood(queues: list[QueueSetup], per_queue: int, too_big_at: tuple[int, ...] = ()) -> list[Obj]:
    """``per_queue`` Jobs per queue, interleaved across queues; the ones at ``too_big_at`` ask for more
    cpu than the queue's quota (they must stay pending with a reason without blocking the others)."""
    cpus = ["500m", "250m", "1"]
    jobs: list[Obj] = []
    for i in range(per_queue):
        for q in queues:
            cpu = str(parse_cpu(q.quota["cpu"]) + 1) if i in too_big_at else cpus[i % len(cpus)]
            jobs.append(flood_job(f"job-{i:03d}", q.namespace, q.local_queue, run_seconds=2 + i % 3, cpu=cpu))
    return jobs


def parse_cpu(text: str) -> int:
    return int(parse_quantity(text))
