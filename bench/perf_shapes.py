"""Kueue's scheduler performance-suite shapes on the test-bed, against this controller or Kueue v0.18.1.

Kueue v0.18.1's test/performance/scheduler creates, per its generator config, cohorts of
ClusterQueues and, per ClusterQueue, sets of Workloads directly (no Jobs), each set one Workload per
creation interval; its runner marks each admitted Workload Finished once its runtime has passed, and
its recorder reports the wall time, the mean time to admission per class and the ClusterQueues'
cpu usage. This bench does the same on a fresh test-bed (bench/perf_shapes_shape.py: the shapes,
bench/perf_shapes_runner.py: the runner and recorder) with the manager of ``--manager``: this
controller or Kueue v0.18.1 with its shipped or tuned client settings, both from the Configuration
bench/e2e_admission.py gives them, each on its own CRDs.

``--shape baseline`` (5 cohorts x 6 ClusterQueues, 15,000 Workloads) or ``large`` (10 x 100,
50,000); ``--scale F`` divides the counts of cohorts, ClusterQueues per cohort and Workloads per set
by F (rounded up), keeping quotas, sizes, runtimes, priorities and creation intervals.

Figures: wall time (first Workload POST to the last Finished seen), time to admission per class
(POST sent to Admitted=True first seen by the runner's watch: mean, p50, p90) and evictions, the
ClusterQueues' cpu usage as Kueue's checker computes it, the manager's CPU seconds (first POST to
last Finished) and peak RSS (VmHWM), and its API requests per Workload from the audit log.

Run: ``nice -n 10 .venv/bin/python -m bench.perf_shapes --shape baseline --scale 10 --manager ours``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/perf_shapes.py` as well as `-m bench.perf_shapes`
    sys.path.insert(0, str(ROOT))

from bench.e2e_admission_figures import cpu_seconds, vm_hwm_kib  # noqa: E402
from bench.e2e_admission_managers import MANAGERS  # noqa: E402
from bench.e2e_admission_managers import install as install_crds  # noqa: E402
from bench.e2e_admission_managers import start as start_manager  # noqa: E402
from bench.e2e_admission_requests import audit_args, audit_log, count_requests, request_table  # noqa: E402
from bench.perf_shapes_figures import Result, class_figures, result_lines  # noqa: E402
from bench.perf_shapes_runner import Runner, UsageRecorder, watch_forever  # noqa: E402
from bench.perf_shapes_shape import KUEUE, SHAPES, ClassSet, Shape, object_path, scaled, workload  # noqa: E402
from e2e.testbed import KubeClient, Testbed, api_path  # noqa: E402
from e2e.testbed.kubeclient import ApiError, Obj  # noqa: E402

AGENT = "dra-quota-reconciler"
FIELD_MANAGER = "perf-shapes"
TRANSIENT = (OSError, TimeoutError)


# --- creating -------------------------------------------------------------------------------------


async def create_setup(kube: KubeClient, shape: Shape) -> None:
    for obj in shape.setup_objects():
        await kube.apply(object_path(obj), obj, FIELD_MANAGER)


async def wait_active(kube: KubeClient, count: int, within: float) -> None:
    """Until the manager has every ClusterQueue Active."""
    deadline = time.monotonic() + within
    while True:
        queues, _ = await kube.list_all(api_path(KUEUE, "clusterqueues"))
        active = sum(
            1
            for q in queues
            if any(
                c["type"] == "Active" and c["status"] == "True"
                for c in q.get("status", {}).get("conditions", [])
            )
        )
        if active >= count:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{active} of {count} ClusterQueues Active after {within:.0f}s")
        await asyncio.sleep(0.5)


async def post(kube: KubeClient, obj: Obj) -> None:
    path = object_path(obj).rsplit("/", 1)[0]
    for attempt in range(5):
        try:
            await kube.create(path, obj)
            return
        except TRANSIENT:
            await asyncio.sleep(0.2 * (attempt + 1))
        except ApiError as err:
            if err.status == 409:  # an earlier attempt landed
                return
            if err.status < 500 and err.status != 429:
                raise
            await asyncio.sleep(0.2 * (attempt + 1))
    raise RuntimeError(f"could not create {path}/{obj['metadata']['name']}")


async def create_set(kube: KubeClient, runner: Runner, namespace: str, index: int, cls: ClassSet) -> float:
    """One workload set of one ClusterQueue, as Kueue's generator: wait the interval, create, again.
    Returns when the last one was created (time.time())."""
    for i in range(cls.count):
        await asyncio.sleep(cls.interval_ms / 1000)
        obj = workload(namespace, f"{cls.name}-{index}-{i}", cls)
        runner.expect(obj, time.time())
        await post(kube, obj)
    return time.time()


async def load(kube: KubeClient, runner: Runner, shape: Shape) -> float:
    """Every set of every ClusterQueue at once; how long creating took (s)."""
    began = time.time()
    sets = [
        create_set(kube, runner, name, index, cls)
        for _, name in shape.queue_names()
        for index, cls in enumerate(shape.sets)
    ]
    ends = await asyncio.gather(*sets)
    return max(ends) - began


# --- one run --------------------------------------------------------------------------------------


async def run(bed: Testbed, args: argparse.Namespace, shape: Shape) -> Result:
    controller, settings = MANAGERS[args.manager]
    async with KubeClient.from_kubeconfig(bed.kubeconfig, request_timeout=60) as kube:
        await install_crds(kube, controller)
        await create_setup(kube, shape)
        extra = () if args.retry_parked_after is None else ("--retry-parked-after", args.retry_parked_after)
        manager = await start_manager(controller, bed, bed.run_dir / "logs", AGENT, settings, extra)
        try:
            await wait_active(kube, shape.cluster_queues, 120)
            print(f"== {manager.name} ready (pid {manager.pid}); {shape.cluster_queues} ClusterQueues Active")
            result = await measure(kube, args, shape, manager.pid)
        finally:
            await asyncio.to_thread(manager.stop)
            stopped = time.time()
    result.manager = manager.name
    result.requests = await asyncio.to_thread(
        count_requests, audit_log(args.audit_dir), manager.user_agent, result.began, stopped
    )
    return result


async def measure(kube: KubeClient, args: argparse.Namespace, shape: Shape, pid: int) -> Result:
    runner, usage = Runner(kube), UsageRecorder()
    loop = asyncio.get_running_loop()
    watches: list[asyncio.Task[Any]] = [
        loop.create_task(watch_forever(kube, api_path(KUEUE, "workloads"), runner.handle)),
        loop.create_task(watch_forever(kube, api_path(KUEUE, "clusterqueues"), usage.observe)),
    ]
    try:
        await asyncio.sleep(0.5)  # the watches are open
        cpu_before, began = cpu_seconds(pid), time.time()
        loading = loop.create_task(load(kube, runner, shape))
        waiting = loop.create_task(runner.wait_finished(shape.workloads, args.within))
        watches += [loading, waiting]  # (cancelled if the other fails)
        await asyncio.wait([loading, waiting], return_when=asyncio.FIRST_EXCEPTION)
        created_in = await loading
        try:
            await waiting
        except TimeoutError as err:
            print(f"== {err}: the figures below are of the finished ones", flush=True)
        cpu = cpu_seconds(pid) - cpu_before
        ended = time.time()
        hwm = vm_hwm_kib(pid)
        await asyncio.sleep(2.0)  # the ClusterQueues' last status writes (their usage back to 0)
    finally:
        for task in watches:
            task.cancel()
        await asyncio.gather(*watches, return_exceptions=True)
    finished = runner.finished()
    last = (
        max(t.finished_at or 0.0 for t in runner.tracked.values()) if finished == shape.workloads else ended
    )
    return Result(
        shape=shape.name,
        scale=shape.scale,
        manager=args.manager,
        workloads=shape.workloads,
        finished=finished,
        wall=last - began,
        created_in=created_in,
        classes=class_figures(runner.tracked.values()),
        usage_percent=usage.usage_percent(),
        cpu=cpu,
        rss_mib=hwm / 1024,
        runner_patches=runner.patches,
        began=began,
        requests=Counter(),
    )


# --- main -----------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.perf_shapes", description=__doc__.split("\n")[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="baseline")
    parser.add_argument("--scale", type=float, default=10.0, help="divide the counts by this (>= 1)")
    parser.add_argument("--manager", choices=list(MANAGERS), default="ours")
    parser.add_argument("--within", type=float, default=900.0, help="seconds for every Workload to finish")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--run-dir", type=Path, help="test-bed run folder (default: a temporary one)")
    parser.add_argument("--print-shape", action="store_true", help="print the effective shape and stop")
    parser.add_argument(
        "--retry-parked-after",
        help="this controller only: its --retry-parked-after (default its own, 1s; 0 retries at once)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    shape = scaled(SHAPES[args.shape], args.scale)
    for line in shape.describe():
        print(line)
    if args.print_shape:
        return 0
    with ExitStack() as stack:
        run_dir = args.run_dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="perf-tb-")))
        args.audit_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="perf-audit-")))
        bed = Testbed(run_dir=run_dir, apiserver_args=audit_args(args.audit_dir))
        bed.start()
        try:
            result = asyncio.run(run(bed, args, shape))
        finally:
            bed.stop()
    for line in result_lines(result):
        print(line)
    print("== API requests per Workload by the manager (audit log), by verb and resource:")
    for line in request_table({result.manager: (result.requests, result.workloads)}):
        print(line)
    if args.json:
        args.json.write_text(json.dumps(result.to_json(), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
