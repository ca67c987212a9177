"""`reconciler simulate` with TrainJobs (examples/trainjob/): their pod sets made from the
ClusterTrainingRuntime in the input, the same admissions as real Kueue v0.18.1 gave the same
objects (the conformance recording trainjob-gpu-pool); a TrainJob naming a runtime the input
lacks is an error naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "trainjob"
RECORDED = ROOT / "e2e" / "conformance" / "recorded" / "trainjob-gpu-pool.yaml"


def _simulate(capsys: pytest.CaptureFixture[str], *files: Path) -> tuple[int, str]:
    args = ["simulate", "--config", str(EXAMPLES / "00-configuration.yaml"), "-o", "yaml"]
    for path in files:
        args += ["-f", str(path)]
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_trainjobs_are_admitted_as_kueue_admitted_them(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _simulate(capsys, *sorted(EXAMPLES.glob("[1-9]*.yaml")))
    assert code == 0
    workloads: dict[str, Any] = {
        o["metadata"]["ownerReferences"][0]["name"]: o
        for o in yaml.safe_load_all(out)
        if o and o["kind"] == "Workload"
    }
    assert sorted(workloads) == ["train-a", "train-b"]
    assert [(ps["name"], ps["count"]) for ps in workloads["train-a"]["spec"]["podSets"]] == [("node", 2)]
    (recorded,) = yaml.safe_load(RECORDED.read_text())["results"]
    kueue = recorded["checkpoints"]["a-running-b-pending"]
    assert (
        workloads["train-a"]["status"]["admission"]
        == kueue["Workload[p3-dra-demo/TrainJob/train-a].admission"]
    )
    pending = {c["type"]: c for c in workloads["train-b"]["status"]["conditions"]}["QuotaReserved"]
    expected = kueue["Workload[p3-dra-demo/TrainJob/train-b].conditions.QuotaReserved"]
    assert f"{pending['status']} {pending['reason']}: {pending['message']}" == expected


def test_a_trainjob_whose_runtime_is_not_in_the_input_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _simulate(capsys, EXAMPLES / "10-queues.yaml", EXAMPLES / "30-trainjob-train-a.yaml")
    assert code != 0
    assert (
        "TrainJob p3-dra-demo/train-a: spec.runtimeRef: ClusterTrainingRuntime gpu-pool not found "
        "(create it, or name an existing one)"
    ) in out
