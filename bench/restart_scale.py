"""Benchmark on the test-bed: the controller restarting with many Workloads stored, against a bare
paged list of the same Workloads in the same run (issue 26, item 5).

Starts its own test-bed (one node, no GPUs), installs the CRDs and stores, before the controller
ever runs, ``--workloads`` bare Workloads (bench/restart_scale_objects.py): most admitted (their
admission written through the status subresource as this controller writes it), the rest pending,
over a few ClusterQueues whose quota leaves room for exactly ``--free-slots`` pending Workloads each
once the ledger is rebuilt. Storing runs ``--concurrency`` requests in flight; its time is printed.

Then, in the same run:

1. **bare list**: a paged list of all Workloads (limit 500, as the controller's informer lists),
   timed to the last page, ``--list-repeats`` times.
2. **restart**: ``reconciler run`` (as bench/e2e_admission_managers.py starts it, same
   Configuration) as a child process; from the moment it is spawned: its first log line, the log
   line ``caches synced; ledger rebuilt`` (by the line's own timestamp), the first pending Workload
   seen QuotaReserved=True by a Workload watch in this process, and the last of those that fit;
   its peak RSS (VmHWM) and CPU seconds at each point.

Prints a table with the ratio first admission / bare list (median of the repeats).

Run: ``nice -n 10 .venv/bin/python -m bench.restart_scale`` (50,000 Workloads; ``--workloads 2000``
for a quick look). Prints figures; fails only if no pending Workload is admitted within `--within` s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/restart_scale.py` as well as `-m bench.restart_scale`
    sys.path.insert(0, str(ROOT))

from bench.e2e_admission_figures import cpu_seconds, vm_hwm_kib  # noqa: E402
from bench.e2e_admission_managers import bench_configuration  # noqa: E402
from bench.restart_scale_objects import (  # noqa: E402
    KUEUE,
    Layout,
    Plan,
    WorkloadPlan,
    admission_patch,
    plan,
    queue_objects,
    workload_body,
)
from bench.restart_scale_watch import LogTail, log_epoch, watching  # noqa: E402
from e2e.support.deploy import ControllerProcess, install_crds, object_path  # noqa: E402
from e2e.testbed import ApiError, KubeClient, NodeSpec, Testbed, TestbedSpec, api_path  # noqa: E402

SYNCED = "caches synced; ledger rebuilt"
PAGE_SIZE = 500
SETTLE = 5.0  # seconds the controller runs on after the last Workload that fits is admitted
TRANSIENT = (aiohttp.ClientError, OSError, asyncio.TimeoutError)


# --- storing --------------------------------------------------------------------------------------


async def _with_retries(
    kube: KubeClient, method: str, path: str, body: dict[str, object]
) -> dict[str, object]:
    """One write, retried on connection failures, 429 and 5xx (the test-bed under load)."""
    content_type = "application/merge-patch+json" if method == "PATCH" else None
    for attempt in range(1, 21):
        try:
            return await kube.request(method, path, body=body, content_type=content_type)
        except ApiError as err:
            if err.status == 409 and method == "POST" and attempt > 1:
                # An earlier attempt got through: the object as it is now.
                return await kube.get(f"{path}/{body['metadata']['name']}")  # type: ignore[index]
            if err.status < 500 and err.status != 429:
                raise
        except TRANSIENT:
            pass
        await asyncio.sleep(min(5.0, 0.2 * attempt))
    raise TimeoutError(f"{method} {path}: still failing after 20 attempts")


async def _store_one(kube: KubeClient, w: WorkloadPlan, cpu_milli: int) -> int:
    """Create the Workload and, if admitted, write its admission; the requests sent."""
    created = await _with_retries(
        kube, "POST", api_path(KUEUE, "workloads", w.namespace), workload_body(w, cpu_milli)
    )
    if not w.admitted:
        return 1
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status_path = api_path(KUEUE, "workloads", w.namespace, w.name, "status")
    await _with_retries(kube, "PATCH", status_path, admission_patch(w, cpu_milli, created, now))
    return 2


async def store(kube: KubeClient, p: Plan, concurrency: int) -> tuple[float, int]:
    """Queues, then every Workload, ``concurrency`` at a time; (seconds, requests) of the Workloads."""
    for obj in queue_objects(p):
        await kube.apply(object_path(obj), obj, "restart-bench")
    todo = iter(p.workloads)
    done = 0
    requests = 0
    step = max(1, len(p.workloads) // 10)
    began = time.monotonic()

    async def worker() -> None:
        nonlocal done, requests
        for w in todo:  # shared iterator: each Workload goes to one worker
            sent = await _store_one(kube, w, p.layout.cpu_milli)
            requests += sent
            done += 1
            if done % step == 0:
                elapsed = time.monotonic() - began
                print(f"  stored {done} of {len(p.workloads)} in {elapsed:.0f}s", flush=True)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.monotonic() - began, requests


# --- the bare list --------------------------------------------------------------------------------


@dataclass
class ListRun:
    seconds: float
    pages: int
    items: int


async def bare_list(kube: KubeClient) -> ListRun:
    """All Workloads, pages of 500, each page decoded (as a client must), timed to the last page."""
    path = api_path(KUEUE, "workloads")
    query = {"limit": str(PAGE_SIZE)}
    pages = items = 0
    began = time.monotonic()
    while True:
        page = await kube.request("GET", path, params=query, timeout_seconds=120)
        pages += 1
        items += len(page.get("items") or [])
        cont = (page.get("metadata") or {}).get("continue")
        if not cont:
            return ListRun(time.monotonic() - began, pages, items)
        query["continue"] = cont


# --- the restart ----------------------------------------------------------------------------------


@dataclass
class Restart:
    first_log: float
    synced: float
    synced_line: dict[str, object]
    first_admission: float
    fitting_admitted: float | None
    admitted: int
    workload_writes: int
    cpu_at: dict[str, float]
    hwm_mib_at: dict[str, float]
    exit_code: int | None


def _sample(pid: int, label: str, cpu: dict[str, float], hwm: dict[str, float]) -> None:
    cpu[label] = cpu_seconds(pid)
    hwm[label] = vm_hwm_kib(pid) / 1024


async def restart(bed: Testbed, kube: KubeClient, p: Plan, within: float) -> Restart:
    """Start the controller; times from its spawn to the ledger line, the first and last admission."""
    log_dir = bed.run_dir / "logs"
    config = log_dir / "restart-configuration.yaml"
    await asyncio.to_thread(config.write_text, yaml.safe_dump(bench_configuration(), sort_keys=False))
    process = ControllerProcess(config, bed.kubeconfig, log_dir / "controller.log")
    pending = {(w.namespace, w.name) for w in p.workloads if not w.admitted}
    tail = LogTail(process.log_path)
    await asyncio.to_thread(tail.read)  # skip whatever an earlier run left
    cpu: dict[str, float] = {}
    hwm: dict[str, float] = {}
    async with watching(kube, pending) as watch:
        spawned = time.time()
        await asyncio.to_thread(process.start)
        try:
            line = await tail.wait_for(SYNCED, within)
            _sample(process.pid, "ledger", cpu, hwm)
            if not await watch.wait_count(1, within):
                raise TimeoutError(f"no pending Workload admitted within {within:.0f}s of the ledger line")
            _sample(process.pid, "first admission", cpu, hwm)
            all_in = await watch.wait_count(p.fitting, within)
            _sample(process.pid, "last fitting", cpu, hwm)
            await asyncio.sleep(SETTLE)  # any admission beyond those that fit would be a wrong ledger
        finally:
            code = await asyncio.to_thread(process.stop)
    first = min(watch.admitted_at.values())
    assert tail.first is not None
    return Restart(
        first_log=log_epoch(str(tail.first["timestamp"])) - spawned,
        synced=log_epoch(str(line["timestamp"])) - spawned,
        synced_line=line,
        first_admission=first - spawned,
        fitting_admitted=max(watch.admitted_at.values()) - spawned if all_in else None,
        admitted=len(watch.admitted_at),
        workload_writes=watch.events,
        cpu_at=cpu,
        hwm_mib_at=hwm,
        exit_code=code,
    )


# --- the report -----------------------------------------------------------------------------------


def report(
    p: Plan, stored: tuple[float, int], concurrency: int, lists: list[ListRun], r: Restart
) -> list[str]:
    seconds, requests = stored
    bare = statistics.median(x.seconds for x in lists)
    each = ", ".join(f"{x.seconds:.2f}" for x in lists)
    counted = "not all of them within the time allowed" if r.fitting_admitted is None else "counted"
    lines = [
        f"== {len(p.workloads)} Workloads ({p.admitted} admitted, {p.pending} pending) over "
        f"{len(p.queues)} ClusterQueues, {sum(len(q.namespaces) for q in p.queues)} namespaces",
        f"  stored in {seconds:.1f} s ({requests} requests, {requests / seconds:.0f}/s, "
        f"{concurrency} in flight)",
        f"  bare paged list (limit {PAGE_SIZE}, {lists[0].pages} pages, {lists[0].items} items): "
        f"{each} s; median {bare:.2f} s",
        f"  controller log line {SYNCED!r}: admitted={r.synced_line.get('admitted')} "
        f"workloads={r.synced_line.get('workloads')}; exit code on SIGTERM {r.exit_code}",
        "",
        f"  {'from spawn of `reconciler run` to':<40} {'s':>8} {'x bare list':>12} "
        f"{'CPU s':>7} {'VmHWM MiB':>10}",
        f"  {'its first log line':<40} {r.first_log:>8.2f} {r.first_log / bare:>12.2f} {'':>7} {'':>10}",
    ]
    for label, value, sample in (
        (f"{SYNCED!r}", r.synced, "ledger"),
        ("first admission seen (watch)", r.first_admission, "first admission"),
        (f"all {p.fitting} that fit admitted", r.fitting_admitted, "last fitting"),
    ):
        shown = f"{value:>8.2f} {value / bare:>12.2f}" if value is not None else f"{'-':>8} {'-':>12}"
        lines.append(f"  {label:<40} {shown} {r.cpu_at[sample]:>7.1f} {r.hwm_mib_at[sample]:>10.0f}")
    lines.append(f"  ratio first admission / bare list (median): {r.first_admission / bare:.2f} (goal: <= 2)")
    lines.append(
        f"  pending Workloads admitted in all: {r.admitted} (that fit: {p.fitting}; {counted} "
        f"{SETTLE:.0f} s after the last admission); Workload updates the watch saw from the "
        f"spawn to then: {r.workload_writes}"
    )
    return lines


# --- main -----------------------------------------------------------------------------------------


async def benchmark(bed: Testbed, args: argparse.Namespace) -> list[str]:
    p = plan(
        Layout(
            args.workloads,
            cluster_queues=args.cluster_queues,
            namespaces_per_queue=args.namespaces_per_queue,
            pending_percent=args.pending_percent,
            free_slots=args.free_slots,
        )
    )
    async with KubeClient.from_kubeconfig(bed.kubeconfig, request_timeout=120) as kube:
        await install_crds(kube)
        print(f"== storing {len(p.workloads)} Workloads, {args.concurrency} requests in flight", flush=True)
        stored = await store(kube, p, args.concurrency)
        print(f"  stored in {stored[0]:.1f} s", flush=True)
        lists = []
        for i in range(args.list_repeats):
            lists.append(await bare_list(kube))
            print(
                f"== bare paged list {i + 1}: {lists[-1].seconds:.2f} s, {lists[-1].items} items", flush=True
            )
        print("== starting the controller", flush=True)
        r = await restart(bed, kube, p, args.within)
    return report(p, stored, args.concurrency, lists, r)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.restart_scale", description=__doc__.split("\n")[0])
    parser.add_argument("--workloads", type=int, default=50_000)
    parser.add_argument("--cluster-queues", type=int, default=4)
    parser.add_argument("--namespaces-per-queue", type=int, default=2)
    parser.add_argument("--pending-percent", type=float, default=10.0, help="of each queue's Workloads")
    parser.add_argument("--free-slots", type=int, default=1, help="pending Workloads that fit per queue")
    parser.add_argument("--concurrency", type=int, default=48, help="requests in flight while storing")
    parser.add_argument("--list-repeats", type=int, default=3)
    parser.add_argument("--within", type=float, default=900.0, help="seconds allowed for each restart step")
    parser.add_argument("--run-dir", type=Path, help="test-bed run folder (default: a temporary one)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spec = TestbedSpec(nodes=[NodeSpec(name="restart-1")])
    with contextlib.ExitStack() as stack:
        run_dir = args.run_dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-rs-")))
        bed = Testbed(run_dir=run_dir, spec=spec, build=False)
        print(f"== test-bed in {run_dir}; {os.cpu_count()} CPUs", flush=True)
        began = time.monotonic()
        bed.start()
        try:
            lines = asyncio.run(benchmark(bed, args))
        finally:
            bed.stop()
    for line in lines:
        print(line)
    print(f"== total {time.monotonic() - began:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
