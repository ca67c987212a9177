"""`reconciler simulate` with Kubeflow jobs (examples/kubeflow/): the same admissions as real
Kueue v0.18.1 gave the same PyTorchJobs (the conformance recording kubeflow-pytorchjob, which the
controller's live run matches too), and an MPIJob arriving after them waits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "kubeflow"
RECORDED = ROOT / "e2e" / "conformance" / "recorded" / "kubeflow-pytorchjob.yaml"


def _simulate(capsys: pytest.CaptureFixture[str], *files: Path) -> dict[str, dict[str, Any]]:
    args = ["simulate", "--config", str(EXAMPLES / "00-configuration.yaml"), "-o", "yaml"]
    for path in files:
        args += ["-f", str(path)]
    assert main(args) == 0
    out = [o for o in yaml.safe_load_all(capsys.readouterr().out) if o and o["kind"] == "Workload"]
    return {
        f"{o['metadata']['ownerReferences'][0]['kind']}/{o['metadata']['ownerReferences'][0]['name']}": o
        for o in out
    }


def _reserved(workload: dict[str, Any]) -> str:
    cond = {c["type"]: c for c in workload["status"]["conditions"]}["QuotaReserved"]
    return f"{cond['status']} {cond['reason']}: {cond['message']}"


def test_pytorchjobs_are_admitted_as_kueue_admitted_them(capsys: pytest.CaptureFixture[str]) -> None:
    files = [EXAMPLES / n for n in ("10-queues.yaml", "20-claim-template.yaml")]
    files += sorted(EXAMPLES.glob("3*-pytorchjob-*.yaml"))
    workloads = _simulate(capsys, *files)
    assert sorted(workloads) == ["PyTorchJob/train-a", "PyTorchJob/train-b"]
    (recorded,) = yaml.safe_load(RECORDED.read_text())["results"]
    kueue = recorded["checkpoints"]["a-running-b-pending"]
    where = "Workload[p3-kubeflow-demo/PyTorchJob"
    assert workloads["PyTorchJob/train-a"]["status"]["admission"] == kueue[f"{where}/train-a].admission"]
    assert _reserved(workloads["PyTorchJob/train-b"]) == kueue[f"{where}/train-b].conditions.QuotaReserved"]


def test_an_mpijob_is_one_workload_of_a_launcher_and_workers(capsys: pytest.CaptureFixture[str]) -> None:
    workloads = _simulate(capsys, EXAMPLES)
    mpi = workloads["MPIJob/mpi-train"]
    assert [(ps["name"], ps["count"]) for ps in mpi["spec"]["podSets"]] == [("launcher", 1), ("worker", 2)]
    assert _reserved(mpi) == (
        "False Pending: couldn't assign flavors to pod set worker: insufficient unused quota for "
        "nvidia.com/gpu in flavor p3-kf-t4, 2 more needed"
    )
