"""``python -m e2e.chaos [--jobs N] [--seed S] [--faults F]``: a flood of mixed kinds (batch/v1 Jobs,
plain pods, pod groups, JobSets on the real JobSet controller) over three GPU ClusterQueues, on a
test-bed of its own with two replicas of the controller electing a leader, through ``F`` faults of
seven kinds (:mod:`e2e.chaos.faults`) at
seeded times. Alongside, the charge-level checker (:class:`e2e.support.invariants.InvariantMonitor`:
the Workloads' reserved usage against quota at every poll and every watched revision, across
relists; a Workload admitted twice; a Job unsuspended twice) and the pod-level checker
(:class:`e2e.chaos.pod_level.PodLevelChecker`). Prints a table; exits 1 on any lost unit, double
admission or over-commit at either level. Not in CI's timed path (docs/testing.md)."""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from e2e.chaos.faults import FAULT_KINDS, Injector, schedule
from e2e.chaos.mix import (
    KINDS,
    EndState,
    Unit,
    create_unit,
    end_state,
    make_units,
    plain_pod,
    register_pod_webhooks,
)
from e2e.chaos.pod_level import PodLevelChecker
from e2e.chaos.replicas import NAMES, Roles, WebhookProxy, make_replicas
from e2e.support.deploy import install_crds
from e2e.support.faults import own_testbed
from e2e.support.flood import GPU, TRANSIENT, QueueSetup, create_queues, four_queues, pool_nodes
from e2e.support.invariants import InvariantMonitor
from e2e.support.jobset import JobSetProcess, install_jobset_crds, jobset_build, jobset_webhooks
from e2e.support.webhooks import register
from e2e.testbed import ApiError, KubeClient, TestbedSpec, api_path


@dataclass
class Outcome:
    seed: int
    units: list[Unit]
    injector: Injector
    monitor: InvariantMonitor
    pods: PodLevelChecker
    roles: Roles
    end: EndState
    create_retries: int
    seconds: float = 0.0
    submitted: Counter[str] = field(default_factory=Counter)


async def submit(kube: KubeClient, units: list[Unit], batch: int, every: float, outcome: Outcome) -> None:
    """The units in batches of ``batch`` every ``every`` seconds (a batch's units at once)."""
    for start in range(0, len(units), batch):
        began = time.monotonic()
        chunk = units[start : start + batch]
        outcome.create_retries += sum(await asyncio.gather(*(create_unit(kube, u) for u in chunk)))
        outcome.submitted.update(u.kind for u in chunk)
        await asyncio.sleep(max(0.0, every - (time.monotonic() - began)))


async def webhook_gates(kube: KubeClient, queue: QueueSetup) -> bool:
    body = plain_pod("probe", queue, 1)
    created = await kube.request(
        "POST", api_path("v1", "pods", queue.namespace), params={"dryRun": "All"}, body=body
    )
    return "kueue.x-k8s.io/admission" in [g["name"] for g in created["spec"].get("schedulingGates") or []]


