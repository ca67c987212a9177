"""The fair-sharing part of the conformance snapshots (conformance/snapshot_fair.py) and the
scenario options of the upstream JobSet manager, without a test-bed."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

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


def test_a_jobsets_webhook_decided_fields_are_flat_with_the_workload_named_stably() -> None:
    from e2e.conformance.snapshot_jobset import jobset_fields

    jobset = {
        "metadata": {"name": "a", "labels": {"kueue.x-k8s.io/queue-name": "q", "app": "x"}},
        "spec": {
            "suspend": True,
            "successPolicy": {"operator": "All"},
            "replicatedJobs": [
                {
                    "name": "leader",
                    "template": {
                        "spec": {
                            "completionMode": "Indexed",
                            "template": {
                                "metadata": {"annotations": {"kueue.x-k8s.io/workload": "jobset-a-1f2e3"}},
                                "spec": {"restartPolicy": "OnFailure"},
                            },
                        }
                    },
                }
            ],
        },
    }
    flat = jobset_fields(jobset, {"jobset-a-1f2e3": "<workload of JobSet/a>"})
    assert flat["suspend"] is True
    assert flat["labels"] == {"kueue.x-k8s.io/queue-name": "q"}
    assert flat["successPolicy"] == {"operator": "All"}
    assert flat["network"] is None
    assert flat["replicatedJobs.leader.restartPolicy"] == "OnFailure"
    assert flat["replicatedJobs.leader.podAnnotations"] == {}
    assert flat["replicatedJobs.leader.workloadAnnotation"] == "<workload of JobSet/a>"


def test_every_jobset_scenario_uses_the_jobset_snapshot() -> None:
    for name in ("jobset-two-replicated-jobs", "jobset-pods-ready-timeout", "jobset-child-jobs"):
        assert recording.JOBSET_SNAPSHOT_CODE in recording.snapshot_code(all_scenarios()[name]), name
    assert recording.JOBSET_SNAPSHOT_CODE not in recording.snapshot_code(all_scenarios()["walkthrough"])


def test_a_read_only_jobset_manager_impersonates_a_user_allowed_only_to_read(tmp_path: Path) -> None:
    from e2e.support.jobset import read_only_access, read_only_kubeconfig

    admin = tmp_path / "admin.kubeconfig"
    admin.write_text(
        "users:\n- name: admin\n  user: {client-certificate: /c, client-key: /k}\n"
        "contexts: []\nclusters: []\n"
    )
    out = read_only_kubeconfig(admin, tmp_path / "ro" / "kubeconfig", "reader")
    user = yaml.safe_load(out.read_text())["users"][0]["user"]
    assert user == {"client-certificate": "/c", "client-key": "/k", "as": "reader"}
    role, binding = read_only_access("reader")
    assert {verb for rule in role["rules"] for verb in rule["verbs"]} == {"get", "list", "watch"}
    assert binding["subjects"][0]["name"] == "reader"
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
