"""Kueue's recorded results: what real Kueue showed at each checkpoint of a scenario.

One file per scenario, `recorded/<scenario>.yaml`, written by
`python -m e2e.conformance --record SCENARIO` (which runs real Kueue) and committed. CI runs
only this controller and compares it with the recording (`e2e/test_conformance.py`).

A recording holds a hash of everything that decides Kueue's result: the scenario file, every
file it applies, deletes or starts the test-bed with, its Kueue configuration, the pinned
Kueue and Kubernetes versions (e2e/versions.env) and the snapshot's normalization
(snapshot.py, and snapshot_pods.py for the scenarios that enable the pod framework only,
snapshot_fair.py for those with cohort fair sharing only, so the others' recordings do not
depend on them). When any of them changed after the recording,
the recording is stale and the check fails, naming the command that records it again.

Where Kueue's own result varies from run to run, a recording keeps every distinct result
seen (`results`, each with how many runs showed it); this controller's run must match one
of them. Recording again with unchanged inputs adds to what was seen; with changed inputs it
starts over.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from e2e.conformance.scenario import Scenario, load_scenario
from e2e.conformance.snapshot_fair import enables_fair_sharing
from e2e.conformance.snapshot_pods import enables_pods
from e2e.conformance.snapshot_serving import enables_serving
from e2e.support.deploy import ROOT
from e2e.support.jobset import enables_jobset
from e2e.support.kubeflow import enables_kubeflow
from e2e.testbed.paths import VERSIONS_FILE

RECORDED_DIR = Path(__file__).resolve().parent / "recorded"
SNAPSHOT_CODE = Path(__file__).resolve().parent / "snapshot.py"
# The pod framework's part of a snapshot: in the hash of the scenarios that enable `pod` only,
# so adding or changing it leaves the other scenarios' recordings fresh.
POD_SNAPSHOT_CODE = Path(__file__).resolve().parent / "snapshot_pods.py"
# Cohort fair sharing's part (weighted shares): in the hash of the scenarios that set fairSharing only.
FAIR_SNAPSHOT_CODE = Path(__file__).resolve().parent / "snapshot_fair.py"
# JobSet's indexed pod names: in the hash of the scenarios that run JobSet's manager only.
JOBSET_SNAPSHOT_CODE = Path(__file__).resolve().parent / "snapshot_jobset.py"
# The Kubeflow jobs' part: in the hash of the scenarios that enable a Kubeflow framework only.
KUBEFLOW_SNAPSHOT_CODE = Path(__file__).resolve().parent / "snapshot_kubeflow.py"
# Deployments' and StatefulSets' pods named stably: in the hash of the scenarios enabling them only.
SERVING_SNAPSHOT_CODE = Path(__file__).resolve().parent / "snapshot_serving.py"
# The visibility API's pending workloads: in the hash of the scenarios with `visibility: true` only.
VISIBILITY_SNAPSHOT_CODE = Path(__file__).resolve().parent / "snapshot_visibility.py"
# The pins a recording depends on: Kueue itself and the control plane it ran on.
PINNED = ("KUEUE_VERSION", "KUEUE_MODULE_SUM", "KUBERNETES_VERSION")

Snapshots = dict[str, dict[str, Any]]


class StaleRecordingError(Exception):
    """The recording is missing, or its inputs changed since it was made."""


def record_command(name: str) -> str:
    return f".venv/bin/python -m e2e.conformance --record {name}"


def read_pins(path: Path = VERSIONS_FILE) -> dict[str, str]:
    values: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip().strip("\"'")
    return {key: values[key] for key in PINNED}


def scenario_inputs(scenario_path: Path) -> list[Path]:
    """The scenario file and every file it uses (configuration, manifests, test-bed spec)."""
    scenario = load_scenario(scenario_path)
    files = [scenario_path, scenario.configuration]
    if scenario.testbed is not None:
        files.append(scenario.testbed)
    for step in scenario.steps:
        files += [*step.apply, *step.delete, *step.expect_rejected]
    return list(dict.fromkeys(files))


def snapshot_code(scenario_path: Path) -> list[Path]:
    """The snapshot modules a scenario's checkpoints use: snapshot.py, and snapshot_pods.py
    when its Configuration enables the pod framework, snapshot_fair.py when it sets fairSharing;
    snapshot_visibility.py besides for a scenario with `visibility: true`."""
    scenario = load_scenario(scenario_path)
    visibility = [VISIBILITY_SNAPSHOT_CODE] if scenario.visibility else []
    return [*_snapshot_code(scenario), *visibility]


def _snapshot_code(scenario: Scenario) -> list[Path]:
    configuration = scenario.configuration
    if enables_serving(configuration):
        return [SNAPSHOT_CODE, POD_SNAPSHOT_CODE, SERVING_SNAPSHOT_CODE]
    if enables_pods(configuration):
        return [SNAPSHOT_CODE, POD_SNAPSHOT_CODE]
    if scenario.runs_jobsets or enables_jobset(configuration):
        return [SNAPSHOT_CODE, JOBSET_SNAPSHOT_CODE]
    if enables_kubeflow(configuration):
        return [SNAPSHOT_CODE, KUBEFLOW_SNAPSHOT_CODE]
    return [SNAPSHOT_CODE, *([FAIR_SNAPSHOT_CODE] if enables_fair_sharing(configuration) else [])]


def upstream_pins(scenario_path: Path, path: Path = VERSIONS_FILE) -> dict[str, str]:
    """The versions of the upstream managers the scenario runs on both sides (JobSet's, where its
    Configuration enables the jobset framework, for its webhooks, or with `jobsetController`; the
    trainer's and JobSet's, with `trainerController`): a new one makes its recording stale."""
    scenario = load_scenario(scenario_path)
    jobset = scenario.runs_jobsets or enables_jobset(scenario.configuration)
    keys = ["JOBSET_VERSION"] if jobset else []
    keys += ["TRAINER_VERSION"] if scenario.trainer_controller else []
    values = dict(
        line.strip().split("=", 1)
        for line in path.read_text().splitlines()
        if "=" in line and not line.startswith("#")
    )
    return {key: values[key].strip() for key in keys}


def inputs_hash(scenario_path: Path, pins: dict[str, str] | None = None) -> str:
    """sha256 over the scenario's files (by repository path and content), the pins (with the
    upstream managers' it runs) and the snapshot code it uses."""
    digest = hashlib.sha256()
    pinned = {**(pins if pins is not None else read_pins()), **upstream_pins(scenario_path)}
    for key, value in sorted(pinned.items()):
        digest.update(f"pin {key}={value}\n".encode())
    for path in [*scenario_inputs(scenario_path), *snapshot_code(scenario_path)]:
        digest.update(f"file {_shown(path)} {hashlib.sha256(path.read_bytes()).hexdigest()}\n".encode())
    return "sha256:" + digest.hexdigest()


