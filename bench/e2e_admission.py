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
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/e2e_admission.py` as well as `-m bench.e2e_admission`
    sys.path.insert(0, str(ROOT))

from bench.e2e_admission_bare_client import (  # noqa: E402
    BARE_AGENT,
    FLAVOR,
    GPU,
    JOB_CPU,
    POOL,
    WRITE_CONCURRENCY,
    bare_client,
)
from bench.e2e_admission_figures import (  # noqa: E402
    Observer,
    cpu_seconds,
    measure,
    observing,
    percentile,
    server_latencies,
    vm_hwm_kib,
)
from bench.e2e_admission_managers import install as install_manager_crds  # noqa: E402
from bench.e2e_admission_managers import start as start_manager  # noqa: E402
from bench.e2e_admission_managers import wait_log  # noqa: E402
from e2e.support.flood import (  # noqa: E402
    QueueSetup,
    create_jobs,
    create_queues,
    flood_job,
    pool_nodes,
)
from e2e.testbed import KubeClient, Testbed, TestbedSpec, api_path  # noqa: E402
from e2e.testbed.kubeclient import Obj  # noqa: E402

CONTROLLER_AGENT = "dra-quota-reconciler"


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


async def count_events(kube: KubeClient, namespaces: list[str], component: str) -> tuple[Counter[str], int]:
    """The manager's Events by reason, and how many Jobs got more than one ``Started``."""
    reasons: Counter[str] = Counter()
    started: Counter[str] = Counter()
    for ns in namespaces:
        events, _ = await kube.list_all(api_path("v1", "events", ns))
        for event in events:
            source = (event.get("source") or {}).get("component") or event.get("reportingComponent")
            if source == component:
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
        await install_manager_crds(kube, args.crds)
        controller_queues = queues_for("bench", args.queues, per_queue)
        ceiling_queues = queues_for("ceiling", args.queues, per_queue)
        await create_queues(kube, [*controller_queues, *ceiling_queues])
        ctl_ns = [q.namespace for q in controller_queues]
        ceil_ns = [q.namespace for q in ceiling_queues]

        # 1. the manager under test
        manager = await start_manager(args.controller, bed, log_dir, CONTROLLER_AGENT)
        try:
            print(
                f"== {manager.name} ready (pid {manager.pid}; CRDs: {args.crds}); "
                f"flooding {total} Jobs over {args.queues} queues"
            )
            cpu_before = cpu_seconds(manager.pid)
            async with observing(kube) as observer:
                sent, created_in = await flood(
                    kube, jobs_for(controller_queues, total, args.run_seconds), observer, 600
                )
            cpu_used = cpu_seconds(manager.pid) - cpu_before
            hwm_at_admission = vm_hwm_kib(manager.pid)
            server = await server_latencies(kube, ctl_ns, manager.field_manager)
            ctl = measure(manager.name, sent, created_in, observer, server)
            for line in ctl.lines():
                print(line, flush=True)
            print(
                f"  {manager.name} peak RSS (VmHWM) once all were admitted: "
                f"{hwm_at_admission / 1024:.0f} MiB; "
                f"its CPU time from the first POST to the last unsuspend: {cpu_used:.1f}s"
            )
            completed_in = await wait_complete(kube, ctl_ns, total, args.complete_within)
            hwm = vm_hwm_kib(manager.pid)
            print(
                f"  every Job completed {completed_in:.0f}s after the last admission; "
                f"{manager.name} peak RSS "
                f"(VmHWM) at the end: {hwm / 1024:.0f} MiB; its watch saw {observer.events} Job events"
            )
        finally:
            code = await asyncio.to_thread(manager.stop)
        events, started_twice = await count_events(kube, ctl_ns, manager.event_component)
        print(
            f"  {manager.name} exit code on SIGTERM: {code}; Events it wrote: {dict(events)}; "
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
            f"== ratio {ctl.name}/ceiling: admissions/s {ctl.rate / ceiling.rate:.2f}; "
            f"p50 latency {percentile(lat_c, 50) / percentile(lat_b, 50):.2f}x; "
            f"p99 latency {percentile(lat_c, 99) / percentile(lat_b, 99):.2f}x"
        )


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
    parser.add_argument(
        "--controller",
        choices=["ours", "kueue"],
        default="ours",
        help="the manager under test: `reconciler run`, or Kueue v0.18.1 (e2e/build-binaries.sh --kueue) "
        "with its shipped worker counts and client rate",
    )
    parser.add_argument(
        "--crds",
        choices=["ours", "kueue"],
        help="Workload and queue CRDs: manifests/crds, or Kueue's own (larger schemas, costlier writes); "
        "default: the manager's own",
    )
    args = parser.parse_args(argv)
    if args.crds is None:
        args.crds = args.controller
    if args.controller == "kueue" and args.crds != "kueue":
        parser.error("--controller kueue needs --crds kueue (Kueue writes fields this project's CRDs prune)")
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
