"""The conformance runner's pure parts (no Kueue, no test-bed): scenario files, snapshot
normalization, comparison, intentional differences, Kueue's derived configuration and webhook
registration, and Kueue's recorded results: every scenario has a recording made from its
current inputs, and one changed after its recording is refused with the command to record it
again. Recording runs real Kueue (`python -m e2e.conformance --record`, see e2e/README.md);
Kueue's build is not part of CI's set-up."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.conformance.compare import (
    Difference,
    Intentional,
    closest_result,
    compare,
    load_intentional,
    unexplained,
)
from e2e.conformance.kueue import kueue_configuration, webhook_configurations
from e2e.conformance.recording import (
    Recording,
    StaleRecordingError,
    fresh_recording,
    inputs_hash,
    load_recording,
    read_pins,
    recording_path,
    upstream_pins,
)
from e2e.conformance.runner import _steps, _webhook_groups, our_webhooks
from e2e.conformance.scenario import all_scenarios, load_scenario
from e2e.conformance.snapshot import Normalizer
from e2e.support.deploy import ROOT
from e2e.testbed import ApiError


def test_every_checked_in_scenario_loads_and_has_a_checkpoint() -> None:
    scenarios = all_scenarios()
    assert "walkthrough" in scenarios
    for path in scenarios.values():
        scenario = load_scenario(path)
        assert scenario.configuration.is_file()
        assert any(step.checkpoint for step in scenario.steps), path.name


def test_the_readme_names_every_checked_in_scenario_and_counts_them() -> None:
    """e2e/README.md's "Checked in (N): ..." list is every scenario of the directory, N of them."""
    text = (ROOT / "e2e" / "README.md").read_text()
    start = text.index("Checked in (")
    listed = text[start : text.index("**What is compared**", start)]
    count = int(listed[len("Checked in (") : listed.index(")")])
    scenarios = all_scenarios()
    assert sorted(n for n in scenarios if f"`{n}`" not in listed) == []
    assert count == len(scenarios)


def test_a_step_with_two_actions_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump(
            {
                "configuration": "examples/walkthrough/00-configuration.yaml",
                "namespaces": ["x"],
                "steps": [{"sleep": 1, "checkpoint": "c"}],
            }
        )
    )
    with pytest.raises(ValueError, match="exactly one"):
        load_scenario(bad)


def test_messages_are_normalized_across_runs() -> None:
    workloads = [{"metadata": {"name": "job-a-7e936", "ownerReferences": [{"kind": "Job", "name": "a"}]}}]
    norm = Normalizer(workloads, [{"metadata": {"name": "a"}}])
    text = norm.text(
        "Preempted to accommodate job-a-7e936 (UID: 0f8fad5b-d9cb-469f-a165-70867728950e);"
        " Created pod: a-jm75x; wait time since queued was 31s"
    )
    assert text == (
        "Preempted to accommodate <workload of Job/a> (UID: <uid>); Created pod: <pod of a>;"
        " wait time since queued was <duration>"
    )


def test_a_generated_name_ending_like_a_duration_is_left_to_the_renames() -> None:
    """A pod's random suffix can read as a duration (`-5794s`); replacing it made a Deployment's
    Workload name differ between two runs of a scenario."""
    norm = Normalizer([], [])
    text = norm.text("Created Workload: demo/pod-infer-746d4484fd-5794s-1a2b3 after 5794s (12ms)")
    assert text == "Created Workload: demo/pod-infer-746d4484fd-5794s-1a2b3 after <duration> (<duration>)"


def test_compare_names_each_differing_field_and_event() -> None:
    kueue = {"Job[ns/a].suspend": False, "Events": ["Job[a] Normal Started: x"]}
    ours = {"Job[ns/a].suspend": True, "Events": ["Workload[a] Normal Started: x"]}
    diffs = compare("s", "c", kueue, ours)
    assert [d.field for d in diffs] == [
        "Events: Job[a] Normal Started: x",
        "Events: Workload[a] Normal Started: x",
        "Job[ns/a].suspend",
    ]
    assert compare("s", "c", kueue, kueue) == []


def test_intentional_differences_cover_by_glob_and_need_a_reason(tmp_path: Path) -> None:
    diff = Difference("walkthrough", "c", "Events: Job[a] x", "present", "absent")
    listed = Intentional("walk*", "c: Events: *", "reason")
    assert unexplained([diff], [listed]) == []
    assert unexplained([diff], [Intentional("other", "*", "reason")]) == [diff]
    # brackets in a field are literal: a pattern names the object as printed
    assert unexplained([diff], [Intentional("*", "c: Events: Job[a] ?", "reason")]) == []
    assert unexplained([diff], [Intentional("*", "c: Events: Job[b] ?", "reason")]) == [diff]
    no_reason = tmp_path / "d.yaml"
    no_reason.write_text(yaml.safe_dump([{"scenario": "*", "field": "*", "reason": " "}]))
    with pytest.raises(ValueError, match="no reason"):
        load_intentional(no_reason)
    load_intentional()  # the checked-in file parses


