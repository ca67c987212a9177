"""The chaos flood's units, in four kinds:

- ``job``: a suspended, queue-labelled batch/v1 Job with one pod and one GPU claim
  (:func:`e2e.support.flood.flood_job`);
- ``pod``: a plain pod naming the queue, gated by the pod webhook, one GPU claim;
- ``group``: a pod group of two such pods (one Workload for both, admitted as a whole);
- ``jobset``: a suspended, queue-labelled JobSet (run by the real JobSet controller, v0.12.0)
  of one replicated job of one such pod: one Workload, its child Job none of its own.

A unit is finished when its Job is Complete, its pod Succeeded, all its group's pods Succeeded,
or its JobSet Completed; lost when it is not finished by the end of the drain. Each unit must end
with exactly one Workload (owned by its Job, JobSet or pods): two would be two admissions the
per-Workload history misses.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from e2e.support.flood import TRANSIENT, QueueSetup, flood_job
from e2e.support.webhooks import on_loopback, register, scoped, shipped_configurations
from e2e.support.workloads import KUEUE, QUEUE_LABEL, is_true, object_name
from e2e.testbed import ApiError, KubeClient, api_path
from e2e.testbed.kubeclient import Obj
from e2e.testbed.names import RUN_SECONDS_ANNOTATION

KINDS = ("job", "pod", "group", "jobset")
WEIGHTS = (0.45, 0.20, 0.15, 0.20)
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
PLURALS = {"Job": "jobs", "Pod": "pods", "JobSet": "jobsets"}
GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
GROUP_COUNT = "kueue.x-k8s.io/pod-group-total-count"
POD_WEBHOOKS = ("mpod.kb.io", "vpod.kb.io")


@dataclass(frozen=True)
class Unit:
    kind: str
    namespace: str
    name: str
    objects: tuple[Obj, ...]


def plain_pod(name: str, queue: QueueSetup, run_seconds: int, group: str | None = None) -> Obj:
    labels = {QUEUE_LABEL: queue.local_queue}
    annotations = {RUN_SECONDS_ANNOTATION: str(run_seconds)}
    if group is not None:
        labels[GROUP_LABEL] = group
        annotations[GROUP_COUNT] = "2"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": queue.namespace,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": {
            "restartPolicy": "Never",
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": "250m"}, "claims": [{"name": "gpu"}]},
                }
            ],
        },
    }


def jobset(name: str, queue: QueueSetup, run_seconds: int) -> Obj:
    """A suspended JobSet naming the queue: one replicated job of one pod with one GPU claim."""
    pod = plain_pod("unused", queue, run_seconds)
    template = {"metadata": {"annotations": pod["metadata"]["annotations"]}, "spec": pod["spec"]}
    job = {"parallelism": 1, "completions": 1, "backoffLimit": 0, "template": template}
    return {
        "apiVersion": JOBSET_API,
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": queue.namespace, "labels": {QUEUE_LABEL: queue.local_queue}},
        "spec": {
            "suspend": True,
            "replicatedJobs": [{"name": "main", "replicas": 1, "template": {"spec": job}}],
        },
    }


def make_units(queues: list[QueueSetup], count: int, rng: random.Random) -> list[Unit]:
    """``count`` units, kinds drawn with :data:`WEIGHTS`, queues in turn, 2-4 s of running each."""
    units: list[Unit] = []
    for i in range(count):
        kind = rng.choices(KINDS, WEIGHTS)[0]
        queue = queues[i % len(queues)]
        seconds = rng.randint(2, 4)
        name = f"{kind}-{i:03d}"
        if kind == "job":
            cpu = rng.choice(["250m", "500m"])
            objects: tuple[Obj, ...] = (
                flood_job(name, queue.namespace, queue.local_queue, run_seconds=seconds, cpu=cpu),
            )
        elif kind == "pod":
            objects = (plain_pod(name, queue, seconds),)
        elif kind == "jobset":
            objects = (jobset(name, queue, seconds),)
        else:
            objects = tuple(plain_pod(f"{name}-{m}", queue, seconds, group=name) for m in range(2))
        units.append(Unit(kind, queue.namespace, name, objects))
    return units


async def register_pod_webhooks(kube: KubeClient, queues: list[QueueSetup], port: int, ca_pem: bytes) -> None:
    """The shipped pod webhooks, each queue's namespace only, called through the proxy's ``port``."""
    shipped = [
        {**c, "webhooks": [w for w in c["webhooks"] if w["name"] in POD_WEBHOOKS]}
        for c in shipped_configurations()
    ]
    for q in queues:
        await register(
            kube, scoped(on_loopback(shipped, port, ca_pem), f"chaos-{q.namespace}", q.namespace, ("x", "y"))
        )


async def create_object(kube: KubeClient, obj: Obj, within: float = 120.0) -> int:
    """Create ``obj``, retrying connection failures, 5xx (a webhook not answering) and 429 until
    ``within`` s; a 409 on a retry means an earlier attempt got through. The failed attempts."""
    meta = obj["metadata"]
    path = api_path(obj["apiVersion"], PLURALS[obj["kind"]], meta["namespace"])
    deadline = time.monotonic() + within
    failures = 0
    while True:
        try:
            await kube.create(path, obj)
            return failures
        except ApiError as err:
            if err.status == 409 and failures:
                return failures
            if err.status < 500 and err.status != 429:
                raise
        except TRANSIENT:
            pass
        failures += 1
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"could not create {obj['kind']} {meta['namespace']}/{meta['name']} within {within:.0f}s"
            )
        await asyncio.sleep(0.5)


async def create_unit(kube: KubeClient, unit: Unit) -> int:
    return sum([await create_object(kube, obj) for obj in unit.objects])


@dataclass
class EndState:
    finished: Counter[str]
    lost: dict[str, str]  # unit -> what it looked like
    workloads: dict[str, list[str]] = field(default_factory=dict)  # unit -> its Workloads, if not one


async def end_state(kube: KubeClient, units: list[Unit]) -> EndState:
    """Which units finished (Job Complete; every pod Succeeded) and which did not, with their state."""
    jobs: dict[tuple[str, str], Obj] = {}
    jobsets: dict[tuple[str, str], Obj] = {}
    pods: dict[tuple[str, str], Obj] = {}
    owned: dict[str, set[str]] = defaultdict(set)  # owner uid -> Workloads
    for ns in sorted({u.namespace for u in units}):
        for job in (await kube.get(api_path("batch/v1", "jobs", ns)))["items"]:
            jobs[(ns, job["metadata"]["name"])] = job
        for found in (await kube.get(api_path(JOBSET_API, "jobsets", ns)))["items"]:
            jobsets[(ns, found["metadata"]["name"])] = found
        for pod in (await kube.get(api_path("v1", "pods", ns)))["items"]:
            pods[(ns, pod["metadata"]["name"])] = pod
        for workload in (await kube.get(api_path(KUEUE, "workloads", ns)))["items"]:
            for ref in workload["metadata"].get("ownerReferences") or []:
                owned[ref["uid"]].add(object_name(workload))
    state = EndState(Counter(), {})
    for unit in units:
        parents = {"job": jobs, "jobset": jobsets}
        made = [parents[unit.kind].get((unit.namespace, unit.name))] if unit.kind in parents else []
        made += [
            pods.get((unit.namespace, o["metadata"]["name"])) for o in unit.objects if o["kind"] == "Pod"
        ]
        names = sorted({w for obj in made if obj is not None for w in owned[obj["metadata"]["uid"]]})
        if len(names) != 1:
            state.workloads[f"{unit.kind} {unit.namespace}/{unit.name}"] = names
        if unit.kind in parents:
            job = parents[unit.kind].get((unit.namespace, unit.name))
            done = job is not None and is_true(job, "Complete" if unit.kind == "job" else "Completed")
            seen = (
                "missing"
                if job is None
                else f"suspend={job['spec'].get('suspend')} status={job.get('status')}"
            )
        else:
            found = [pods.get((unit.namespace, o["metadata"]["name"])) for o in unit.objects]
            phases = [(p or {}).get("status", {}).get("phase", "missing") for p in found]
            done = phases == ["Succeeded"] * len(phases)
            seen = f"phases={phases}"
        if done:
            state.finished[unit.kind] += 1
        else:
            state.lost[f"{unit.kind} {unit.namespace}/{unit.name}"] = seen
    return state
