"""Pod groups at the seam (integrations.podgroup, podgroup_plan): Kueue's total-count reading,
its end of a group, its excess and replacement choices, and a Workload left without pods."""

from __future__ import annotations

from typing import Any

import msgspec

from reconciler.api import Workload
from reconciler.api.pods import ManagedPod
from reconciler.integrations.pods.group import (
    RETRIABLE_IN_GROUP_ANNOTATION,
    group_finished,
    group_pod_sets,
    make_group,
    role_of,
    total_count,
)
from reconciler.integrations.pods.group_plan import GroupKnown, plan_group
from reconciler.integrations.pods.pod import GROUP_NAME_LABEL, GROUP_TOTAL_COUNT_ANNOTATION
from tests.support.pods import pod_body, stored_pod

NOW = "2026-01-01T00:10:00Z"


def pod(
    name: str, *, phase: str = "", created: str = "2026-01-01T00:00:00Z", **annotations: str
) -> ManagedPod:
    body = pod_body(name)
    body["metadata"]["labels"][GROUP_NAME_LABEL] = "g"
    body["metadata"]["annotations"] = {GROUP_TOTAL_COUNT_ANNOTATION: "2", **annotations}
    stored: dict[str, Any] = stored_pod(body)
    stored["metadata"] |= {"uid": f"uid-{name}", "creationTimestamp": created, "resourceVersion": "1"}
    stored["status"] = {"phase": phase} if phase else {}
    return msgspec.json.decode(msgspec.json.encode(stored), type=ManagedPod)


def test_the_total_count_is_read_as_go_reads_an_int_and_must_be_positive() -> None:
    assert [total_count({GROUP_TOTAL_COUNT_ANNOTATION: v}) for v in ("3", "+3", "0", "-1", "x", "²")] == [
        3,
        3,
        None,
        None,
        None,
        None,
    ]
    assert total_count({}) is None


def test_a_group_ends_when_all_succeeded_or_none_runs_and_one_is_not_retriable() -> None:
    done = [pod("a", phase="Succeeded"), pod("b", phase="Succeeded")]
    outcome = group_finished(done, 2)
    assert outcome is not None
    assert (outcome.succeeded, outcome.message) == (True, "Pods succeeded: 2/2.")
    failed = [pod("a", phase="Succeeded"), pod("b", phase="Failed")]
    assert group_finished(failed, 2) is None  # retriable: waits for a replacement
    stuck = [
        pod("a", phase="Succeeded"),
        pod("b", phase="Failed", **{RETRIABLE_IN_GROUP_ANNOTATION: "false"}),
    ]
    outcome = group_finished(stuck, 2)
    assert outcome is not None
    assert (outcome.succeeded, outcome.message) == (True, "Pods succeeded: 1/2.")  # Kueue's, verbatim


def test_no_workload_before_the_group_is_complete_then_the_newest_is_excess() -> None:
    one = make_group("ns", "g", [pod("a")])
    assert one is not None
    plan = plan_group(one, None, GroupKnown(), {}, now=NOW)
    assert (plan.create, plan.problem, plan.tell) == (
        None,
        "'g' group has fewer runnable pods than expected",
        True,
    )
    three = make_group("ns", "g", [pod("c", created="2026-01-01T00:00:09Z"), pod("a"), pod("b")])
    assert three is not None
    plan = plan_group(three, None, GroupKnown(), {}, now=NOW)
    assert plan.create is not None
    kept, pod_sets = plan.create
    assert [p.metadata.name for p in kept] == ["a", "b"]
    assert [p.metadata.name for p in plan.excess] == ["c"]
    assert [(ps.name, ps.count) for ps in pod_sets] == [(role_of(kept[0]), 2)]


