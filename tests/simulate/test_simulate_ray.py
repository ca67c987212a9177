"""`reconciler simulate` with RayJobs (examples/ray/): the same admissions as real Kueue v0.18.1
gave the same objects (the conformance recording rayjob-gpu-worker-group)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "ray"
RECORDED = ROOT / "e2e" / "conformance" / "recorded" / "rayjob-gpu-worker-group.yaml"


def test_rayjobs_are_admitted_as_kueue_admitted_them(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["simulate", "--config", str(EXAMPLES / "00-configuration.yaml"), "-o", "yaml"]
    for path in sorted(EXAMPLES.glob("[1-9]*.yaml")):
        args += ["-f", str(path)]
    assert main(args) == 0
    out: list[dict[str, Any]] = [o for o in yaml.safe_load_all(capsys.readouterr().out) if o]
    workloads = {
        f"{o['metadata']['ownerReferences'][0]['kind']}/{o['metadata']['ownerReferences'][0]['name']}": o
        for o in out
        if o["kind"] == "Workload"
    }
    assert sorted(workloads) == ["RayJob/train-a", "RayJob/train-b"]
    (recorded,) = yaml.safe_load(RECORDED.read_text())["results"]
    kueue = recorded["checkpoints"]["a-admitted-b-pending"]
    assert (
        workloads["RayJob/train-a"]["status"]["admission"]
        == kueue["Workload[p3-ray-demo/RayJob/train-a].admission"]
    )
    pending = {c["type"]: c for c in workloads["RayJob/train-b"]["status"]["conditions"]}["QuotaReserved"]
    expected = kueue["Workload[p3-ray-demo/RayJob/train-b].conditions.QuotaReserved"]
    assert f"{pending['status']} {pending['reason']}: {pending['message']}" == expected
