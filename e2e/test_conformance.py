"""Every conformance scenario, run with real Kueue v0.18.1 and with the controller on fresh
test-beds, compared field by field (`python -m e2e.conformance` does the same by hand).

A difference fails the test unless e2e/conformance/intentional-differences.yaml lists it with
its reason. Kueue's manager is built by `e2e/build-binaries.sh --kueue`, which the test
command's set-up runs (`e2e/test.sh` -> `e2e/setup.sh --kueue`)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from e2e.conformance.__main__ import run_scenario
from e2e.conformance.compare import load_intentional, unexplained
from e2e.conformance.scenario import all_scenarios

SCENARIOS = all_scenarios()


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_matches_kueue(name: str) -> None:
    # A short run root: the node simulator's unix sockets live under it (<= 105 bytes).
    run_root = Path(tempfile.mkdtemp(prefix="conf-", dir="/tmp"))
    diffs = run_scenario(name, SCENARIOS[name], run_root)
    bad = unexplained(diffs, load_intentional())
    where = f"\n(logs of both runs: {run_root}/*/logs)"
    assert not bad, f"{name} differs from Kueue v0.18.1:\n" + "\n".join(str(d) for d in bad) + where
    shutil.rmtree(run_root, ignore_errors=True)  # kept when it differs, for its logs
