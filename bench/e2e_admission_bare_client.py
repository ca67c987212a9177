"""The admission benchmark's ceiling: a *bare client* that does, per fresh suspended Job, exactly
the writes the controller does for it (create the Workload, merge-patch its status with the
admission, merge-patch the Job: unsuspend, flavor nodeSelector, podset label), with one Job watch,
no caches, no decisions and as many writes in flight as the controller's writer.

It runs as a child process: ``python -m bench.e2e_admission bare-client``.
"""

from __future__ import annotations

import asyncio
import hashlib
import signal
import time
from collections import Counter
from pathlib import Path

from e2e.support.flood import POOL_LABEL
from e2e.support.workloads import KUEUE, QUEUE_LABEL
from e2e.testbed import KubeClient, api_path
from e2e.testbed.kubeclient import ApiError, Obj

# The benchmark's queues (one flavor on one node pool) and Jobs, which the bare client's writes
# assume, and the controller's writer concurrency (ControllerOptions.write_concurrency).
GPU = "nvidia.com/gpu"
FLAVOR = "bench-t4"
POOL = "bench"
JOB_CPU = "100m"
WRITE_CONCURRENCY = 32
BARE_AGENT = "bench-bare-client"


def workload_name(job_name: str, uid: str) -> str:
    digest = hashlib.sha1(f"Job\nbatch\n{job_name}\n{uid}".encode()).hexdigest()
    return f"job-{job_name}"[:247] + f"-{digest[:5]}"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def workload_body(job: Obj) -> Obj:
    meta = job["metadata"]
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {
            "name": workload_name(meta["name"], meta["uid"]),
            "namespace": meta["namespace"],
            "labels": {"kueue.x-k8s.io/job-uid": meta["uid"]},
            "finalizers": ["kueue.x-k8s.io/resource-in-use"],
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "podSets": [{"name": "main", "count": 1, "template": job["spec"]["template"]}],
            "queueName": meta["labels"][QUEUE_LABEL],
        },
    }


def admission_patch(workload: Obj, cluster_queue: str) -> Obj:
    now = _now()
    generation = workload["metadata"].get("generation", 1)

    def cond(kind: str, message: str) -> Obj:
        return {
            "type": kind,
            "status": "True",
            "reason": kind,
            "message": message,
            "lastTransitionTime": now,
            "observedGeneration": generation,
        }

    return {
        "metadata": {"resourceVersion": workload["metadata"]["resourceVersion"]},
        "status": {
            "conditions": [
                cond("QuotaReserved", f"Quota reserved in ClusterQueue {cluster_queue}"),
                cond("Admitted", "The workload is admitted"),
            ],
            "admission": {
                "clusterQueue": cluster_queue,
                "podSetAssignments": [
                    {
                        "name": "main",
                        "flavors": {"cpu": FLAVOR, GPU: FLAVOR},
                        "resourceUsage": {"cpu": JOB_CPU, GPU: "1"},
                        "count": 1,
                    }
                ],
            },
        },
    }


async def bare_client(kubeconfig: Path, prefix: str) -> None:
    """Per fresh suspended Job in namespaces ``prefix*``: the controller's three writes, no decisions."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    limit = asyncio.Semaphore(WRITE_CONCURRENCY)
    tasks: set[asyncio.Task[None]] = set()
    failures: Counter[str] = Counter()
    cq_of = {f"{prefix}{i:02d}": f"{prefix}cq-{i:02d}" for i in range(100)}

    async with KubeClient.from_kubeconfig(kubeconfig, user_agent=BARE_AGENT, request_timeout=60) as kube:

        async def write(method: str, path: str, body: Obj, content_type: str | None = None) -> Obj:
            async with limit:
                return await kube.request(method, path, body=body, content_type=content_type)

        async def admit(job: Obj) -> None:
            ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
            try:
                created = await write("POST", api_path(KUEUE, "workloads", ns), workload_body(job))
                wl_path = api_path(KUEUE, "workloads", ns, created["metadata"]["name"], "status")
                patch = admission_patch(created, cq_of[ns])
                await write("PATCH", wl_path, patch, "application/merge-patch+json")
                start = {
                    "spec": {
                        "suspend": False,
                        "template": {
                            "metadata": {"labels": {"kueue.x-k8s.io/podset": "main"}},
                            "spec": {"nodeSelector": {POOL_LABEL: POOL}},
                        },
                    }
                }
                await write(
                    "PATCH", api_path("batch/v1", "jobs", ns, name), start, "application/merge-patch+json"
                )
            except (ApiError, OSError, TimeoutError) as err:
                failures[type(err).__name__] += 1
                print(f"failed {ns}/{name}: {err}", flush=True)

        async def watch() -> None:
            path = api_path("batch/v1", "jobs")
            version = str((await kube.get(path, {"limit": "1"}))["metadata"]["resourceVersion"])
            seen: set[str] = set()
            print("watching", flush=True)
            while True:
                async for event in kube.watch(path, {"resourceVersion": version}, timeout_seconds=120):
                    obj = event["object"]
                    version = str(obj["metadata"]["resourceVersion"])
                    if event["type"] != "ADDED" or not obj["metadata"]["namespace"].startswith(prefix):
                        continue
                    if obj["spec"].get("suspend") and obj["metadata"]["uid"] not in seen:
                        seen.add(obj["metadata"]["uid"])
                        task = loop.create_task(admit(obj))
                        tasks.add(task)
                        task.add_done_callback(tasks.discard)

        watcher = loop.create_task(watch())
        stopped = loop.create_task(stop.wait())
        await asyncio.wait([watcher, stopped], return_when=asyncio.FIRST_COMPLETED)
        for task in [watcher, stopped, *tasks]:
            task.cancel()
        await asyncio.gather(watcher, stopped, *tasks, return_exceptions=True)
        if watcher.done() and not watcher.cancelled() and watcher.exception() is not None:
            print(f"watch failed: {watcher.exception()!r}", flush=True)
    print(f"bare client stopped; failures: {dict(failures)}", flush=True)
