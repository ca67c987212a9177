"""`python -m e2e.conformance [SCENARIO...]`: each scenario with Kueue and with the controller.

Prints `SCENARIO: same` or `SCENARIO: differs` with the differing fields, and exits 1 when
a difference is not listed in intentional-differences.yaml (or a run fails).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from e2e.conformance.compare import Difference, compare, load_intentional, unexplained
from e2e.conformance.runner import run
from e2e.conformance.scenario import all_scenarios, load_scenario
from e2e.testbed.paths import cache_dir


def run_scenario(name: str, path: Path, run_root: Path) -> list[Difference]:
    scenario = load_scenario(path)
    short = name[:16]  # the node simulator's unix sockets live under the run folder (<= 105 bytes)
    kueue = run(scenario, "kueue", run_root / f"{short}-kueue")
    ours = run(scenario, "ours", run_root / f"{short}-ours")
    diffs: list[Difference] = []
    for checkpoint in dict.fromkeys([*kueue, *ours]):
        diffs += compare(name, checkpoint, kueue.get(checkpoint, {}), ours.get(checkpoint, {}))
    return diffs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.conformance", description=__doc__)
    parser.add_argument("scenarios", nargs="*", help="scenario names (default: all)")
    parser.add_argument("--run-dir", type=Path, default=cache_dir() / "conformance")
    args = parser.parse_args(argv)
    known = all_scenarios()
    names = args.scenarios or list(known)
    unknown = [n for n in names if n not in known]
    if unknown:
        print(f"unknown scenario(s): {', '.join(unknown)}; known: {', '.join(known)}", file=sys.stderr)
        return 2
    intentional = load_intentional()
    failed = False
    for name in names:
        try:
            diffs = run_scenario(name, known[name], args.run_dir)
        except Exception as err:  # a runner: say which scenario failed and go on
            print(f"{name}: failed: {err}", flush=True)
            failed = True
            continue
        if not diffs:
            print(f"{name}: same", flush=True)
            continue
        bad = unexplained(diffs, intentional)
        failed = failed or bool(bad)
        print(f"{name}: differs ({len(bad)} unexplained, {len(diffs) - len(bad)} intentional)", flush=True)
        for diff in diffs:
            mark = "  " if diff in bad else "  (intentional) "
            print(f"{mark}{diff}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
