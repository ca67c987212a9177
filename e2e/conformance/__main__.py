"""`python -m e2e.conformance [--record | --replay] [--stale] [SCENARIO...]`.

Without a mode, each scenario runs with real Kueue and with the controller side by side
(both live). `--record` runs only real Kueue (built first where missing: e2e/build-binaries.sh
--kueue), `recordRuns` times per scenario, and writes recorded/<scenario>.yaml.
`--replay` runs only the controller and compares it with the recording, as CI does.
`--stale` picks the scenarios whose recording is missing or stale (alone: lists them, exit 1
when there is one; `--record --stale` records exactly those).

Prints `SCENARIO: same` or `SCENARIO: differs` with the differing fields, and exits 1 when
a difference is not listed in intentional-differences.yaml (or a run fails).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from e2e.conformance.compare import Difference, closest_result, compare_runs, load_intentional, unexplained
from e2e.conformance.kueue import kueue_build
from e2e.conformance.recording import (
    Recording,
    StaleRecordingError,
    fresh_recording,
    inputs_hash,
    load_recording,
    read_pins,
    record_command,
    recording_path,
)
from e2e.conformance.runner import run
from e2e.conformance.scenario import all_scenarios, load_scenario
from e2e.testbed.paths import BUILD_SCRIPT, cache_dir


def _short(name: str) -> str:
    return name[:16]  # the node simulator's unix sockets live under the run folder (<= 105 bytes)


def run_scenario(name: str, path: Path, run_root: Path) -> list[Difference]:
    """Live, side by side: Kueue and the controller, each on a fresh test-bed."""
    scenario = load_scenario(path)
    kueue = run(scenario, "kueue", run_root / f"{_short(name)}-kueue")
    ours = run(scenario, "ours", run_root / f"{_short(name)}-ours")
    return compare_runs(name, kueue, ours)


def replay_scenario(name: str, path: Path, run_root: Path) -> list[Difference]:
    """The controller on a fresh test-bed, compared with Kueue's recorded result it matches best.

    Raises StaleRecordingError (naming the command to record it) before starting anything."""
    scenario = load_scenario(path)
    recording = fresh_recording(scenario, path)
    ours = run(scenario, "ours", run_root / f"{_short(name)}-ours")
    results = [r.checkpoints for r in recording.results]
    _, diffs = closest_result(name, results, ours, load_intentional())
    return diffs


def record_scenario(name: str, path: Path, run_root: Path, runs: int | None = None) -> Recording:
    """Real Kueue, `runs` (default: the scenario's recordRuns) times; writes the recording."""
    if kueue_build().missing():
        subprocess.run(["bash", str(BUILD_SCRIPT), "--kueue"], check=True, stdout=subprocess.DEVNULL)
    scenario = load_scenario(path)
    now = inputs_hash(path)
    target = recording_path(name)
    recording = load_recording(target) if target.is_file() else None
    if recording is None or recording.inputs != now:
        recording = Recording(name, now, read_pins())
    for attempt in range(runs or scenario.record_runs):
        print(f"{name}: recording Kueue's run {attempt + 1}/{runs or scenario.record_runs}", flush=True)
        recording.add(run(scenario, "kueue", run_root / f"{_short(name)}-kueue"))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(recording.to_yaml())
    return recording


def _is_stale(name: str, path: Path) -> bool:
    try:
        fresh_recording(load_scenario(path), path)
    except StaleRecordingError:
        return True
    return False


def _report(name: str, diffs: list[Difference]) -> bool:
    """Prints the outcome; True when a difference is unexplained."""
    if not diffs:
        print(f"{name}: same", flush=True)
        return False
    bad = unexplained(diffs, load_intentional())
    print(f"{name}: differs ({len(bad)} unexplained, {len(diffs) - len(bad)} intentional)", flush=True)
    for diff in diffs:
        print(f"{'  ' if diff in bad else '  (intentional) '}{diff}", flush=True)
    return bool(bad)


def _one(args: argparse.Namespace, name: str, path: Path) -> bool:
    """Runs one scenario in the chosen mode; True when it failed."""
    if args.record:
        recording = record_scenario(name, path, args.run_dir, args.runs)
        kinds = len(recording.results)
        print(
            f"{name}: recorded ({recording.runs} runs, {kinds} distinct result(s)) in {recording_path(name)}"
        )
        return False
    if args.replay:
        return _report(name, replay_scenario(name, path, args.run_dir))
    return _report(name, run_scenario(name, path, args.run_dir))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.conformance", description=__doc__)
    parser.add_argument("scenarios", nargs="*", help="scenario names (default: all)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--record", action="store_true", help="run real Kueue and write its recordings")
    mode.add_argument("--replay", action="store_true", help="the controller against the recordings (CI)")
    parser.add_argument(
        "--stale", action="store_true", help="only scenarios whose recording is missing or stale"
    )
    parser.add_argument(
        "--runs", type=int, default=None, help="with --record: runs of Kueue (default recordRuns)"
    )
    parser.add_argument("--run-dir", type=Path, default=cache_dir() / "conformance")
    args = parser.parse_args(argv)
    known = all_scenarios()
    names = args.scenarios or list(known)
    unknown = [n for n in names if n not in known]
    if unknown:
        print(f"unknown scenario(s): {', '.join(unknown)}; known: {', '.join(known)}", file=sys.stderr)
        return 2
    if args.stale:
        names = [n for n in names if _is_stale(n, known[n])]
        if not args.record and not args.replay:
            for name in names:
                print(f"{name}: recording missing or stale; run: {record_command(name)}")
            return 1 if names else 0
    failed = False
    for name in names:
        began = time.monotonic()
        try:
            failed = _one(args, name, known[name]) or failed
        except Exception as err:  # a runner: say which scenario failed and go on
            print(f"{name}: failed: {err}", flush=True)
            failed = True
        print(f"{name}: {time.monotonic() - began:.0f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
