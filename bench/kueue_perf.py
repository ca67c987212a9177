"""Kueue's own scheduler-performance runner and checker against this controller and against Kueue.

Kueue v0.18.1 ships its judge in test/performance/scheduler: the runner creates, from a config's
generator.yaml, a ResourceFlavor, cohorts of ClusterQueues, a Namespace and LocalQueue per
ClusterQueue and Workloads directly (no Jobs, no owner), plays each admitted Workload for its
runtime and marks it Finished, ends evicted Workloads' reservations, and writes summary.yaml (mean
time to admission per Workload class, ClusterQueue cpu usage); the checker (a Go test) holds that
summary and the manager's command stats against the config's rangespec.yaml. Both are built from
Kueue's module unmodified (``e2e/build-binaries.sh --kueue-perf``, cached by version) and run
"in an existing cluster": here a fresh test-bed per run, Kueue's CRDs installed, the manager under
test started as bench/e2e_admission_managers.py starts it (the same Configuration for both,
waitForPodsReady on unless ``--wait-for-pods-ready off``), the runner pointed at the test-bed's
kubeconfig with the flags of Kueue's `run-performance-scheduler-in-cluster` target (qps 1000,
burst 2000). The checker's command stats are the manager's: wall = the runner's wall time (Kueue's
CI times minimalkueue, started just before the runner and stopped when it ends), user and system
CPU over the run, peak RSS (VmHWM).

Run: ``nice -n 10 .venv/bin/python -m bench.kueue_perf --config baseline --managers ours,kueue-tuned``
(``--repeat N`` interleaves the managers N times; artifacts under ``--out``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/kueue_perf.py` as well as `-m bench.kueue_perf`
    sys.path.insert(0, str(ROOT))

from bench.e2e_admission_figures import vm_hwm_kib  # noqa: E402
from bench.e2e_admission_managers import MANAGERS  # noqa: E402
from bench.e2e_admission_managers import install as install_crds  # noqa: E402
from bench.e2e_admission_managers import start as start_manager  # noqa: E402
from bench.kueue_perf_summary import (  # noqa: E402
    Run,
    Verdict,
    checker_verdict,
    cmd_stats_yaml,
    expected_workloads,
    generation_lines,
    parse_range,
    parse_summary,
    side_by_side,
    with_cohorts,
    workload_counts,
)
from e2e.testbed import KubeClient, Testbed  # noqa: E402

AGENT = "dra-quota-reconciler"
CONFIGS = ("baseline", "large-scale")
# The runner's --timeout (its recording time) per config: Kueue's in-cluster target uses 15m for
# baseline; its large-scale target (with minimalkueue) uses 30m.
RUNNER_TIMEOUT = {"baseline": "15m", "large-scale": "30m"}


def kueue_version() -> str:
    for line in (ROOT / "e2e" / "versions.env").read_text().splitlines():
        if line.startswith("KUEUE_VERSION="):
            return line.split("=", 1)[1].strip()
    raise RuntimeError("no KUEUE_VERSION in e2e/versions.env")


def perf_dir() -> Path:
    base = os.environ.get("TESTBED_CACHE") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dra-quota-testbed"
    )
    return Path(base) / f"kueue-perf-{kueue_version()}"


def ensure_built() -> Path:
    """Kueue's runner, checker and configs (and Kueue's manager), built where missing."""
    folder = perf_dir()
    if not (folder / "bin" / "runner").exists() or not (folder / "bin" / "checker.test").exists():
        subprocess.run([str(ROOT / "e2e" / "build-binaries.sh"), "--kueue", "--kueue-perf"], check=True)
    return folder


def kueue_env(**extra: str) -> dict[str, str]:
    """The environment of Kueue's binaries: its test/util (linked into both) looks for the project's
    folder at start (PROJECT_DIR, as Kueue's Makefile sets it) and stops if it finds none."""
    return {**os.environ, "PROJECT_DIR": str(perf_dir()), **extra}


def proc_cpu_ms(pid: int) -> tuple[int, int]:
    """User and system CPU time of a process so far, in ms (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) * 1000 // tick, int(fields[12]) * 1000 // tick


# --- one run --------------------------------------------------------------------------------------


def runqueue_wait_s(pid: int) -> float:
    """Seconds the process's live threads have waited on a run queue for a CPU, summed (schedstat)."""
    total = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            total += int(stat.read_text().split()[1])
    return total / 1e9


def others_cpu_s(bed: Testbed, manager: int) -> dict[str, float]:
    """CPU seconds so far of the test-bed's API server and etcd (what the runner and the manager
    load), and how long their threads and the manager's waited for a CPU."""
    out: dict[str, float] = {}
    for component in ("kube-apiserver", "etcd"):
        pid = bed.pid(component)
        if pid is not None:
            user, system = proc_cpu_ms(pid)
            out[component] = (user + system) / 1000
            out[f"{component} waiting for a CPU"] = runqueue_wait_s(pid)
    out["manager waiting for a CPU"] = runqueue_wait_s(manager)
    return out


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def run_runner(args: argparse.Namespace, bed: Testbed, out: Path, pid: int) -> dict[str, Any]:
    """Kueue's runner to its end: its exit code and wall ms, the manager's user and system ms over
    it, and the CPU seconds over it of the runner, the API server and etcd."""
    folder = perf_dir()
    timeout = args.timeout or RUNNER_TIMEOUT[args.config]
    command = [
        str(folder / "bin" / "runner"),
        f"--o={out}",
        f"--generatorConfig={args.generator_path}",
        "--qps=1000",
        "--burst=2000",
        f"--timeout={timeout}",
    ]
    (out / "runner-command.txt").write_text(" ".join(command) + "\n")
    env = kueue_env(KUBECONFIG=str(bed.kubeconfig))
    user0, sys0 = proc_cpu_ms(pid)
    others0, children0 = others_cpu_s(bed, pid), children_cpu_s()
    began = time.monotonic()
    with (out / "runner.log").open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            *command, stdout=log, stderr=subprocess.STDOUT, env=env
        )
        stopped = False
        try:
            code = await asyncio.wait_for(asyncio.shield(process.wait()), args.stop_after)
        except TimeoutError:  # the runner writes what it recorded on SIGINT, as at its end
            process.send_signal(signal.SIGINT)
            code, stopped = await process.wait(), True
    wall_ms = int((time.monotonic() - began) * 1000)
    user1, sys1 = proc_cpu_ms(pid)
    # the runner is the one child reaped meanwhile: the children's CPU grew by its own
    cpu = {"runner": children_cpu_s() - children0}
    cpu.update({k: v - others0.get(k, 0.0) for k, v in others_cpu_s(bed, pid).items()})
    measured = {"code": code, "wall_ms": wall_ms, "user_ms": user1 - user0, "sys_ms": sys1 - sys0}
    return {**measured, "cpu_s": cpu, "stopped": stopped}


