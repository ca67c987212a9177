"""A flavor's tolerations go onto the Job's pods at start and come off again on eviction."""

from __future__ import annotations

from typing import Any

import msgspec

from reconciler.api import Admission, PodSetAssignment, Toleration, pod_template_view
from reconciler.core.scheduling.flavor_labels import admission_tolerations
from reconciler.integrations.batchjob import restore_patch, start_patch
from tests.support.builders import decode, flavor

GPU_TAINT = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
SPOT = {"key": "spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}


def tolerant_flavor(name: str, *tolerations: dict[str, str]) -> Any:
    result = flavor(name, {"gpu": name})
    result.spec.tolerations = [decode(t, Toleration) for t in tolerations]
    return result


def test_each_distinct_assigned_flavor_adds_its_tolerations_once() -> None:
    flavors = {"t4": tolerant_flavor("t4", GPU_TAINT), "cpu": tolerant_flavor("cpu", GPU_TAINT, SPOT)}
    admission = Admission(
        cluster_queue="cq",
        pod_set_assignments=[
            PodSetAssignment(name="main", flavors={"nvidia.com/gpu": "t4", "cpu": "cpu", "memory": "cpu"})
        ],
    )
    got = admission_tolerations(admission, flavors)["main"]
    assert [msgspec.to_builtins(t) for t in got] == [GPU_TAINT, SPOT]


def test_start_appends_to_the_templates_own_tolerations_and_restore_puts_them_back() -> None:
    own = decode({"key": "team", "operator": "Exists"}, Toleration)
    flavor_tolerations = [decode(GPU_TAINT, Toleration), own]
    patch = msgspec.json.decode(
        start_patch({"gpu": "t4"}, {"kueue.x-k8s.io/podset": "main"}, flavor_tolerations, [own])
    )
    spec = patch["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"gpu": "t4"}
    assert spec["tolerations"] == [{"key": "team", "operator": "Exists"}, GPU_TAINT]  # no duplicate

    def view(tolerations: list[dict[str, str]], selector: dict[str, str]) -> Any:
        body = {"spec": {"containers": [], "nodeSelector": selector, "tolerations": tolerations}}
        return pod_template_view(msgspec.Raw(msgspec.json.encode(body)))

    original = view([{"key": "team", "operator": "Exists"}], {})
    started = view(spec["tolerations"], {"gpu": "t4"})
    restored = msgspec.json.decode(restore_patch(started, original) or b"{}")
    assert restored["spec"]["template"]["spec"]["tolerations"] == [{"key": "team", "operator": "Exists"}]
    assert restored["spec"]["template"]["spec"]["nodeSelector"] == {"gpu": None}
    assert restore_patch(original, original) is None


def test_no_flavor_tolerations_leave_the_list_alone() -> None:
    patch = msgspec.json.decode(start_patch({"gpu": "t4"}, {}, [], []))
    assert "tolerations" not in patch["spec"]["template"]["spec"]
