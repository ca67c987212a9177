"""Every conformance scenario: the controller on a fresh test-bed, compared field by field with
real Kueue v0.18.1's recorded result (e2e/conformance/recorded/<scenario>.yaml).

A difference fails the test unless e2e/conformance/intentional-differences.yaml lists it with
its reason. Where Kueue's own result varied between recorded runs, the controller must match
one of them. A recording made before its scenario, a file the scenario uses, the snapshot code
or a pinned version changed is stale: the test fails before starting anything, naming the
command that records it again (`python -m e2e.conformance --record SCENARIO`, which runs real
Kueue). The live side-by-side run is `python -m e2e.conformance SCENARIO`."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from e2e.conformance.__main__ import replay_scenario
from e2e.conformance.compare import load_intentional, unexplained
from e2e.conformance.recording import StaleRecordingError
from e2e.conformance.scenario import all_scenarios

SCENARIOS = all_scenarios()
pytestmark = pytest.mark.testbed


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_matches_kueue(name: str) -> None:
    # A short run root: the node simulator's unix sockets live under it (<= 105 bytes).
    run_root = Path(tempfile.mkdtemp(prefix="conf-", dir="/tmp"))
    try:
        diffs = replay_scenario(name, SCENARIOS[name], run_root)
    except StaleRecordingError as stale:
        shutil.rmtree(run_root, ignore_errors=True)
        pytest.fail(str(stale), pytrace=False)
    bad = unexplained(diffs, load_intentional())
    where = f"\n(logs of the controller's run: {run_root}/*/logs)"
    assert not bad, (
        f"{name} differs from Kueue v0.18.1's recording:\n" + "\n".join(str(d) for d in bad) + where
    )
    shutil.rmtree(run_root, ignore_errors=True)  # kept when it differs, for its logs