async def on_testbed(args: argparse.Namespace, bed: Testbed, manager_name: str, out: Path) -> Run:
    controller, settings = MANAGERS[manager_name]
    async with KubeClient.from_kubeconfig(bed.kubeconfig, request_timeout=60) as kube:
        await install_crds(kube, "kueue")
    (out / "logs").mkdir(parents=True, exist_ok=True)
    manager = await start_manager(
        controller, bed, out / "logs", AGENT, settings, wait_for_pods_ready=args.wait_for_pods_ready == "on"
    )
    try:
        print(
            f"== {manager.name} ready (pid {manager.pid}); running Kueue's runner ({args.config})", flush=True
        )
        measured = await run_runner(args, bed, out, manager.pid)
        rss_kib = vm_hwm_kib(manager.pid)
    finally:
        await asyncio.to_thread(manager.stop)
    code, wall_ms, user_ms, sys_ms = (measured[k] for k in ("code", "wall_ms", "user_ms", "sys_ms"))
    stats = out / "manager.stats.yaml"
    stats.write_text(cmd_stats_yaml(wall_ms, user_ms, sys_ms, rss_kib))
    summary_path = out / "summary.yaml"
    summary = parse_summary(summary_path.read_text()) if summary_path.exists() else None
    states = out / "wlStates.csv"
    counts = workload_counts(states.read_text()) if states.exists() else None
    note = "" if code == 0 else f"runner exited {code} (see {out / 'runner.log'})"
    if measured["stopped"]:
        note = (
            f"stopped by --stop-after {args.stop_after:.0f} s: the summary is of what was recorded until then"
        )
    verdict = check(args, summary_path, stats, out) if summary is not None else Verdict(False, (note,))
    return Run(
        manager=manager_name,
        config=args.config,
        wall_ms=wall_ms,
        cpu_s=(user_ms + sys_ms) / 1000,
        rss_mib=rss_kib / 1024,
        summary=summary,
        counts=counts,
        verdict=verdict,
        note=note,
        extra={"cpu_s": {"manager": (user_ms + sys_ms) / 1000, **measured["cpu_s"]}},
    )


def check(args: argparse.Namespace, summary: Path, stats: Path, out: Path) -> Verdict:
    """Kueue's checker (its Go test, built with `go test -c`) on the summary and the stats."""
    folder = perf_dir()
    command = [
        str(folder / "bin" / "checker.test"),
        "-test.v",
        f"-summary={summary}",
        f"-cmdStats={stats}",
        f"-range={folder / 'configs' / args.config / 'rangespec.yaml'}",
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=kueue_env())
    (out / "checker.log").write_text(" ".join(command) + "\n" + done.stdout + done.stderr)
    return checker_verdict(done.stdout + done.stderr, done.returncode)


def one_run(args: argparse.Namespace, manager_name: str, out: Path) -> Run:
    out.mkdir(parents=True, exist_ok=True)
    bed = Testbed(run_dir=out / "testbed")
    bed.start()
    try:
        return asyncio.run(on_testbed(args, bed, manager_name, out))
    finally:
        bed.stop()


