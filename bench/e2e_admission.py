"""Benchmark on the test-bed: the controller admitting a flood of Jobs, against a bare-client ceiling.

Starts its own test-bed (nodes with enough GPUs for the pods to run), installs the CRDs and creates
10 ClusterQueues (one namespace and LocalQueue each, one shared flavor) with quota for every Job.

1. **controller**: ``reconciler run`` as a child process; the loader creates 2,000 suspended,
   queue-labelled Jobs (one GPU through a ResourceClaimTemplate, 100m cpu, pods run 1 s), 32 POSTs in
   flight, interleaved across the queues. A watch on Jobs (in this process) notes when each Job is
   first seen with ``spec.suspend: false``.
2. **ceiling**: the controller is stopped; a *bare client* (a child process: one Job watch and an
   aiohttp session, no caches, no decisions, 32 writes in flight like the controller's writer) does
   per fresh Job exactly the writes the controller does for it: create the Workload, merge-patch
   its status (QuotaReserved, Admitted, admission; with the resourceVersion precondition), and
   merge-patch the Job (unsuspend, flavor nodeSelector, podset label). Same loader, same Jobs in
   other namespaces, same measurement.

Figures per run: wall time (first Job POST sent to the last unsuspend seen), admissions per second
(Jobs / wall time), the loader's own rate, and latency from Job creation to unsuspend, p50/p99/max.
Latency is measured client-side in this process: from the moment the Job's POST was *sent* (an
upper bound: it includes the create call) to the moment the watch delivers the first version of the
Job with ``suspend: false`` (an upper bound too, by the watch's delivery delay, a few ms). The
API server's own stamps agree but are whole seconds: ``metadata.creationTimestamp`` and the ``time``
of the managedFields entry of the writer that set ``spec.suspend`` (printed as a cross-check). Also
the controller's peak RSS (``VmHWM`` of /proc/<pid>/status, read just before it is stopped), the
Events it wrote, and the time until every controller-phase Job completed.

Run: ``.venv/bin/python -m bench.e2e_admission`` (about 5 minutes on 2 cores; ``--jobs 200`` for a
quick look). Prints figures; asserts nothing except that every Job got unsuspended.
"""

from __future__ import annotations

