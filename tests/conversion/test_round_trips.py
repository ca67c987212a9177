"""Every kind served in v1beta1 and v1beta2 taken there and back with realistic objects: nothing
is lost but what Kueue v0.18.1 drops, each renamed field lands under its new name."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from reconciler.conversion import HUB, KINDS, SPOKE, convert
from tests.support.conversion_samples import objects

V1BETA1, V1BETA2 = objects("v1beta1"), objects("v1beta2")


def test_every_kind_has_a_sample() -> None:
    assert set(V1BETA1) == set(KINDS) == set(V1BETA2)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_v1beta1_up_is_the_v1beta2_object_and_back(kind: str) -> None:
    up = convert(V1BETA1[kind], HUB)
    assert up == V1BETA2[kind]
    assert convert(up, SPOKE) == V1BETA1[kind]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_v1beta2_down_and_up_is_whole(kind: str) -> None:
    down = convert(V1BETA2[kind], SPOKE)
    assert down == V1BETA1[kind]
    assert convert(down, HUB) == V1BETA2[kind]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_same_version_is_left_as_it_is_and_the_input_never_changed(kind: str) -> None:
    before = copy.deepcopy(V1BETA2[kind])
    assert convert(V1BETA2[kind], HUB) == before
    convert(V1BETA2[kind], SPOKE)
    assert V1BETA2[kind] == before


def _leaves(obj: Any, path: str = "") -> set[str]:
    if isinstance(obj, dict):
        return {leaf for k, v in obj.items() for leaf in _leaves(v, f"{path}.{k}")} or {path}
    if isinstance(obj, list):
        return {leaf for i, v in enumerate(obj) for leaf in _leaves(v, f"{path}[{i}]")} or {path}
    return {f"{path}={obj!r}"}


def test_a_lost_field_would_be_seen() -> None:
    """Guard the guard: the round trip's comparison sees one leaf dropped deep in a status."""
    up = convert(V1BETA1["Workload"], HUB)
    del up["status"]["admission"]["podSetAssignments"][0]["resourceUsage"]
    back = convert(up, SPOKE)
    assert _leaves(V1BETA1["Workload"]) - _leaves(back) == {
        ".status.admission.podSetAssignments[0].resourceUsage.nvidia.com/gpu='4'"
    }


def test_cluster_queue_cohort_and_admission_checks_as_kueue() -> None:
    cq = copy.deepcopy(V1BETA1["ClusterQueue"])
    del cq["spec"]["admissionChecksStrategy"]
    cq["spec"]["admissionChecks"] = ["prov", "multikueue"]
    cq["spec"]["flavorFungibility"] = {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}
    up = convert(cq, HUB)["spec"]
    assert up["cohortName"] == "research"
    assert "cohort" not in up
    assert up["admissionChecksStrategy"] == {"admissionChecks": [{"name": "prov"}, {"name": "multikueue"}]}
    assert "admissionChecks" not in up
    assert up["flavorFungibility"] == {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"}
    # back down, the names come back as the equivalent strategy (Kueue's v1beta1 reads either)
    down = convert(convert(cq, HUB), SPOKE)["spec"]
    assert down["admissionChecksStrategy"] == up["admissionChecksStrategy"]
    assert down["cohort"] == "research"


def test_fields_one_version_lacks_are_dropped_as_kueue_drops_them() -> None:
    cq = copy.deepcopy(V1BETA2["ClusterQueue"])
    cq["spec"]["concurrentAdmissionPolicy"] = {"migration": {"mode": "Off"}}
    assert "concurrentAdmissionPolicy" not in convert(cq, SPOKE)["spec"]
    old = copy.deepcopy(V1BETA1["ClusterQueue"])
    old["status"]["pendingWorkloadsStatus"] = {"clusterQueuePendingWorkload": [], "lastChangeTime": "x"}
    old["status"]["fairSharing"]["admissionFairSharingStatus"] = {"consumedResources": {"cpu": "1"}}
    status = convert(old, HUB)["status"]
    assert "pendingWorkloadsStatus" not in status
    assert status["fairSharing"] == {"weightedShare": 250}
    wl = copy.deepcopy(V1BETA2["Workload"])
    wl["spec"]["preemptionGates"] = [{"name": "gate"}]
    wl["status"]["preemptionGates"] = [{"name": "gate", "position": "Closed", "lastTransitionTime": "x"}]
    constraint = [{"topology": "rack", "size": 2}]
    wl["spec"]["podSets"][0]["topologyRequest"]["podsetSliceRequiredTopologyConstraints"] = constraint
    down = convert(wl, SPOKE)
    assert "preemptionGates" not in down["spec"]
    assert "preemptionGates" not in down["status"]
    assert down["spec"]["podSets"][0]["topologyRequest"] == {"preferred": "cloud.provider.com/topology-rack"}
    lq = copy.deepcopy(V1BETA1["LocalQueue"])
    lq["status"]["flavors"] = [{"name": "a100", "resources": ["nvidia.com/gpu"]}]
    assert "flavors" not in convert(lq, HUB)["status"]


@pytest.mark.parametrize(
    ("source", "ref"),
    [
        (
            "kueue.x-k8s.io/workloadpriorityclass",
            {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass"},
        ),
        ("scheduling.k8s.io/priorityclass", {"group": "scheduling.k8s.io", "kind": "PriorityClass"}),
    ],
)
def test_workload_priority_class_both_sources(source: str, ref: dict[str, str]) -> None:
    wl = copy.deepcopy(V1BETA1["Workload"])
    wl["spec"]["priorityClassSource"] = source
    up = convert(wl, HUB)["spec"]
    assert up["priorityClassRef"] == {**ref, "name": "high"}
    assert "priorityClassName" not in up
    assert "priorityClassSource" not in up
    down = convert(convert(wl, HUB), SPOKE)["spec"]
    assert (down["priorityClassName"], down["priorityClassSource"]) == ("high", source)


def test_a_priority_class_name_without_a_source_is_dropped_as_kueue_drops_it() -> None:
    wl = copy.deepcopy(V1BETA1["Workload"])
    wl["spec"]["priorityClassSource"] = ""
    assert "priorityClassRef" not in convert(wl, HUB)["spec"]


def test_topology_assignment_with_no_domains() -> None:
    wl = copy.deepcopy(V1BETA1["Workload"])
    topology = wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    topology["domains"] = []
    up = convert(wl, HUB)["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    assert up == {"levels": topology["levels"]}
    back = convert(convert(wl, HUB), SPOKE)
    assert back["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"] == topology


def test_several_v1beta2_slices_come_down_as_their_domains_in_order() -> None:
    wl = copy.deepcopy(V1BETA2["Workload"])
    topology = wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    topology["slices"].append(
        {
            "domainCount": 1,
            "valuesPerLevel": [{"universal": "block-2"}, {"universal": "rack-9"}],
            "podCounts": {"universal": 3},
        }
    )
    down = convert(wl, SPOKE)["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    assert down["domains"][-1] == {"values": ["block-2", "rack-9"], "count": 3}
    assert [d["count"] for d in down["domains"]] == [2, 1, 1, 3]
