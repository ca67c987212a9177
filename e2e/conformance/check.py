"""The conformance check of one scenario, shared by the two halves of the scenarios that the test
command runs as two files on parallel workers (e2e/test_conformance.py, e2e/test_conformance_second.py):
the controller on a fresh test-bed, compared field by field with real Kueue v0.18.1's recording."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from e2e.conformance.__main__ import replay_scenario
from e2e.conformance.compare import load_intentional, unexplained
from e2e.conformance.recording import StaleRecordingError
from e2e.conformance.scenario import all_scenarios

__all__ = ["SCENARIOS", "check_scenario", "half"]

SCENARIOS = all_scenarios()


def half(which: int) -> list[str]:
    """The scenarios of one half (0 or 1): every other one in name order."""
    return sorted(SCENARIOS)[which::2]


def check_scenario(name: str) -> None:
    """Replay `name` with the controller and fail on any difference from Kueue's recording that
    e2e/conformance/intentional-differences.yaml does not list."""
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
