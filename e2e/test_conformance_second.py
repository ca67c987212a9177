"""The other half of the conformance scenarios (see e2e/test_conformance.py)."""

from __future__ import annotations

import pytest

from e2e.conformance.check import check_scenario, half

pytestmark = pytest.mark.testbed


@pytest.mark.parametrize("name", half(1))
def test_scenario_matches_kueue(name: str) -> None:
    check_scenario(name)
