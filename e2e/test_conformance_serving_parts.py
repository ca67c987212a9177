"""The conformance runner's parts for the serving frameworks (`deployment`, `statefulset`): both
sides' `apps` webhooks and pod webhooks are registered for their scenarios; a ReplicaSet's pods
are named stably by what the snapshot shows of them; a StatefulSet's Workload loses its hash."""

from __future__ import annotations

from typing import Any

from e2e.conformance.runner import _webhook_groups, our_webhooks
from e2e.conformance.scenario import all_scenarios, load_scenario
from e2e.conformance.snapshot_serving import _renamed, enables_serving, set_workload_names, stable_names

Obj = dict[str, Any]


def _pod(name: str, phase: str, created: str, gated: bool) -> Obj:
    gates = [{"name": "kueue.x-k8s.io/admission"}] if gated else []
    return {
        "metadata": {
            "name": name,
            "generateName": "infer-7d9f8-",
            "labels": {"pod-template-hash": "7d9f8"},
            "creationTimestamp": created,
        },
        "spec": {"schedulingGates": gates},
        "status": {"phase": phase},
    }


def test_generated_pods_are_named_by_what_the_snapshot_shows() -> None:
    pods = [
        _pod("infer-7d9f8-zzzzz", "Pending", "2026-01-01T00:00:01Z", gated=True),
        _pod("infer-7d9f8-bbbbb", "Running", "2026-01-01T00:00:01Z", gated=False),
        _pod("infer-7d9f8-aaaaa", "Running", "2026-01-01T00:00:00Z", gated=False),
        {"metadata": {"name": "web-0"}, "spec": {}, "status": {"phase": "Running"}},
    ]
    names = stable_names(pods)
    # By the fields shown (the gated, pending one first whatever its random suffix); among like
    # pods the older goes first; a pod without generateName keeps its name.
    assert names == {
        "infer-7d9f8-zzzzz": "infer-hash-#0",
        "infer-7d9f8-aaaaa": "infer-hash-#1",
        "infer-7d9f8-bbbbb": "infer-hash-#2",
    }
    workloads: list[Obj] = [
        {
            "metadata": {
                "name": "statefulset-web-1a2b3",
                "annotations": {
                    "kueue.x-k8s.io/job-owner-gvk": "apps/v1, Kind=StatefulSet",
                    "kueue.x-k8s.io/job-owner-name": "web",
                },
            }
        },
        {"metadata": {"name": "pod-x-12345"}},
    ]
    assert set_workload_names(workloads) == {"statefulset-web-1a2b3": "statefulset-web"}


def test_the_serving_scenarios_register_apps_and_pod_webhooks_on_both_sides() -> None:
    for name in ("deployment-scale-up", "statefulset-replace-pod"):
        scenario = load_scenario(all_scenarios()[name])
        assert enables_serving(scenario.configuration)
        groups = _webhook_groups(scenario)
        assert "apps" in groups
        ours = {
            h["name"] for c in our_webhooks(9443, b"CA", groups, ("serving-demo",)) for h in c["webhooks"]
        }
        assert {"mdeployment.kb.io", "vstatefulset.kb.io", "mpod.kb.io", "vpod.kb.io"} <= ours
    plain = load_scenario(all_scenarios()["walkthrough"])
    assert not enables_serving(plain.configuration)
    assert "apps" not in _webhook_groups(plain)


def test_a_sets_workload_is_renamed_whole_when_a_pod_name_is_part_of_it() -> None:
    """A StatefulSet's Workload is named from the set's UID (`statefulset-web-05e46`): when its
    hash begins with a pod's ordinal, the pod's name (`web-0`) is part of it. It was once renamed
    in part (`statefulset-web-#05e46`), which made a replay differ about one time in eight."""
    renames = {"web-0": "web-#0", "statefulset-web-05e46": "statefulset-web"}
    flat = {"Workload[ns/PodGroup/statefulset-web-05e46].active": "Events of web-0 and statefulset-web-05e46"}
    assert _renamed(flat, renames) == {
        "Workload[ns/PodGroup/statefulset-web].active": "Events of web-#0 and statefulset-web"
    }