def test_kueue_runs_out_of_cluster_with_the_scenario_configuration() -> None:
    base = yaml.safe_load((ROOT / "examples/walkthrough/00-configuration.yaml").read_text())
    config = kueue_configuration(base, metrics=1, health=2, webhook=3, cert_dir=Path("/c"))
    assert config["resources"] == base["resources"]
    assert config["integrations"] == base["integrations"]
    assert config["internalCertManagement"] == {"enable": False}
    assert config["featureGates"] == {"VisibilityOnDemand": False}
    assert config["webhook"] == {"host": "127.0.0.1", "port": 3, "certDir": "/c"}
    assert config["metrics"]["bindAddress"] == "127.0.0.1:1"
    assert config["health"]["healthProbeBindAddress"] == "127.0.0.1:2"


def test_only_job_and_kueue_webhooks_are_registered_by_url(tmp_path: Path) -> None:
    def hook(name: str, group: str, path: str) -> dict[str, object]:
        return {
            "name": name,
            "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": path}},
            "rules": [{"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE"]}],
        }

    manifests = tmp_path / "manifests.yaml"
    manifests.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": "mutating-webhook-configuration"},
                "webhooks": [
                    hook("mjob.kb.io", "batch", "/mutate-batch-v1-job"),
                    hook("mpod.kb.io", "", "/mutate--v1-pod"),
                ],
            }
        )
    )
    [config] = webhook_configurations(manifests, 9443, b"CA")
    assert config["metadata"]["name"] == "kueue-mutating-webhook-configuration"
    assert [h["name"] for h in config["webhooks"]] == ["mjob.kb.io"]
    assert config["webhooks"][0]["clientConfig"] == {
        "url": "https://127.0.0.1:9443/mutate-batch-v1-job",
        "caBundle": base64.b64encode(b"CA").decode(),
    }


def test_every_scenario_has_a_recording_of_its_current_inputs() -> None:
    """CI compares with recordings, so each must be there and fresh (else: the command)."""
    for name, path in all_scenarios().items():
        recording = fresh_recording(load_scenario(path), path)
        assert recording.scenario == name
        assert recording.pins == read_pins()
        assert recording.results, name
        assert all(r.checkpoints for r in recording.results), name


def test_a_scenario_changed_after_its_recording_fails_naming_the_command(tmp_path: Path) -> None:
    original = all_scenarios()["walkthrough"]
    changed = tmp_path / "walkthrough.yaml"  # same name, so the checked-in recording is the one read
    raw = yaml.safe_load(original.read_text())
    raw["steps"].insert(-1, {"sleep": 1})
    changed.write_text(yaml.safe_dump(raw))
    fresh_recording(load_scenario(original), original)  # the unchanged one is fresh
    with pytest.raises(
        StaleRecordingError,
        match=r"record it again with: \.venv/bin/python -m e2e\.conformance --record walkthrough$",
    ):
        fresh_recording(load_scenario(changed), changed)


def test_a_missing_recording_fails_naming_the_command(tmp_path: Path) -> None:
    path = all_scenarios()["walkthrough"]
    with pytest.raises(
        StaleRecordingError,
        match=r"no recording .*run: \.venv/bin/python -m e2e\.conformance --record walkthrough$",
    ):
        fresh_recording(load_scenario(path), path, directory=tmp_path)


def test_the_inputs_hash_covers_manifests_and_the_pinned_kueue(tmp_path: Path) -> None:
    manifest = tmp_path / "queues.yaml"
    manifest.write_text("kind: ConfigMap\n")
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        yaml.safe_dump(
            {
                "configuration": "e2e/conformance/manifests/configuration.yaml",
                "namespaces": ["x"],
                "steps": [{"apply": str(manifest)}, {"checkpoint": "c"}],
            }
        )
    )
    pins = read_pins()
    before = inputs_hash(scenario, pins)
    assert inputs_hash(scenario, pins) == before
    assert inputs_hash(scenario, {**pins, "KUEUE_VERSION": "v0.18.2"}) != before
    manifest.write_text("kind: Secret\n")
    assert inputs_hash(scenario, pins) != before


def test_a_recording_keeps_every_distinct_result_and_ours_matches_any(tmp_path: Path) -> None:
    one = {"c": {"Job[ns/a].suspend": False, "Events": []}}
    other = {"c": {"Job[ns/a].suspend": True, "Events": []}}
    recording = Recording("s", "sha256:x", {"KUEUE_VERSION": "v0"})
    for result in (one, other, one):
        recording.add(result)
    assert [(r.runs, r.checkpoints) for r in recording.results] == [(2, one), (1, other)]
    path = recording_path("s", tmp_path)
    path.write_text(recording.to_yaml())
    loaded = load_recording(path)
    assert loaded == recording
    assert "2 distinct results in 3 runs" in path.read_text()
    results = [r.checkpoints for r in loaded.results]
    assert closest_result("s", results, other, []) == (1, [])
    index, diffs = closest_result("s", results, {"c": {"Job[ns/a].suspend": None, "Events": []}}, [])
    assert index == 0
    assert [d.field for d in diffs] == ["Job[ns/a].suspend"]