async def run(args: argparse.Namespace, run_dir: Path) -> Outcome:
    rng = random.Random(args.seed)
    queues = four_queues()[:3]
    spec = TestbedSpec(nodes=[n for q in queues for n in pool_nodes(q.pool, 1, int(q.quota[GPU]) + 1)])
    units = make_units(queues, args.jobs, rng)
    plan = schedule(rng, args.faults, (4.0, 10.0))
    # --quota-margin: the checkers judge the GPUs against less than the nominal quota (to see them bite).
    quotas = {
        k: v - (args.quota_margin if k[2] == GPU else 0) for q in queues for k, v in q.quota_limits().items()
    }
    window = sum(pause for pause, _ in plan) + 10.0 * len(plan)  # about how long the faults take
    began = time.monotonic()
    async with (
        own_testbed(run_dir / "testbed", spec) as bed,
        KubeClient.from_kubeconfig(bed.kubeconfig) as kube,
    ):
        await install_crds(kube)
        jobset = JobSetProcess(jobset_build(), bed.kubeconfig, run_dir / "jobset")
        await install_jobset_crds(kube, jobset.build)
        await create_queues(kube, queues)
        replicas, ca_pem = make_replicas(run_dir / "replicas", bed.kubeconfig)
        roles = Roles(replicas)
        proxy = WebhookProxy(replicas, roles)
        injector = Injector(bed, replicas, roles, proxy, jobset)
        outcome = Outcome(
            args.seed,
            units,
            injector,
            InvariantMonitor(quotas, interval=0.5),
            PodLevelChecker(queues, margin=args.quota_margin),
            roles,
            EndState(Counter(), {}),
            0,
        )
        try:
            async with roles.running(), proxy.serving():
                jobset.start()
                await jobset.wait_ready_async()
                await register(kube, jobset_webhooks(jobset.build, jobset.webhook_port, jobset.ca_pem))
                await asyncio.to_thread(replicas[NAMES[0]].start)
                await injector.recover()  # starts the second one too
                await register_pod_webhooks(kube, queues, proxy.port, ca_pem)
                for _ in range(120):
                    try:
                        if await webhook_gates(kube, queues[0]):
                            break
                    except (ApiError, *TRANSIENT):
                        pass  # not called yet: keep asking
                    await asyncio.sleep(0.5)
                async with outcome.monitor.running(kube), outcome.pods.running(kube):
                    injector.began = time.monotonic()
                    print(
                        f"chaos: seed {args.seed}, {len(units)} units, {len(plan)} faults; run dir {run_dir}",
                        flush=True,
                    )
                    batch = max(1, len(units) // 20)
                    every = 0.8 * window / -(-len(units) // batch)  # submitting over most of the faults
                    await asyncio.gather(submit(kube, units, batch, every, outcome), injector.run(plan))
                    deadline = time.monotonic() + args.drain
                    while True:
                        outcome.end = await end_state(kube, units)
                        if not outcome.end.lost or time.monotonic() > deadline:
                            break
                        await asyncio.sleep(2.0)
                    await asyncio.sleep(1.0)  # a few more samples of the end state
        finally:
            for process in (*replicas.values(), jobset):
                await asyncio.to_thread(process.stop)
    outcome.seconds = time.monotonic() - began
    return outcome


def table(o: Outcome) -> tuple[str, bool]:
    """The run's table, and whether it is clean (no lost unit, no double admission, no over-commit)."""
    m = o.monitor
    lines = [
        f"chaos run: seed {o.seed}, {sum(o.submitted.values())} units submitted, {o.seconds:.0f} s in all"
    ]
    lines.append(f"{'fault':<20}{'injected':>9}{'max recovery s':>16}")
    for kind in FAULT_KINDS:
        done = [r for r in o.injector.records if r.kind == kind]
        worst = max((r.recovered_in for r in done), default=0.0)
        lines.append(f"{kind:<20}{len(done):>9}{worst:>16.1f}")
    lines.append(f"{'total':<20}{len(o.injector.records):>9}")
    lines.append(f"{'kind':<8}{'submitted':>10}{'finished':>10}{'lost':>6}")
    lost = Counter(name.split()[0] for name in o.end.lost)
    for kind in KINDS:
        lines.append(f"{kind:<8}{o.submitted[kind]:>10}{o.end.finished[kind]:>10}{lost[kind]:>6}")
    total_lost = len(o.end.lost)
    lines.append(
        f"{'total':<8}{sum(o.submitted.values()):>10}{sum(o.end.finished.values()):>10}{total_lost:>6}"
    )
    twice, restarted, split = m.double_admissions(), m.jobs_started_twice(), o.end.workloads
    lines.append(
        f"admitted twice: {len(twice) + len(restarted)} (Workloads {len(twice)}, Jobs unsuspended twice "
        f"{len(restarted)}); units without exactly one Workload: {len(split)}"
    )
    charge, pod = m.overcommit_samples(), len(o.pods.overcommits)
    other = [v for v in m.violations if "> quota" not in v]
    lines.append(
        f"over-commit samples: charge level {charge} (of {m.polls} polls, {m.watch_events} watch events, "
        f"{m.relists} relists, {m.watch_breaks} watch breaks); pod level {pod} (of {o.pods.samples} samples)"
    )
    lines.append(f"charge level: {m.summary()}")
    lines.append(f"pod level: {o.pods.summary()}")
    gpu = {k: v for k, v in m.quotas.items() if k[2] == GPU}
    full = sum(1 for k, v in gpu.items() if m.peaks.get(k, 0) >= v)
    lines.append(f"quota reached (charge level): {full} of {len(gpu)} GPU quotas")
    lines.append(
        f"other: {len(other)} other invariant violations; "
        f"{o.roles.two_leaders} probe rounds with two replicas saying leader; "
        f"{o.injector.restarts_after_pause} replicas exited after a pause; "
        f"{o.create_retries} create attempts retried; {o.injector.proxy.refused} webhook connections refused"
    )
    problems = [
        *list(o.end.lost.items())[:10],
        *twice.items(),
        *restarted,
        *list(split.items())[:10],
        *m.violations[:10],
        *o.pods.overcommits[:10],
    ]
    lines.extend(f"  ! {p}" for p in problems)
    clean = not (total_lost or twice or restarted or split or charge or pod or other)
    lines.append("PASS" if clean else "FAIL")
    return "\n".join(lines), clean


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.chaos", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--jobs", type=int, default=150, help="units in the flood (Jobs, pods, pod groups, JobSets)"
    )
    parser.add_argument(
        "--seed", type=int, default=None, help="seeds the mix and the faults (default: random)"
    )
    parser.add_argument(
        "--faults", type=int, default=14, help=f"faults, every kind in turn ({len(FAULT_KINDS)} kinds)"
    )
    parser.add_argument(
        "--drain", type=float, default=240.0, help="seconds the flood may take to finish after the faults"
    )
    parser.add_argument(
        "--quota-margin",
        type=int,
        default=0,
        help="the checkers take each quota as this many GPUs less (1 shows they report an over-commit)",
    )
    parser.add_argument(
        "--run-dir",
        type=Path,
        default=None,
        help="where the test-bed and the logs go (default: a new temporary folder)",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.faults < 1:
        parser.error("--jobs and --faults must be at least 1")
    if args.seed is None:
        args.seed = random.randrange(1_000_000)
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="chaos-"))
    outcome = asyncio.run(run(args, run_dir))
    text, clean = table(outcome)
    print(text)
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
