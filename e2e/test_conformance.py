"""Every conformance scenario: the controller on a fresh test-bed, compared field by field with
real Kueue v0.18.1's recorded result (e2e/conformance/recorded/<scenario>.yaml). This file runs
one half of them, e2e/test_conformance_second.py the other (two files: parallel workers).

A difference fails the test unless e2e/conformance/intentional-differences.yaml lists it with
its reason. Where Kueue's own result varied between recorded runs, the controller must match
one of them. A recording made before its scenario, a file the scenario uses, the snapshot code
or a pinned version changed is stale: the test fails before starting anything, naming the
command that records it again (`python -m e2e.conformance --record SCENARIO`, which runs real
Kueue). The live side-by-side run is `python -m e2e.conformance SCENARIO`."""

from __future__ import annotations

import pytest

from e2e.conformance.check import check_scenario, half

pytestmark = pytest.mark.testbed


@pytest.mark.parametrize("name", half(0))
def test_scenario_matches_kueue(name: str) -> None:
    check_scenario(name)
