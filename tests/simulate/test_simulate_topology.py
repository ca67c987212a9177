"""`reconciler simulate` with topology-aware scheduling: the Topology and the Nodes of the input
give the domains, and the Jobs of the conformance scenario tas-job-placements are admitted with
the topology assignments real Kueue v0.18.1 gave them (its recording), the third waiting with
Kueue's message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.cli import main

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "e2e" / "conformance" / "manifests"
RECORDED = ROOT / "e2e" / "conformance" / "recorded" / "tas-job-placements.yaml"
RACKS = {"tas-n1": "r1", "tas-n2": "r1", "tas-n3": "r2", "tas-n4": "r2"}


def _nodes(path: Path) -> Path:
    """The scenario's test-bed nodes as Node objects: 4 CPUs each, ready, labelled by rack."""
    nodes = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {"cloud.example.com/rack": rack, "pool": "tas", "kubernetes.io/hostname": name},
            },
            "status": {
                "allocatable": {"cpu": "4", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
        for name, rack in RACKS.items()
    ]
    path.write_text(yaml.safe_dump_all(nodes))
    return path


def _simulate(capsys: pytest.CaptureFixture[str], *files: Path) -> dict[str, dict[str, Any]]:
    args = ["simulate", "--config", str(MANIFESTS / "configuration.yaml"), "-o", "yaml"]
    for path in files:
        args += ["-f", str(path)]
    assert main(args) == 0
    out = [o for o in yaml.safe_load_all(capsys.readouterr().out) if o]
    return {o["metadata"]["ownerReferences"][0]["name"]: o for o in out if o["kind"] == "Workload"}


def test_jobs_get_the_topology_assignments_kueue_gave_them(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    jobs = [MANIFESTS / f"tas-job-{x}.yaml" for x in "abc"]
    workloads = _simulate(capsys, _nodes(tmp_path / "nodes.yaml"), MANIFESTS / "tas-queues.yaml", *jobs)
    (recorded,) = yaml.safe_load(RECORDED.read_text())["results"]
    kueue = recorded["checkpoints"]["a-b-running-c-pending"]
    for job in ("tas-job-a", "tas-job-b"):
        assert workloads[job]["status"]["admission"] == kueue[f"Workload[p3-tas/Job/{job}].admission"]
    pending = {c["type"]: c for c in workloads["tas-job-c"]["status"]["conditions"]}["QuotaReserved"]
    expected = kueue["Workload[p3-tas/Job/tas-job-c].conditions.QuotaReserved"]
    assert f"{pending['status']} {pending['reason']}: {pending['message']}" == expected


def test_without_nodes_in_the_input_there_are_no_domains_to_place_a_job_in(
    capsys: pytest.CaptureFixture[str],
) -> None:
    workloads = _simulate(capsys, MANIFESTS / "tas-queues.yaml", MANIFESTS / "tas-job-a.yaml")
    pending = {c["type"]: c for c in workloads["tas-job-a"]["status"]["conditions"]}["QuotaReserved"]
    assert (pending["status"], pending["message"]) == (
        "False",
        "couldn't assign flavors to pod set main: no topology domains at level: cloud.example.com/rack",
    )
