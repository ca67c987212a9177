"""`reconciler simulate` with JobSets (examples/jobset/): the same admissions as real Kueue
v0.18.1 gave the same objects (the conformance recording jobset-two-replicated-jobs, which the
controller's live run matches too)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.cli import main
from tests.support.simulate_cli import jobs_only_config

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "jobset"
RECORDED = ROOT / "e2e" / "conformance" / "recorded" / "jobset-two-replicated-jobs.yaml"


def _simulate(capsys: pytest.CaptureFixture[str], config: Path, *files: Path) -> list[dict[str, Any]]:
    args = ["simulate", "--config", str(config), "-o", "yaml"]
    for path in files:
        args += ["-f", str(path)]
    assert main(args) == 0
    return [o for o in yaml.safe_load_all(capsys.readouterr().out) if o]


def _owner(obj: dict[str, Any]) -> str:
    ref = obj["metadata"]["ownerReferences"][0]
    return f"{ref['kind']}/{ref['name']}"


def test_jobsets_are_admitted_as_kueue_admitted_them(capsys: pytest.CaptureFixture[str]) -> None:
    files = sorted(EXAMPLES.glob("[1-9]*.yaml"))
    out = _simulate(capsys, EXAMPLES / "00-configuration.yaml", *files)
    workloads = {_owner(o): o for o in out if o["kind"] == "Workload"}
    assert sorted(workloads) == ["JobSet/train-a", "JobSet/train-b"]
    (recorded,) = yaml.safe_load(RECORDED.read_text())["results"]
    kueue = recorded["checkpoints"]["a-admitted-b-pending"]
    admitted = workloads["JobSet/train-a"]
    assert admitted["status"]["admission"] == kueue["Workload[p3-dra-demo/JobSet/train-a].admission"]
    pending = {c["type"]: c for c in workloads["JobSet/train-b"]["status"]["conditions"]}["QuotaReserved"]
    expected = kueue["Workload[p3-dra-demo/JobSet/train-b].conditions.QuotaReserved"]
    assert f"{pending['status']} {pending['reason']}: {pending['message']}" == expected


def test_jobsets_are_left_alone_unless_their_framework_is_enabled(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = jobs_only_config(EXAMPLES, tmp_path)
    args = ["simulate", "--config", str(path), "-o", "yaml", "-f", str(EXAMPLES)]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert not [o for o in yaml.safe_load_all(captured.out) if o and o["kind"] == "Workload"]
    assert "integrations.frameworks does not enable jobset.x-k8s.io/jobset; not managed" in captured.err
