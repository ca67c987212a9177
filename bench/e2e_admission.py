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

The manager is this controller or Kueue v0.18.1 (``--controller kueue``, ``--kueue-settings shipped``
or ``tuned``), both from one Configuration with the same waitForPodsReady. ``--repeat N`` runs the
managers of ``--managers`` interleaved, each run on a fresh test-bed with its own ceiling, and prints
the median and range per manager (bench/e2e_admission_repeat.py). ``--wait-for-pods-ready off``
turns waitForPodsReady off in that Configuration, for both managers alike. Unless ``--no-request-counts``,
the API server keeps an audit log from which each run counts the manager's and the bare client's
requests per admitted Job by verb and resource (bench/e2e_admission_requests.py).

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
from dataclasses import dataclass
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
    Figures,
    Observer,
    count_events,
    cpu_seconds,
    measure,
    observing,
    percentile,
    server_latencies,
    vm_hwm_kib,
    wait_complete,
)
from bench.e2e_admission_managers import MANAGERS, wait_log  # noqa: E402
from bench.e2e_admission_managers import install as install_manager_crds  # noqa: E402
from bench.e2e_admission_managers import start as start_manager  # noqa: E402
from bench.e2e_admission_repeat import RunResult, summary  # noqa: E402
from bench.e2e_admission_requests import (  # noqa: E402
    audit_args,
    audit_log,
    count_requests,
    request_table,
    request_total_labels,
)
from e2e.support.flood import (  # noqa: E402
    QueueSetup,
    create_jobs,
    create_queues,
    flood_job,
    pool_nodes,
)
from e2e.testbed import KubeClient, Testbed, TestbedSpec  # noqa: E402
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


@dataclass
class Phase:
    """What the manager's phase measured."""

    figures: Figures
    cpu: float
    rss_mib: float
    requests: Counter[str]


async def manager_phase(
    bed: Testbed, kube: KubeClient, args: argparse.Namespace, queues: list[QueueSetup], total: int
) -> Phase:
    controller, settings = MANAGERS[args.manager]
    namespaces = [q.namespace for q in queues]
    manager = await start_manager(
        controller,
        bed,
        bed.run_dir / "logs",
        CONTROLLER_AGENT,
        settings,
        wait_for_pods_ready=args.wait_for_pods_ready == "on",
    )
    try:
        print(
            f"== {manager.name} ready (pid {manager.pid}; CRDs: {args.crds}; "
            f"waitForPodsReady {args.wait_for_pods_ready}); "
            f"flooding {total} Jobs over {args.queues} queues"
        )
        cpu_before = cpu_seconds(manager.pid)
        flood_began = time.time()
        async with observing(kube) as observer:
            sent, created_in = await flood(kube, jobs_for(queues, total, args.run_seconds), observer, 600)
        cpu_used = cpu_seconds(manager.pid) - cpu_before
        hwm_at_admission = vm_hwm_kib(manager.pid)
        server = await server_latencies(kube, namespaces, manager.field_manager)
        figures = measure(manager.name, sent, created_in, observer, server)
        for line in figures.lines():
            print(line, flush=True)
        print(
            f"  {manager.name} peak RSS (VmHWM) once all were admitted: "
            f"{hwm_at_admission / 1024:.0f} MiB; "
            f"its CPU time from the first POST to the last unsuspend: {cpu_used:.1f}s"
        )
        done, completed_in = await wait_complete(kube, namespaces, total, args.complete_within)
        hwm = vm_hwm_kib(manager.pid)
        print(
            f"  {'every Job' if done == total else f'only {done} of {total} Jobs'} completed "
            f"{completed_in:.0f}s after the last admission; "
            f"{manager.name} peak RSS "
            f"(VmHWM) at the end: {hwm / 1024:.0f} MiB; its watch saw {observer.events} Job events"
        )
    finally:
        code = await asyncio.to_thread(manager.stop)
        stopped = time.time()
    events, started_twice = await count_events(kube, namespaces, manager.event_component)
    print(
        f"  {manager.name} exit code on SIGTERM: {code}; Events it wrote: {dict(events)}; "
        f"Jobs with more than one Started Event: {started_twice}"
    )
    requests = Counter[str]()
    if args.count_requests:
        requests = await asyncio.to_thread(
            count_requests, audit_log(args.audit_dir), manager.user_agent, flood_began, stopped
        )
    return Phase(figures, cpu_used, hwm / 1024, requests)


