"""The conformance runner's pod-framework parts, without Kueue or a test-bed: both sides' pod
webhooks registered only for a scenario enabling `pod` and scoped to its namespaces, the pod
snapshot (pods' fields, the managers' Events on pods, a group's Workload named after its group)
and its place in the inputs hash (pod scenarios only, so the other recordings stay fresh)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.conformance import recording
from e2e.conformance.kueue import webhook_configurations
from e2e.conformance.podhooks import scoped_to
from e2e.conformance.runner import our_webhooks
from e2e.conformance.scenario import Wait, all_scenarios, load_scenario
from e2e.conformance.snapshot import Normalizer
from e2e.conformance.snapshot_pods import (
    enables_pods,
    group_names,
    pod_events,
    pod_fields,
    rename_groups,
)

NS_IN = {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["a", "b"]}


def _kueue_manifests(tmp_path: Path) -> Path:
    def hook(name: str, group: str, path: str) -> dict[str, Any]:
        return {
            "name": name,
            "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": path}},
            "rules": [{"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE"]}],
        }

    manifests = tmp_path / "manifests.yaml"
    manifests.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": "mutating-webhook-configuration"},
                "webhooks": [
                    hook("mjob.kb.io", "batch", "/mutate-batch-v1-job"),
                    hook("mpod.kb.io", "", "/mutate--v1-pod"),
                    hook("mdeployment.kb.io", "apps", "/mutate-apps-v1-deployment"),
                ],
            }
        )
    )
    return manifests


def test_kueues_pod_webhook_is_registered_only_for_pod_scenarios_and_scoped(tmp_path: Path) -> None:
    manifests = _kueue_manifests(tmp_path)
    [without] = webhook_configurations(manifests, 9443, b"CA")
    assert [h["name"] for h in without["webhooks"]] == ["mjob.kb.io"]
    [with_pods] = webhook_configurations(manifests, 9443, b"CA", pod_namespaces=("b", "a"))
    hooks = {h["name"]: h for h in with_pods["webhooks"]}
    assert sorted(hooks) == ["mjob.kb.io", "mpod.kb.io"]
    assert hooks["mpod.kb.io"]["namespaceSelector"] == {"matchExpressions": [NS_IN]}
    assert hooks["mpod.kb.io"]["clientConfig"]["url"] == "https://127.0.0.1:9443/mutate--v1-pod"
    assert "namespaceSelector" not in hooks["mjob.kb.io"]


def test_the_controllers_pod_webhooks_keep_their_selector_and_are_confined_to_the_namespaces() -> None:
    def pod_hooks(namespaces: tuple[str, ...]) -> dict[str, Any]:
        configurations = our_webhooks(9443, b"CA", pod_namespaces=namespaces)
        return {
            h["name"]: h
            for c in configurations
            for h in c["webhooks"]
            if h["name"] in ("mpod.kb.io", "vpod.kb.io")
        }

    assert pod_hooks(()) == {}
    hooks = pod_hooks(("a", "b"))
    assert sorted(hooks) == ["mpod.kb.io", "vpod.kb.io"]
    for hook in hooks.values():
        expressions = hook["namespaceSelector"]["matchExpressions"]
        assert expressions[-1] == NS_IN
        # the shipped selector (not kube-system, not the controller's namespace) is kept, ANDed
        assert expressions[0]["operator"] == "NotIn"
        assert "kube-system" in expressions[0]["values"]


def test_scoping_adds_to_a_selector_without_changing_the_original() -> None:
    hook = {"name": "h", "namespaceSelector": {"matchLabels": {"x": "y"}}}
    scoped = scoped_to(hook, ("a",))
    assert scoped["namespaceSelector"] == {
        "matchLabels": {"x": "y"},
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["a"]}],
    }
    assert hook == {"name": "h", "namespaceSelector": {"matchLabels": {"x": "y"}}}


def test_pod_fields_are_gates_managed_label_finalizers_node_selector_and_phase() -> None:
    pod = {
        "metadata": {
            "name": "p",
            "labels": {"kueue.x-k8s.io/managed": "true"},
            "finalizers": ["kueue.x-k8s.io/managed"],
        },
        "spec": {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]},
        "status": {"phase": "Pending"},
    }
    assert pod_fields(pod) == {
        "schedulingGates": ["kueue.x-k8s.io/admission"],
        "managed": "true",
        "finalizers": ["kueue.x-k8s.io/managed"],
        "nodeSelector": {},
        "phase": "Pending",
    }
    assert pod_fields({"metadata": {"name": "bare"}})["managed"] is None


def test_only_the_managers_events_on_pods_are_kept() -> None:
    wl = {"metadata": {"name": "pod-p-1a2b3", "ownerReferences": [{"kind": "Pod", "name": "p"}]}}
    norm = Normalizer([wl], [])
    events = [
        {
            "involvedObject": {"kind": "Pod", "name": "p"},
            "type": "Normal",
            "reason": "Started",
            "message": "Admitted by clusterQueue cq",
            "reportingComponent": "kueue-job-controller",
        },
        {
            "involvedObject": {"kind": "Pod", "name": "p"},
            "type": "Normal",
            "reason": "CreatedWorkload",
            "message": "Created Workload: ns/pod-p-1a2b3",
            "source": {"component": "dra-quota-reconciler"},
        },
        {
            "involvedObject": {"kind": "Pod", "name": "p"},
            "type": "Warning",
            "reason": "FailedScheduling",
            "message": "gated",
            "reportingComponent": "default-scheduler",
        },
        {
            "involvedObject": {"kind": "Pod", "name": "p"},
            "type": "Normal",
            "reason": "Pulled",
            "message": "x",
            "source": {"component": "kubelet"},
        },
        {"involvedObject": {"kind": "Job", "name": "j"}, "type": "Normal", "reason": "R", "message": "m"},
    ]
    assert pod_events(events, norm) == {
        "Pod[p] Normal Started: Admitted by clusterQueue cq",
        "Pod[p] Normal CreatedWorkload: Created Workload: ns/<workload of Pod/p>",
    }


def test_a_group_workload_is_named_after_its_group_whatever_its_first_owner() -> None:
    group = {
        "metadata": {
            "name": "train",
            "annotations": {"kueue.x-k8s.io/is-group-workload": "true"},
            "ownerReferences": [{"kind": "Pod", "name": "train-cpu"}, {"kind": "Pod", "name": "train-gpu"}],
        }
    }
    single = {"metadata": {"name": "pod-solo-1a2b3", "ownerReferences": [{"kind": "Pod", "name": "solo"}]}}
    renames = group_names([group, single])
    assert renames == {"Pod/train-cpu": "PodGroup/train"}
    flat = {
        "Workload[ns/Pod/train-cpu].conditions.Admitted": "True Admitted: The workload is admitted",
        "Workload[ns/Pod/solo].active": True,
        "Pod[ns/train-cpu].phase": "Running",
        "LocalQueue[ns/lq].conditions.Active": "True Ready: <workload of Pod/train-cpu> x",
        "Events": [
            "Workload[Pod/train-cpu] Normal Admitted: Admitted by ClusterQueue cq",
            "Pod[train-cpu] Normal Started: <workload of Pod/train-cpu>",
        ],
    }
    assert rename_groups(flat, renames) == {
        "Workload[ns/PodGroup/train].conditions.Admitted": "True Admitted: The workload is admitted",
        "Workload[ns/Pod/solo].active": True,
        "Pod[ns/train-cpu].phase": "Running",
        "LocalQueue[ns/lq].conditions.Active": "True Ready: <workload of PodGroup/train> x",
        "Events": [
            "Pod[train-cpu] Normal Started: <workload of PodGroup/train>",
            "Workload[PodGroup/train] Normal Admitted: Admitted by ClusterQueue cq",
        ],
    }


def test_the_pod_snapshot_code_is_in_the_hash_of_pod_scenarios_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenarios = all_scenarios()
    pods = [n for n, p in scenarios.items() if enables_pods(load_scenario(p).configuration)]
    assert sorted(pods) == [
        "pod-group",
        "pod-group-at-once",
        "pod-group-deleted-pod",
        "pod-group-three-gpus",
        "pod-single",
    ]
    code = tmp_path / "snapshot_pods.py"
    code.write_text("# one\n")
    monkeypatch.setattr(recording, "POD_SNAPSHOT_CODE", code)
    pins = recording.read_pins()
    before = {n: recording.inputs_hash(scenarios[n], pins) for n in ("pod-single", "walkthrough")}
    code.write_text("# two\n")
    assert recording.inputs_hash(scenarios["pod-single"], pins) != before["pod-single"]
    assert recording.inputs_hash(scenarios["walkthrough"], pins) == before["walkthrough"]


def test_a_wait_names_one_of_job_workload_pod_and_a_pod_may_be_waited_running() -> None:
    assert Wait(namespace="n", pod="p", running=True).pod == "p"
    with pytest.raises(ValueError, match="exactly one of job, workload, pod"):
        Wait(namespace="n", job="j", pod="p")
    with pytest.raises(ValueError, match="exactly one of job, workload, pod"):
        Wait(namespace="n")