def test_record_runs_must_be_a_positive_whole_number(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump(
            {
                "configuration": "examples/walkthrough/00-configuration.yaml",
                "namespaces": ["x"],
                "recordRuns": 0,
                "steps": [{"checkpoint": "c"}],
            }
        )
    )
    with pytest.raises(ValueError, match="recordRuns must be a whole number >= 1"):
        load_scenario(bad)


def test_the_controllers_webhooks_are_registered_by_url_for_the_groups_kueues_are() -> None:
    """The same API groups on both sides (batch, kueue.x-k8s.io, and jobset.x-k8s.io where the
    scenario enables the jobset framework, as for Kueue)."""
    configurations = our_webhooks(9443, b"CA")
    names = [h["name"] for c in configurations for h in c["webhooks"]]
    assert {"mjob.kb.io", "vjob.kb.io", "vworkload.kb.io", "vclusterqueue.kb.io"} <= set(names)
    assert not [n for n in names if "jobset" in n]
    scenarios = all_scenarios()
    jobsets = ["jobset-two-replicated-jobs", "jobset-pods-ready-timeout", "jobset-child-jobs"]
    jobsets.append("trainjob-gpu-pool")
    for name in jobsets:
        groups = _webhook_groups(load_scenario(scenarios[name]))
        assert "jobset.x-k8s.io" in groups, name
        names = [h["name"] for c in our_webhooks(9443, b"CA", groups) for h in c["webhooks"]]
        assert {"mjobset.kb.io", "vjobset.kb.io"} <= set(names), name
    assert "jobset.x-k8s.io" not in _webhook_groups(load_scenario(scenarios["walkthrough"]))
    for configuration in configurations:
        for hook in configuration["webhooks"]:
            assert hook["clientConfig"]["url"].startswith("https://127.0.0.1:9443/")
            assert hook["clientConfig"]["caBundle"] == base64.b64encode(b"CA").decode()


def _rejecting_scenario(tmp_path: Path) -> Path:
    (tmp_path / "refused.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: refused, namespace: x}\n---\n"
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: taken}\n"
    )
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        yaml.safe_dump(
            {
                "configuration": "e2e/conformance/manifests/configuration.yaml",
                "namespaces": ["x"],
                "steps": [
                    {"expect_rejected": str(tmp_path / "refused.yaml")},
                    {"checkpoint": "first"},
                    {"checkpoint": "second"},
                ],
            }
        )
    )
    return scenario


class _RefusingApi:
    """Discovery and empty lists; ConfigMaps refused as a webhook refuses, the rest stored."""

    async def get(self, path: str) -> dict[str, Any]:
        if path == "/api/v1":
            return {
                "resources": [
                    {"kind": "ConfigMap", "name": "configmaps", "namespaced": True},
                    {"kind": "Namespace", "name": "namespaces", "namespaced": False},
                ]
            }
        return {"items": []}

    async def apply(self, path: str, obj: dict[str, Any], manager: str) -> dict[str, Any]:
        if obj["kind"] == "ConfigMap":
            body = {"reason": "Forbidden", "message": 'admission webhook "v.kb.io" denied the request: no'}
            raise ApiError(403, body, "PATCH", path)
        return obj


@pytest.mark.asyncio
async def test_an_expected_rejection_is_compared_at_the_next_checkpoint(tmp_path: Path) -> None:
    scenario = load_scenario(_rejecting_scenario(tmp_path))
    assert scenario.steps[0].expect_rejected == (tmp_path / "refused.yaml",)
    snapshots = await _steps(_RefusingApi(), scenario)  # type: ignore[arg-type]
    assert snapshots["first"]["Rejected[ConfigMap/x/refused]"] == (
        'HTTP 403 Forbidden: admission webhook "v.kb.io" denied the request: no'
    )
    assert snapshots["first"]["Rejected[Namespace/taken]"] == "accepted"
    assert not [k for k in snapshots["second"] if k.startswith("Rejected")]


def test_the_inputs_hash_covers_the_files_expected_to_be_rejected(tmp_path: Path) -> None:
    scenario = _rejecting_scenario(tmp_path)
    pins = read_pins()
    before = inputs_hash(scenario, pins)
    (tmp_path / "refused.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\n")
    assert inputs_hash(scenario, pins) != before


def test_the_jobset_version_pins_only_the_scenarios_that_run_jobsets_manager(tmp_path: Path) -> None:
    """A new JobSet version makes the recordings of the scenarios running its manager stale, and
    no other (their inputs hash covers it)."""
    versions = tmp_path / "versions.env"
    versions.write_text("# a comment\nJOBSET_VERSION=v9.9.9\nKUEUE_VERSION=v0.18.1\n")
    scenarios = ROOT / "e2e" / "conformance" / "scenarios"
    assert upstream_pins(scenarios / "jobset-child-jobs.yaml", versions) == {"JOBSET_VERSION": "v9.9.9"}
    # Its webhooks only (a read-only manager): pinned too.
    pinned = upstream_pins(scenarios / "jobset-two-replicated-jobs.yaml", versions)
    assert pinned == {"JOBSET_VERSION": "v9.9.9"}
    assert upstream_pins(scenarios / "walkthrough.yaml", versions) == {}