async def ceiling_phase(
    bed: Testbed, kube: KubeClient, args: argparse.Namespace, queues: list[QueueSetup], total: int
) -> tuple[Figures, Counter[str]]:
    """A bare client doing the same writes with the same concurrency."""
    log = bed.run_dir / "logs" / "bare-client.log"
    print(f"== ceiling: bare client, {WRITE_CONCURRENCY} writes in flight, {total} fresh Jobs")
    bare = await asyncio.to_thread(_spawn_bare_client, bed.kubeconfig, "ceiling-", log)
    try:
        await wait_log(log, "watching", 30)
        async with observing(kube) as observer:
            sent, created_in = await flood(kube, jobs_for(queues, total, args.run_seconds), observer, 600)
        server = await server_latencies(kube, [q.namespace for q in queues], BARE_AGENT)
        ceiling = measure("ceiling (bare client)", sent, created_in, observer, server)
    finally:
        os.killpg(bare.pid, signal.SIGTERM)
        await asyncio.to_thread(bare.wait, 15)
    for line in ceiling.lines():
        print(line)
    requests = Counter[str]()
    if args.count_requests:
        requests = await asyncio.to_thread(count_requests, audit_log(args.audit_dir), BARE_AGENT)
    return ceiling, requests


async def benchmark(bed: Testbed, args: argparse.Namespace) -> RunResult:
    per_queue = args.jobs // args.queues
    total = per_queue * args.queues
    async with KubeClient.from_kubeconfig(bed.kubeconfig, request_timeout=60) as kube:
        await install_manager_crds(kube, args.crds)
        controller_queues = queues_for("bench", args.queues, per_queue)
        ceiling_queues = queues_for("ceiling", args.queues, per_queue)
        await create_queues(kube, [*controller_queues, *ceiling_queues])
        ctl = await manager_phase(bed, kube, args, controller_queues, total)
        ceiling, bare_requests = await ceiling_phase(bed, kube, args, ceiling_queues, total)
        if args.count_requests and args.print_labels:
            labels = await request_total_labels(kube)
            names = ", ".join(labels)
            print(f"== apiserver_request_total labels: {names} (no client label)")
    lat_c, lat_b = sorted(ctl.figures.latencies), sorted(ceiling.latencies)
    print(
        f"== ratio {ctl.figures.name}/ceiling: admissions/s {ctl.figures.rate / ceiling.rate:.2f}; "
        f"p50 latency {percentile(lat_c, 50) / percentile(lat_b, 50):.2f}x; "
        f"p99 latency {percentile(lat_c, 99) / percentile(lat_b, 99):.2f}x"
    )
    result = RunResult(
        args.manager,
        total,
        ctl.figures.rate,
        ceiling.rate,
        percentile(lat_c, 50),
        percentile(lat_c, 99),
        ctl.cpu,
        ctl.rss_mib,
        ctl.requests,
        bare_requests,
    )
    if args.count_requests:
        print("== API requests per admitted Job (audit log), by verb and resource:")
        columns = {args.manager: (ctl.requests, total), "bare client": (bare_requests, total)}
        for line in request_table(columns):
            print(line)
    return result


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


