"""`reconciler simulate` with the serving frameworks: a StatefulSet arrives as its one Workload
(one pod set `main` of its replicas), admitted as the controller admits it; a Deployment is
named and not simulated (its pods are the jobs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "serving"


def test_the_example_simulates_a_statefulset_as_one_workload_and_names_the_deployment(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(
        ["simulate", "--config", str(EXAMPLES / "00-configuration.yaml"), "-f", str(EXAMPLES), "-o", "table"]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Deployment p3-serving-demo/infer: ignored (not used for admission)" in err
    (row,) = [line for line in out.splitlines() if line.startswith("workload.kueue.x-k8s.io/")]
    name, queue, reserved_in, admitted = row.split()
    assert name.startswith("workload.kueue.x-k8s.io/statefulset-web-")
    assert (queue, reserved_in, admitted) == ("p3-serving-queue", "p3-serving-cq", "True")
