"""`reconciler simulate` with plain pods (examples/pods/, framework pod): one Workload per pod,
pod set main, charged for its claim through deviceClassMappings; the second pod waits with
Kueue's message; a pod group's pod and a pod of a framework not enabled are left alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "pods"


def _simulate(
    capsys: pytest.CaptureFixture[str], config: Path, *files: Path
) -> tuple[list[dict[str, Any]], str]:
    args = ["simulate", "--config", str(config), "-o", "yaml"]
    for path in files:
        args += ["-f", str(path)]
    assert main(args) == 0
    captured = capsys.readouterr()
    return [o for o in yaml.safe_load_all(captured.out) if o], captured.err


def _owner(obj: dict[str, Any]) -> str:
    ref = obj["metadata"]["ownerReferences"][0]
    return f"{ref['kind']}/{ref['name']}"


def test_pods_are_admitted_one_workload_each(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    group = yaml.safe_load((EXAMPLES / "31-pod-infer-b.yaml").read_text())
    group["metadata"]["name"] = "grouped"
    group["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = "g"
    path = tmp_path / "group.yaml"
    path.write_text(yaml.safe_dump(group))
    files = sorted(EXAMPLES.glob("[1-9]*.yaml"))
    out, err = _simulate(capsys, EXAMPLES / "00-configuration.yaml", *files, path)
    workloads = {_owner(o): o for o in out if o["kind"] == "Workload"}
    assert sorted(workloads) == ["Pod/infer-a", "Pod/infer-b"]
    admitted = workloads["Pod/infer-a"]
    assert [(ps["name"], ps["count"]) for ps in admitted["spec"]["podSets"]] == [("main", 1)]
    (assignment,) = admitted["status"]["admission"]["podSetAssignments"]
    assert assignment["resourceUsage"] == {"nvidia.com/gpu": "1"}
    pending = {c["type"]: c for c in workloads["Pod/infer-b"]["status"]["conditions"]}["QuotaReserved"]
    assert (pending["status"], pending["reason"], pending["message"]) == (
        "False",
        "Pending",
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in "
        "flavor pods-t4, 1 more needed",
    )
    assert "a pod group's pod; pod groups are not supported yet" in err


def test_pods_are_left_alone_unless_their_framework_is_enabled(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = yaml.safe_load((EXAMPLES / "00-configuration.yaml").read_text())
    config["integrations"]["frameworks"] = ["batch/job"]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    out, err = _simulate(capsys, path, EXAMPLES)
    assert not [o for o in out if o["kind"] == "Workload"]
    assert "integrations.frameworks does not enable pod; not managed" in err