def parse_args(argv: list[str] | None) -> argparse.Namespace:
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
    parser.add_argument(
        "--run-dir",
        type=Path,
        help="test-bed run folder, kept with the managers' logs (logs/), the audit log beside it "
        "(DIR-audit/); with --repeat, one folder per run under it (default: a temporary one)",
    )
    parser.add_argument(
        "--controller",
        choices=["ours", "kueue"],
        default="ours",
        help="the manager under test: `reconciler run`, or Kueue v0.18.1 (e2e/build-binaries.sh --kueue)",
    )
    parser.add_argument(
        "--kueue-settings",
        choices=["shipped", "tuned"],
        default="shipped",
        help="Kueue's client rate and workers: as shipped (50 qps, burst 100, 5 workers per kind) or "
        "tuned (1000 qps, burst 2000, 32 workers for Jobs, Pods and Workloads)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=0,
        help="run each of --managers N times, interleaved (ours, kueue-tuned, kueue-shipped, ours, ...), "
        "each run on a fresh test-bed with its own ceiling; prints median and range per manager",
    )
    parser.add_argument(
        "--managers",
        default=",".join(MANAGERS),
        help=f"with --repeat: which managers, in order (of {', '.join(MANAGERS)})",
    )
    parser.add_argument(
        "--crds",
        choices=["ours", "kueue"],
        help="Workload and queue CRDs: manifests/crds, or Kueue's own (larger schemas, costlier writes); "
        "default: the manager's own (Kueue always runs on its own)",
    )
    parser.add_argument(
        "--wait-for-pods-ready",
        choices=["on", "off"],
        default="on",
        help="waitForPodsReady in the Configuration of both managers: on (timeout 30m, blockAdmission "
        "false) or off (the same Configuration as v1beta1 with enable: false)",
    )
    parser.add_argument(
        "--no-request-counts",
        dest="count_requests",
        action="store_false",
        help="no audit log (by default the API server keeps one to count requests per client)",
    )
    args = parser.parse_args(argv)
    order = [m.strip() for m in args.managers.split(",") if m.strip()]
    if unknown := [m for m in order if m not in MANAGERS]:
        parser.error(f"--managers: unknown {', '.join(unknown)} (of {', '.join(MANAGERS)})")
    if args.controller == "kueue" and args.crds == "ours":
        parser.error("--controller kueue needs --crds kueue (Kueue writes fields this project's CRDs prune)")
    args.order = order if args.repeat else [_manager_key(args.controller, args.kueue_settings)]
    return args


def _manager_key(controller: str, settings: str) -> str:
    return "ours" if controller == "ours" else f"kueue-{settings}"


def run_once(args: argparse.Namespace, manager: str, spec: TestbedSpec, index: int = 0) -> RunResult:
    """One manager then its ceiling on a fresh test-bed (with --repeat and --run-dir, in a folder of
    its own under it: run-<index>-<manager>)."""
    run_args = argparse.Namespace(**vars(args))
    run_args.manager = manager
    kept: Path | None = args.run_dir
    if kept and args.repeat:
        kept = kept / f"run-{index}-{manager}"
    controller = MANAGERS[manager][0]
    run_args.crds = "kueue" if controller == "kueue" else (args.crds or "ours")
    with contextlib.ExitStack() as stack:
        run_dir = kept or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-tb-")))
        # kept beside the test-bed's folder (which it clears on start) when --run-dir names one
        temporary = None if kept else stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-audit-"))
        run_args.audit_dir = kept.with_name(f"{kept.name}-audit") if kept else Path(str(temporary))
        extra = audit_args(run_args.audit_dir) if args.count_requests else ()
        bed = Testbed(run_dir=run_dir, spec=spec, apiserver_args=extra)
        began = time.monotonic()
        print(
            f"== test-bed in {run_dir}: {args.nodes} nodes x {args.gpus_per_node} GPUs; "
            f"{os.cpu_count()} CPUs; manager {manager}"
        )
        bed.start()
        try:
            result = asyncio.run(benchmark(bed, run_args))
        finally:
            bed.stop()
        print(f"== total {time.monotonic() - began:.0f}s", flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command == "bare-client":
        asyncio.run(bare_client(args.kubeconfig, args.namespace_prefix))
        return 0
    spec = TestbedSpec(nodes=pool_nodes(POOL, args.nodes, args.gpus_per_node, pods=400, cpu="64"))
    results: list[RunResult] = []
    for i in range(max(1, args.repeat)):
        for manager in args.order:
            args.print_labels = not results  # the metric's labels, once
            results.append(run_once(args, manager, spec, i + 1))
            if args.repeat:
                print(f"== run {i + 1} of {args.repeat}, {manager} done", flush=True)
    if args.repeat:
        print(f"== waitForPodsReady {args.wait_for_pods_ready} for both managers")
        for line in summary(results, args.order):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
