"""`reconciler simulate` with plain pods (examples/pods/, framework pod): one Workload per pod,
pod set main, charged for its claim through deviceClassMappings; the second pod waits with
Kueue's message; a pod group is one Workload, made once the group is complete; a pod of a
framework not enabled is left alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.cli import main
from tests.support.simulate_cli import jobs_only_config

ROOT = Path(__file__).resolve().parents[2]
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


def test_pods_are_admitted_one_workload_each(capsys: pytest.CaptureFixture[str]) -> None:
    files = sorted(EXAMPLES.glob("[1-9]*.yaml"))
    out, _ = _simulate(capsys, EXAMPLES / "00-configuration.yaml", *files)
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


def _group_pod(tmp_path: Path, name: str, group: str, total: int) -> Path:
    pod = yaml.safe_load((EXAMPLES / "31-pod-infer-b.yaml").read_text())
    pod["metadata"]["name"] = name
    pod["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = group
    pod["metadata"]["annotations"] = {"kueue.x-k8s.io/pod-group-total-count": str(total)}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(pod))
    return path


def test_a_pod_group_is_one_workload_once_complete(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pods = [_group_pod(tmp_path, n, "g", 2) for n in ("g-1", "g-2")]
    pods.append(_group_pod(tmp_path, "h-1", "h", 2))  # its second pod never comes
    out, err = _simulate(capsys, EXAMPLES / "00-configuration.yaml", EXAMPLES / "10-queues.yaml", *pods)
    (workload,) = [o for o in out if o["kind"] == "Workload"]
    assert workload["metadata"]["name"] == "g"
    assert workload["metadata"]["annotations"]["kueue.x-k8s.io/is-group-workload"] == "true"
    assert [r["name"] for r in workload["metadata"]["ownerReferences"]] == ["g-1", "g-2"]
    ((name, count),) = [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]]
    assert (len(name), count) == (8, 2)  # one shape: one pod set named by its role hash
    pending = {c["type"]: c for c in workload["status"]["conditions"]}["QuotaReserved"]
    assert pending["message"] == (
        f"couldn't assign flavors to pod set {name}: insufficient quota for nvidia.com/gpu in flavor "
        "pods-t4, previously considered podsets requests (0) + current podset request (2) > maximum "
        "capacity (1)"
    )  # both pods' claims charged: two GPUs against a quota of one
    assert "pod group pods-demo/h: 'h' group has fewer runnable pods than expected" in err


def test_pods_are_left_alone_unless_their_framework_is_enabled(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = jobs_only_config(EXAMPLES, tmp_path)
    out, err = _simulate(capsys, path, EXAMPLES)
    assert not [o for o in out if o["kind"] == "Workload"]
    assert "integrations.frameworks does not enable pod; not managed" in err


def test_the_pod_group_example_admits_the_complete_group_and_names_the_incomplete_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    group = ROOT / "examples" / "pod-group"
    out, err = _simulate(capsys, group / "00-configuration.yaml", *sorted(group.glob("[1-9]*.yaml")))
    (workload,) = [o for o in out if o["kind"] == "Workload"]
    assert workload["metadata"]["name"] == "train"
    assert [(ps["count"]) for ps in workload["spec"]["podSets"]] == [2]  # one shape: one pod set
    (assignment,) = workload["status"]["admission"]["podSetAssignments"]
    assert assignment["resourceUsage"] == {"nvidia.com/gpu": "2"}
    assert "pod group group-demo/eval: 'eval' group has fewer runnable pods than expected" in err


def test_pods_are_admitted_as_kueue_admitted_them(capsys: pytest.CaptureFixture[str]) -> None:
    """The conformance scenario pod-single's objects, simulated: the same admission and pending
    message as real Kueue v0.18.1 recorded (which the controller's live run matches too)."""
    scenario = yaml.safe_load((ROOT / "e2e/conformance/scenarios/pod-single.yaml").read_text())
    files = [ROOT / f for step in scenario["steps"] for f in _applied(step)]
    out, _ = _simulate(capsys, ROOT / scenario["configuration"], *files)
    workloads = {_owner(o): o for o in out if o["kind"] == "Workload"}
    recorded = yaml.safe_load((ROOT / "e2e/conformance/recorded/pod-single.yaml").read_text())
    kueue = recorded["results"][0]["checkpoints"]["first-running-second-gated"]
    assert (
        workloads["Pod/pod-first"]["status"]["admission"]
        == kueue["Workload[p3-dra-demo/Pod/pod-first].admission"]
    )
    pending = {c["type"]: c for c in workloads["Pod/pod-second"]["status"]["conditions"]}["QuotaReserved"]
    expected = kueue["Workload[p3-dra-demo/Pod/pod-second].conditions.QuotaReserved"]
    assert f"{pending['status']} {pending['reason']}: {pending['message']}" == expected


def _applied(step: dict[str, Any]) -> list[str]:
    applied = step.get("apply", [])
    return [applied] if isinstance(applied, str) else list(applied)