def _shown(path: Path) -> str:
    """A file's name in the hash: relative to the repository, so a checkout's place does not matter."""
    resolved = path.resolve()
    return str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else resolved.name


@dataclass
class Result:
    checkpoints: Snapshots
    runs: int = 1


@dataclass
class Recording:
    scenario: str
    inputs: str
    pins: dict[str, str]
    results: list[Result] = field(default_factory=list)

    @property
    def runs(self) -> int:
        return sum(r.runs for r in self.results)

    def add(self, checkpoints: Snapshots) -> None:
        """One more run of Kueue: counted with an equal result seen before, else kept as new."""
        for result in self.results:
            if result.checkpoints == checkpoints:
                result.runs += 1
                return
        self.results.append(Result(checkpoints))

    def to_yaml(self) -> str:
        varies = len(self.results) > 1
        doc = {
            "scenario": self.scenario,
            "recordedWith": self.pins,
            "inputs": self.inputs,
            "command": record_command(self.scenario),
            "runs": self.runs,
            "note": (
                f"Kueue's result varied between runs: {len(self.results)} distinct results in {self.runs}"
                " runs; the controller must match one of them"
                if varies
                else f"the same result in all {self.runs} run(s)"
            ),
            "results": [{"runs": r.runs, "checkpoints": r.checkpoints} for r in self.results],
        }
        header = (
            "# Real Kueue's snapshots of this scenario, recorded by the command below; do not edit.\n"
            "# e2e/test_conformance.py compares the controller's run with them.\n"
        )
        return header + yaml.safe_dump(doc, sort_keys=False, width=120, allow_unicode=True)


def recording_path(name: str, directory: Path = RECORDED_DIR) -> Path:
    return directory / f"{name}.yaml"


def load_recording(path: Path) -> Recording:
    raw = yaml.safe_load(path.read_text())
    if not isinstance(raw, dict) or not isinstance(raw.get("results"), list) or not raw["results"]:
        raise ValueError(f"{path}: not a recording (no results); record it with {record_command(path.stem)}")
    results = [Result(dict(r["checkpoints"]), int(r["runs"])) for r in raw["results"]]
    return Recording(str(raw["scenario"]), str(raw["inputs"]), dict(raw["recordedWith"]), results)


def fresh_recording(scenario: Scenario, scenario_path: Path, directory: Path = RECORDED_DIR) -> Recording:
    """The scenario's recording, or StaleRecordingError naming the command that makes it anew."""
    path = recording_path(scenario.name, directory)
    command = record_command(scenario.name)
    if not path.is_file():
        raise StaleRecordingError(f"{scenario.name}: no recording of Kueue's result ({path}); run: {command}")
    recording = load_recording(path)
    now = inputs_hash(scenario_path)
    if recording.inputs != now:
        pins = read_pins()
        versions = f" (pinned versions then {recording.pins}, now {pins})" if recording.pins != pins else ""
        raise StaleRecordingError(
            f"{scenario.name}: the scenario, a file it uses, the snapshot code or a pinned version changed"
            f" after Kueue's result was recorded{versions} ({path}: inputs {recording.inputs}, now {now});"
            f" record it again with: {command}"
        )
    return recording