# --- reporting ------------------------------------------------------------------------------------


def machine_state() -> str:
    load = os.getloadavg()
    return f"{os.cpu_count()} CPUs, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}"


def run_lines(run: Run, expected: int) -> list[str]:
    verdict = "PASS" if run.verdict.passed else "FAIL"
    lines = [f"== {run.manager}: wall {run.wall_ms / 1000:.1f}s, checker {verdict}"]
    if run.counts is not None:
        c = run.counts
        means = ", ".join(f"{k} {n} ({ms / 1000:.1f} s)" for k, (n, ms) in c.admitted_means.items())
        lines.append(f"   admitted per class (mean time to admission of those): {means}")
        lines.append(
            f"   Workloads: {expected} created by the runner, {c.seen} seen, {c.admitted} admitted, "
            f"{c.finished} finished"
        )
    if run.summary is not None and run.summary.dropped_events:
        lines.append(f"   the recorder dropped {run.summary.dropped_events} Workload events")
    cpu = run.extra.get("cpu_s") or {}
    if cpu:
        parts = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in cpu.items())
        lines.append(f"   CPU used (and waited for) over the run ({run.wall_ms / 1000:.0f} s wall): {parts}")
    lines += [f"   checker: {failure}" for failure in run.verdict.failures]
    if run.note:
        lines.append(f"   {run.note}")
    return lines


def to_json(run: Run) -> dict[str, Any]:
    doc = asdict(run)
    return json.loads(json.dumps(doc, default=str))  # type: ignore[no-any-return]


# --- main -----------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.kueue_perf", description=__doc__.split("\n")[0])
    parser.add_argument("--config", choices=CONFIGS, default="baseline", help="Kueue's configs/<name>")
    parser.add_argument(
        "--managers", default="ours,kueue-tuned", help=f"comma-separated, of {', '.join(MANAGERS)}"
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs per manager, interleaved")
    parser.add_argument("--timeout", help="the runner's --timeout (default: 15m baseline, 30m large-scale)")
    parser.add_argument(
        "--stop-after",
        type=float,
        help="seconds after which the runner is sent SIGINT (it then writes the summary of what it "
        "recorded, where its own --timeout ends it without one); the run is marked as stopped",
    )
    parser.add_argument("--wait-for-pods-ready", choices=("on", "off"), default="on")
    parser.add_argument(
        "--cohorts",
        type=int,
        help="run the config with this many cohorts of each cohort set (the cohorts are alike and share "
        "no quota, so each cohort's shape, arrivals and Kueue's per-class limits stay; the load on the "
        "test-bed shrinks); default: the config's own count",
    )
    parser.add_argument("--out", type=Path, help="artifacts folder (default /tmp/kueue-perf-<time>)")
    parser.add_argument("--json", type=Path, help="also write every run's figures here")
    args = parser.parse_args(argv)
    args.manager_list = [m.strip() for m in args.managers.split(",") if m.strip()]
    unknown = [m for m in args.manager_list if m not in MANAGERS]
    if unknown or not args.manager_list:
        parser.error(f"--managers: unknown {unknown or '(none)'}; choose from {', '.join(MANAGERS)}")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    folder = ensure_built()
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or Path(f"/tmp/kueue-perf-{stamp}")
    generator = yaml.safe_load((folder / "configs" / args.config / "generator.yaml").read_text())
    args.generator_path = folder / "configs" / args.config / "generator.yaml"
    if args.cohorts is not None:
        generator = with_cohorts(generator, args.cohorts)
        out.mkdir(parents=True, exist_ok=True)
        args.generator_path = out / "generator.yaml"
        args.generator_path.write_text(yaml.safe_dump(generator, sort_keys=False))
        print(f"== --cohorts {args.cohorts}: each cohort set has {args.cohorts} ({args.generator_path})")
    args.generator = generator
    expected = expected_workloads(generator)
    limits = parse_range((folder / "configs" / args.config / "rangespec.yaml").read_text())
    print(
        f"== Kueue {kueue_version()} runner, config {args.config}: {expected} Workloads; artifacts in {out}"
    )
    runs: list[Run] = []
    for index in range(args.repeat):
        for name in args.manager_list:
            print(f"== run {index + 1}/{args.repeat}, {name}; machine: {machine_state()}", flush=True)
            run = one_run(args, name, out / f"{index + 1}-{name}")
            run.extra["machine_after"] = machine_state()
            runs.append(run)
            for line in run_lines(run, expected):
                print(line, flush=True)
            runner_log = out / f"{index + 1}-{name}" / "runner.log"
            for line in generation_lines(runner_log.read_text(errors="replace"), generator):
                print(f"   generation: {line}", flush=True)
    print(f"== Kueue's runner, {args.config}, waitForPodsReady {args.wait_for_pods_ready}: median (range)")
    for line in side_by_side(runs, limits, args.manager_list):
        print(line)
    if args.json:
        args.json.write_text(json.dumps([to_json(r) for r in runs], indent=2) + "\n")
    return 0 if all(r.verdict.passed for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