import argparse
import asyncio
import calendar
import contextlib
import hashlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/e2e_admission.py` as well as `-m bench.e2e_admission`
    sys.path.insert(0, str(ROOT))

from e2e.support.deploy import ControllerProcess, install_crds  # noqa: E402
from e2e.support.flood import (  # noqa: E402
    CONTROLLER_CONFIG,
    POOL_LABEL,
    QueueSetup,
    create_jobs,
    create_queues,
    flood_job,
    pool_nodes,
)
from e2e.support.workloads import KUEUE, QUEUE_LABEL  # noqa: E402
from e2e.testbed import KubeClient, Testbed, TestbedSpec, api_path  # noqa: E402
from e2e.testbed.kubeclient import ApiError, Obj  # noqa: E402

GPU = "nvidia.com/gpu"
FLAVOR = "bench-t4"
POOL = "bench"
JOB_CPU = "100m"
WRITE_CONCURRENCY = 32  # the controller's writer (ControllerOptions.write_concurrency)
BARE_AGENT = "bench-bare-client"
CONTROLLER_AGENT = "dra-quota-reconciler"


# --- observing unsuspends ---------------------------------------------------------------------------


@dataclass
class Observer:
    """A Job watch over all namespaces: when each Job was first seen unsuspended (time.time())."""

    started: dict[tuple[str, str], float] = field(default_factory=dict)
    events: int = 0
    breaks: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self, kube: KubeClient) -> None:
        path = api_path("batch/v1", "jobs")
        version = str((await kube.get(path, {"limit": "1"}))["metadata"]["resourceVersion"])
        while True:
            try:
                async for event in kube.watch(path, {"resourceVersion": version}, timeout_seconds=120):
                    obj: Obj = event["object"]
                    if event["type"] == "ERROR":
                        raise RuntimeError(f"job watch failed: {obj.get('message')}")
                    version = str(obj["metadata"]["resourceVersion"])
                    if event["type"] in ("BOOKMARK", "DELETED"):
                        continue
                    self.events += 1
                    key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
                    if not obj["spec"].get("suspend") and key not in self.started:
                        self.started[key] = time.time()
                        self.changed.set()
            except (OSError, TimeoutError, ApiError) as err:
                if isinstance(err, ApiError) and err.status == 410:
                    raise
                self.breaks += 1
                await asyncio.sleep(0.2)

    async def wait_for(self, keys: set[tuple[str, str]], within: float) -> None:
        deadline = time.monotonic() + within
        while not keys <= self.started.keys():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                missing = len(keys - self.started.keys())
                raise TimeoutError(f"{missing} of {len(keys)} Jobs still suspended after {within:.0f}s")
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), timeout=min(remaining, 1.0))


@contextlib.asynccontextmanager
async def observing(kube: KubeClient) -> AsyncIterator[Observer]:
    observer = Observer()
    task = asyncio.get_running_loop().create_task(observer.run(kube), name="observer")
    try:
        await asyncio.sleep(0.5)  # the watch is open
        if task.done():
            task.result()
        yield observer
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


# --- figures --------------------------------------------------------------------------------------


@dataclass
class Figures:
    name: str
    jobs: int
    wall: float
    created_in: float
    latencies: list[float]
    server_latencies: list[int]

    @property
    def rate(self) -> float:
        return self.jobs / self.wall

    def lines(self) -> list[str]:
        lat = [x * 1000 for x in sorted(self.latencies)]
        srv = sorted(self.server_latencies)
        return [
            f"{self.name}: {self.jobs} Jobs unsuspended in {self.wall:.1f}s wall -> "
            f"{self.rate:.1f} admissions/s (the loader created them in {self.created_in:.1f}s, "
            f"{self.jobs / self.created_in:.0f}/s)",
            f"  latency creation -> unsuspend (client clocks, ms): p50 {_pct(lat, 50):.0f}  "
            f"p99 {_pct(lat, 99):.0f}  max {lat[-1]:.0f}  mean {statistics.fmean(lat):.0f}",
            f"  same from the API server's whole-second stamps (s): p50 {_pct(srv, 50)}  "
            f"p99 {_pct(srv, 99)}  max {srv[-1] if srv else '-'}  ({len(srv)} Jobs)",
        ]


def _pct(values: list[Any], q: float) -> Any:
    if not values:
        return float("nan")
    index = min(len(values) - 1, max(0, round(q / 100 * len(values) + 0.5) - 1))
    return values[index]


def _epoch(stamp: str) -> int:
    return calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))


async def server_latencies(kube: KubeClient, namespaces: list[str], writer: str) -> list[int]:
    """Per Job: managedFields time of ``writer``'s spec.suspend minus creationTimestamp (whole seconds)."""
    out: list[int] = []
    for ns in namespaces:
        jobs, _ = await kube.list_all(api_path("batch/v1", "jobs", ns))
        for job in jobs:
            for entry in job["metadata"].get("managedFields") or []:
                fields = entry.get("fieldsV1", {}).get("f:spec", {})
                if entry.get("manager") == writer and "f:suspend" in fields and not entry.get("subresource"):
                    out.append(_epoch(entry["time"]) - _epoch(job["metadata"]["creationTimestamp"]))
    return out


def measure(
    name: str, sent: dict[tuple[str, str], float], created_in: float, observer: Observer, server: list[int]
) -> Figures:
    latencies = [observer.started[k] - t for k, t in sent.items()]
    wall = max(observer.started[k] for k in sent) - min(sent.values())
    return Figures(name, len(sent), wall, created_in, latencies, server)


# --- the flood ------------------------------------------------------------------------------------


def queues_for(prefix: str, count: int, per_queue: int) -> list[QueueSetup]:
    cpu_milli = per_queue * int(JOB_CPU.removesuffix("m"))
    return [
        QueueSetup(
            f"{prefix}-cq-{i:02d}",
            f"{prefix}-{i:02d}",
            FLAVOR,
            POOL,
            {"cpu": f"{cpu_milli}m", GPU: str(per_queue)},
        )
        for i in range(count)
    ]


def jobs_for(queues: list[QueueSetup], total: int, run_seconds: float) -> list[Obj]:
    return [
        flood_job(f"job-{i:05d}", q.namespace, q.local_queue, run_seconds=run_seconds, cpu=JOB_CPU)
        for i in range(total // len(queues))
        for q in queues
    ]


async def flood(
    kube: KubeClient, jobs: list[Obj], observer: Observer, within: float
) -> tuple[dict[Any, float], float]:
    began = time.monotonic()
    sent = await create_jobs(kube, jobs, concurrency=WRITE_CONCURRENCY, within=within)
    created_in = time.monotonic() - began
    await observer.wait_for(set(sent), within)
    return sent, created_in


def vm_hwm_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def count_events(kube: KubeClient, namespaces: list[str]) -> tuple[Counter[str], int]:
    """The controller's Events by reason, and how many Jobs got more than one ``Started``."""
    reasons: Counter[str] = Counter()
    started: Counter[str] = Counter()
    for ns in namespaces:
        events, _ = await kube.list_all(api_path("v1", "events", ns))
        for event in events:
            if (event.get("source") or {}).get("component") == CONTROLLER_AGENT:
                reasons[event.get("reason", "")] += 1
                if event.get("reason") == "Started":
                    started[f"{ns}/{event['involvedObject']['name']}"] += 1
    return reasons, sum(1 for n in started.values() if n > 1)


async def wait_complete(kube: KubeClient, namespaces: list[str], total: int, within: float) -> float:
    began = time.monotonic()
    while True:
        done = 0
        for ns in namespaces:
            jobs, _ = await kube.list_all(api_path("batch/v1", "jobs", ns))
            done += sum(1 for j in jobs if (j.get("status") or {}).get("succeeded"))
        if done >= total:
            return time.monotonic() - began
        if time.monotonic() - began > within:
            raise TimeoutError(f"{done} of {total} Jobs completed after {within:.0f}s")
        await asyncio.sleep(2.0)


async def benchmark(bed: Testbed, args: argparse.Namespace) -> None:
    per_queue = args.jobs // args.queues
    total = per_queue * args.queues
    log_dir = bed.run_dir / "logs"
    async with KubeClient.from_kubeconfig(bed.kubeconfig, request_timeout=60) as kube:
        await install_crds(kube)
        controller_queues = queues_for("bench", args.queues, per_queue)
        ceiling_queues = queues_for("ceiling", args.queues, per_queue)
        await create_queues(kube, [*controller_queues, *ceiling_queues])
        ctl_ns = [q.namespace for q in controller_queues]
        ceil_ns = [q.namespace for q in ceiling_queues]

        # 1. the controller
        controller = ControllerProcess(CONTROLLER_CONFIG, bed.kubeconfig, log_dir / "controller.log")
        await asyncio.to_thread(controller.start)
        try:
            await wait_log(controller.log_path, "caches synced", 60)
            print(
                f"== controller ready (pid {controller.pid}); flooding {total} Jobs over {args.queues} queues"
            )
            cpu_before = cpu_seconds(controller.pid)
            async with observing(kube) as observer:
                sent, created_in = await flood(
                    kube, jobs_for(controller_queues, total, args.run_seconds), observer, 600
                )
            cpu_used = cpu_seconds(controller.pid) - cpu_before
            hwm_at_admission = vm_hwm_kib(controller.pid)
            server = await server_latencies(kube, ctl_ns, CONTROLLER_AGENT)
            ctl = measure("controller", sent, created_in, observer, server)
            for line in ctl.lines():
                print(line, flush=True)
            print(
                f"  controller peak RSS (VmHWM) once all were admitted: {hwm_at_admission / 1024:.0f} MiB; "
                f"its CPU time from the first POST to the last unsuspend: {cpu_used:.1f}s"
            )
            completed_in = await wait_complete(kube, ctl_ns, total, args.complete_within)
            hwm = vm_hwm_kib(controller.pid)
            print(
                f"  every Job completed {completed_in:.0f}s after the last admission; controller peak RSS "
                f"(VmHWM) at the end: {hwm / 1024:.0f} MiB; its watch saw {observer.events} Job events"
            )
        finally:
            code = await asyncio.to_thread(controller.stop)
        events, started_twice = await count_events(kube, ctl_ns)
        print(
            f"  controller exit code on SIGTERM: {code}; Events it wrote: {dict(events)}; "
            f"Jobs with more than one Started Event: {started_twice}"
        )

        # 2. the ceiling: a bare client doing the same writes with the same concurrency
        print(f"== ceiling: bare client, {WRITE_CONCURRENCY} writes in flight, {total} fresh Jobs")
        bare = await asyncio.to_thread(
            _spawn_bare_client, bed.kubeconfig, "ceiling-", log_dir / "bare-client.log"
        )
        try:
            await wait_log(log_dir / "bare-client.log", "watching", 30)
            async with observing(kube) as observer:
                sent, created_in = await flood(
                    kube, jobs_for(ceiling_queues, total, args.run_seconds), observer, 600
                )
            server = await server_latencies(kube, ceil_ns, BARE_AGENT)
            ceiling = measure("ceiling (bare client)", sent, created_in, observer, server)
        finally:
            os.killpg(bare.pid, signal.SIGTERM)
            await asyncio.to_thread(bare.wait, 15)
        for line in ceiling.lines():
            print(line)
        lat_c, lat_b = sorted(ctl.latencies), sorted(ceiling.latencies)
        print(
            f"== ratio controller/ceiling: admissions/s {ctl.rate / ceiling.rate:.2f}; "
            f"p50 latency {_pct(lat_c, 50) / _pct(lat_b, 50):.2f}x; "
            f"p99 latency {_pct(lat_c, 99) / _pct(lat_b, 99):.2f}x"
        )


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


def _spawn_bare_client(kubeconfig: Path, prefix: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.e2e_admission",
                "bare-client",
                "--kubeconfig",
                str(kubeconfig),
                "--namespace-prefix",
                prefix,
            ],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


# --- the bare client ------------------------------------------------------------------------------


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


# --- main -----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.e2e_admission", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command")
    bare = sub.add_parser("bare-client", help="(internal) the ceiling's bare client")
    bare.add_argument("--kubeconfig", type=Path, required=True)
    bare.add_argument("--namespace-prefix", required=True)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--queues", type=int, default=10)
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--gpus-per-node", type=int, default=64, help="at most 128 (one ResourceSlice)")
    parser.add_argument("--run-seconds", type=float, default=1.0, help="how long each pod runs")
    parser.add_argument("--complete-within", type=float, default=400.0)
    parser.add_argument("--run-dir", type=Path, help="test-bed run folder (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.command == "bare-client":
        asyncio.run(bare_client(args.kubeconfig, args.namespace_prefix))
        return 0
    spec = TestbedSpec(nodes=pool_nodes(POOL, args.nodes, args.gpus_per_node, pods=400, cpu="64"))
    with contextlib.ExitStack() as stack:
        run_dir = args.run_dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-tb-")))
        bed = Testbed(run_dir=run_dir, spec=spec)
        began = time.monotonic()
        print(
            f"== test-bed in {run_dir}: {args.nodes} nodes x {args.gpus_per_node} GPUs; {os.cpu_count()} CPUs"
        )
        bed.start()
        try:
            asyncio.run(benchmark(bed, args))
        finally:
            bed.stop()
        print(f"== total {time.monotonic() - began:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
