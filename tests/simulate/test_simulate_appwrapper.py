"""`reconciler simulate` with AppWrappers (the conformance scenario appwrapper-gpu-job's manifests):
the same admissions as real Kueue v0.18.1 gave the same objects (its recording), but for the GPU
Kueue does not charge for an AppWrapper's pods (a listed difference: the controller keeps their
DRA claims)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.cli import main

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "e2e" / "conformance" / "manifests"
RECORDED = ROOT / "e2e" / "conformance" / "recorded" / "appwrapper-gpu-job.yaml"
GPU = "nvidia.com/gpu"


def test_appwrappers_are_admitted_as_kueue_admitted_them_but_for_the_gpu(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["simulate", "--config", str(MANIFESTS / "configuration-appwrapper.yaml"), "-o", "yaml"]
    for name in ("appwrapper-queues.yaml", "appwrapper-train-a.yaml", "appwrapper-train-b.yaml"):
        args += ["-f", str(MANIFESTS / name)]
    assert main(args) == 0
    out: list[dict[str, Any]] = [o for o in yaml.safe_load_all(capsys.readouterr().out) if o]
    workloads = {
        f"{o['metadata']['ownerReferences'][0]['kind']}/{o['metadata']['ownerReferences'][0]['name']}": o
        for o in out
        if o["kind"] == "Workload"
    }
    assert sorted(workloads) == ["AppWrapper/train-a", "AppWrapper/train-b"]
    kueue = yaml.safe_load(RECORDED.read_text())["results"][0]["checkpoints"]["a-admitted-b-pending"]
    ours = workloads["AppWrapper/train-a"]["status"]["admission"]
    (assignment,) = ours["podSetAssignments"]
    # Kueue charged the CPU alone; the controller charges the GPU of the pod's claim too.
    assert assignment["resourceUsage"].pop(GPU) == "1"
    assert assignment["flavors"].pop(GPU) == "p3-aw-t4"
    assert ours == kueue["Workload[p3-aw-demo/AppWrapper/train-a].admission"]
    pending = {c["type"]: c for c in workloads["AppWrapper/train-b"]["status"]["conditions"]}["QuotaReserved"]
    expected = kueue["Workload[p3-aw-demo/AppWrapper/train-b].conditions.QuotaReserved"]
    assert f"{pending['status']} {pending['reason']}: {pending['message']}".startswith(expected)