def test_a_failed_pod_is_let_go_only_once_replaced() -> None:
    failed = pod("b", phase="Failed")
    group = make_group("ns", "g", [pod("a", phase="Running"), failed])
    assert group is not None
    pod_sets = [
        {"name": ps.name, "count": 2, "template": msgspec.json.decode(ps.template)}
        for ps in group_pod_sets(group.pods[:1])
    ]
    body = {"metadata": {"name": "g", "namespace": "ns"}, "spec": {"podSets": pod_sets}}
    recorded = msgspec.json.decode(msgspec.json.encode(body), type=Workload)
    plan = plan_group(group, recorded, GroupKnown(admitted=True), {}, now=NOW)
    assert plan.finalize == []  # nothing replaces it yet
    assert plan.conditions is not None
    replaced = make_group("ns", "g", [*group.pods, pod("c", created="2026-01-01T00:05:00Z")])
    assert replaced is not None
    plan = plan_group(replaced, recorded, GroupKnown(admitted=True), {}, now=NOW)
    assert [p.metadata.name for p in plan.finalize] == ["b"]
    assert [p.metadata.name for p in plan.owners] == ["a", "c"]


def test_a_workload_with_no_pod_of_its_roles_is_deleted() -> None:
    group = make_group("ns", "g", [pod("a")])
    assert group is not None
    body = {
        "metadata": {"name": "g", "namespace": "ns"},
        "spec": {"podSets": [{"name": "other", "count": 2, "template": {"spec": {}}}]},
    }
    recorded = msgspec.json.decode(msgspec.json.encode(body), type=Workload)
    plan = plan_group(group, recorded, GroupKnown(), {}, now=NOW)
    assert plan.delete_workload
    assert plan.stop is None  # a gated group is not running: nothing to stop


def test_a_deleted_pod_counts_while_it_runs_on_its_node_then_waits_for_its_replacement() -> None:
    """Kueue's isPodRunnableOrSucceeded: a deleted pod with a node is the group's while it runs;
    terminated, it is missing (WaitingForReplacementPods) but kept, finalizer and all, until a
    pod of its role replaces it; a deleted pod that never had a node is missing at once."""

    def deleted(name: str, phase: str, node: str) -> ManagedPod:
        body = msgspec.json.decode(msgspec.json.encode(pod(name, phase=phase)))
        body["metadata"]["deletionTimestamp"] = "2026-01-01T00:09:00Z"
        body["spec"]["nodeName"] = node
        return msgspec.json.decode(msgspec.json.encode(body), type=ManagedPod)

    first = pod("a", phase="Running")
    group = make_group("ns", "g", [first, pod("b")])
    assert group is not None
    pod_sets = [
        {"name": ps.name, "count": 2, "template": msgspec.json.decode(ps.template)}
        for ps in group_pod_sets(group.pods[:1])
    ]
    body = {"metadata": {"name": "g", "namespace": "ns"}, "spec": {"podSets": pod_sets}}
    recorded = msgspec.json.decode(msgspec.json.encode(body), type=Workload)
    known = GroupKnown(admitted=True)
    still_running = make_group("ns", "g", [first, deleted("b", "Running", "node-1")])
    assert still_running is not None
    plan = plan_group(still_running, recorded, known, {}, now=NOW)
    assert (plan.conditions, plan.finalize, plan.stop, plan.finish) == (None, [], None, None)
    for phase, node in (("Failed", "node-1"), ("Running", "")):
        missing = make_group("ns", "g", [first, deleted("b", phase, node)])
        assert missing is not None
        plan = plan_group(missing, recorded, known, {}, now=NOW)
        assert plan.conditions is not None
        waiting = next(c for c in plan.conditions if c.type == "WaitingForReplacementPods")
        assert (waiting.status, waiting.reason) == ("True", "PodsFailed")
        assert (plan.finalize, plan.stop, plan.finish, plan.delete_workload) == ([], None, None, False)
    replaced = make_group(
        "ns", "g", [first, deleted("b", "Failed", "node-1"), pod("c", created="2026-01-01T00:09:30Z")]
    )
    assert replaced is not None
    plan = plan_group(replaced, recorded, known, {}, now=NOW)
    assert [p.metadata.name for p in plan.finalize] == ["b"]
