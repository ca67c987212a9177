"""The fair-sharing part of the conformance snapshots (conformance/snapshot_fair.py) and the
scenario options of the upstream JobSet manager, without a test-bed."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.conformance import recording
from e2e.conformance.scenario import all_scenarios, load_scenario
from e2e.conformance.snapshot_fair import enables_fair_sharing, weighted_share

FAIR = [
    "fair-sharing-preemption",
    "fair-sharing-preemption-final",
    "fair-sharing-preemption-initial",
    "fair-sharing-weights",
    "hierarchical-fair-sharing-weights",
]


def test_fair_sharing_is_read_from_the_configuration(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    for text, expected in [
        ("fairSharing:\n  preemptionStrategies: [LessThanInitialShare]\n", True),
        ("fairSharing:\n  enable: true\n", True),
        ("fairSharing:\n  enable: false\n", False),
        ("admissionFairSharing:\n  usageHalfLifeTime: 10s\n", False),
        ("{}\n", False),
    ]:
        config.write_text(text)
        assert enables_fair_sharing(config) is expected, text


def test_the_weighted_share_is_read_or_none() -> None:
    assert weighted_share({"status": {"fairSharing": {"weightedShare": 250}}}) == 250
    assert weighted_share({"status": {}}) is None
    assert weighted_share({}) is None


def test_the_fair_snapshot_code_is_in_the_hash_of_fair_sharing_scenarios_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenarios = all_scenarios()
    fair = [n for n, p in scenarios.items() if enables_fair_sharing(load_scenario(p).configuration)]
    assert sorted(fair) == FAIR
    code = tmp_path / "snapshot_fair.py"
    code.write_text("# one\n")
    monkeypatch.setattr(recording, "FAIR_SNAPSHOT_CODE", code)
    pins = recording.read_pins()
    names = ("fair-sharing-weights", "walkthrough", "admission-fair-sharing")
    before = {n: recording.inputs_hash(scenarios[n], pins) for n in names}
    code.write_text("# two\n")
    assert recording.inputs_hash(scenarios["fair-sharing-weights"], pins) != before["fair-sharing-weights"]
    assert recording.inputs_hash(scenarios["walkthrough"], pins) == before["walkthrough"]
    assert (
        recording.inputs_hash(scenarios["admission-fair-sharing"], pins) == before["admission-fair-sharing"]
    )


def test_the_jobset_controller_option_is_a_boolean(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    body = "configuration: examples/walkthrough/00-configuration.yaml\nnamespaces: [n]\nsteps: []\n"
    scenario.write_text(body)
    assert load_scenario(scenario).jobset_controller is False
    scenario.write_text(body + "jobsetController: yes-please\n")
    with pytest.raises(ValueError, match="jobsetController must be true or false"):
        load_scenario(scenario)
    assert load_scenario(all_scenarios()["jobset-child-jobs"]).jobset_controller is True


def test_a_jobset_jobs_indexed_pod_names_are_made_stable_in_events() -> None:
    from e2e.conformance.snapshot_jobset import indexed_pods_named

    flat = {
        "Job[ns/train-a-leader-0].suspend": False,
        "Job[ns/train-a-leader-0-x].suspend": False,
        "Events": [
            "Job[train-a-leader-0] Normal SuccessfulCreate: Created pod: train-a-leader-0-0-wsmqg",
            "Job[train-a-leader-0-x] Normal SuccessfulCreate: Created pod: train-a-leader-0-x-1-ab3de",
        ],
    }
    assert indexed_pods_named(flat)["Events"] == [
        "Job[train-a-leader-0-x] Normal SuccessfulCreate: Created pod: <pod of train-a-leader-0-x>",
        "Job[train-a-leader-0] Normal SuccessfulCreate: Created pod: <pod of train-a-leader-0>",
    ]
