"""`reconciler simulate` with LeaderWorkerSets: a set arrives as its groups, one Workload each
with a `leader` and a `worker` pod set, as the controller's reconciler makes and admits them for
the same objects; examples/lws/ simulates as real Kueue v0.18.1 admitted it (the conformance
recording lws-two-groups)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.api.resources import (
    CLUSTER_QUEUES,
    LOCAL_QUEUES,
    NAMESPACES,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_FLAVORS,
    Resource,
)
from reconciler.cli import main
from reconciler.simulate import InputObject, simulate
from tests.support.builders import cluster_queue_body
from tests.support.lws import lws_body, stored_lws
from tests.support.lws_cluster import lws_cluster
from tests.support.memory_cluster import GPU
from tests.support.pod_queues import TAINT

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "lws"
RECORDED = ROOT / "e2e" / "conformance" / "recorded" / "lws-two-groups.yaml"
INDEX = "kueue.x-k8s.io/component-workload-index"
FRAMEWORKS = ("batch/job", "leaderworkerset.x-k8s.io/leaderworkerset")
Obj = dict[str, Any]


def _queues(gpus: int) -> list[tuple[Resource, Obj]]:
    """As tests.integrations.test_pod_runtime.queues makes them, with their kinds (for simulate)."""
    flavor = {"nodeLabels": {"gpu": "t4"}, "tolerations": [TAINT]}
    request = {"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}}
    return [
        (NAMESPACES, {"metadata": {"name": "ns", "labels": {"kubernetes.io/metadata.name": "ns"}}}),
        (RESOURCE_FLAVORS, {"metadata": {"name": "t4"}, "spec": flavor}),
        (CLUSTER_QUEUES, cluster_queue_body("cq", [("t4", {"cpu": 10, GPU: gpus})])),
        (LOCAL_QUEUES, {"metadata": {"name": "lq", "namespace": "ns"}, "spec": {"clusterQueue": "cq"}}),
        (
            RESOURCE_CLAIM_TEMPLATES,
            {
                "metadata": {"name": "gpu-a", "namespace": "ns"},
                "spec": {"spec": {"devices": {"requests": [request]}}},
            },
        ),
    ]


_KINDS = {
    NAMESPACES.plural: ("v1", "Namespace"),
    RESOURCE_FLAVORS.plural: ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"),
    CLUSTER_QUEUES.plural: ("kueue.x-k8s.io/v1beta2", "ClusterQueue"),
    LOCAL_QUEUES.plural: ("kueue.x-k8s.io/v1beta2", "LocalQueue"),
    RESOURCE_CLAIM_TEMPLATES.plural: ("resource.k8s.io/v1", "ResourceClaimTemplate"),
}


def _admissions(workloads: list[Obj]) -> dict[str, Obj]:
    """By group index: the admission, or the QuotaReserved condition's reason and message."""
    out = {}
    for wl in workloads:
        status = wl.get("status") or {}
        reserved = next(c for c in status["conditions"] if c["type"] == "QuotaReserved")
        shown = {
            "podSets": [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]],
            # the set (live, the group's pods follow it: offline there are none)
            "owner": [(r["kind"], r["name"]) for r in wl["metadata"]["ownerReferences"][:1]],
            "admission": status.get("admission"),
            "reserved": (reserved["status"], reserved["reason"], reserved["message"]),
        }
        out[wl["metadata"]["annotations"][INDEX]] = shown
    return out


def through_controller(gpus: int, replicas: int) -> dict[str, Obj]:
    """The set's groups' Workloads once the controller's reconciler has settled (the LWS
    controller's pods of every group there, as the pod webhook stores them)."""
    c = lws_cluster()
    for resource, body in _queues(gpus):
        c.api.add(resource, copy.deepcopy(body))
    c.api.sync()
    c.add_set("a", replicas=replicas)
    c.settle()
    return _admissions([body for (plural, _, _), body in c.api.objects.items() if plural == "workloads"])


def through_simulate(gpus: int, replicas: int) -> dict[str, Obj]:
    docs = [{"apiVersion": _KINDS[r.plural][0], "kind": _KINDS[r.plural][1], **b} for r, b in _queues(gpus)]
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        **lws_body("a", replicas=replicas),
    }
    docs.append(stored_lws(lws))
    objects = [InputObject(f"#{i}", d) for i, d in enumerate(docs)]
    result = simulate(objects, {"gpu.nvidia.com": GPU}, "2026-01-01T00:00:00Z", frameworks=FRAMEWORKS)
    return _admissions(result.workloads)


def _by_outcome(shown: dict[str, Obj]) -> list[str]:
    """The groups' Workloads as shown, in a stable order, whichever group got which outcome."""
    return sorted(repr(value) for value in shown.values())


@pytest.mark.parametrize(("gpus", "replicas"), [(2, 2), (4, 2), (4, 3), (6, 3), (1, 1)])
def test_simulate_admits_a_sets_groups_as_the_controller_does(gpus: int, replicas: int) -> None:
    live = through_controller(gpus, replicas)
    offline = through_simulate(gpus, replicas)
    assert sorted(live) == sorted(offline) == [str(i) for i in range(replicas)]  # a Workload per group
    # The same admissions and the same waiting messages. Which of equal groups (created in the
    # same second) goes first is the Workloads' UIDs' order, live as in Kueue; offline, where
    # there are no UIDs, group 0 goes first.
    assert _by_outcome(offline) == _by_outcome(live)
    if all(shown["admission"] is not None for shown in live.values()):
        assert offline == live
    admitted = [i for i, shown in live.items() if shown["admission"] is not None]
    assert len(admitted) == min(replicas, gpus // 2)  # each group: a leader and a worker, a GPU each


def test_a_two_group_set_with_quota_for_one_shows_kueues_message() -> None:
    offline = through_simulate(2, 2)
    assert offline["0"]["podSets"] == [("leader", 1), ("worker", 1)]
    assert offline["0"]["owner"] == [("LeaderWorkerSet", "a")]
    assert offline["0"]["admission"]["podSetAssignments"][0]["resourceUsage"] == {"cpu": "1", GPU: "1"}
    assert offline["1"]["reserved"] == (
        "False",
        "Pending",
        "couldn't assign flavors to pod set leader: insufficient unused quota for nvidia.com/gpu in "
        "flavor t4, 1 more needed; couldn't assign flavors to pod set worker: insufficient unused "
        "quota for nvidia.com/gpu in flavor t4, 2 more needed",  # both pod sets' GPUs, as Kueue counts
    )


def _simulate_example(capsys: pytest.CaptureFixture[str]) -> list[Obj]:
    args = [
        "simulate",
        "--config",
        str(EXAMPLES / "00-configuration.yaml"),
        "-o",
        "yaml",
        "-f",
        str(EXAMPLES),
    ]
    assert main(args) == 0
    return [o for o in yaml.safe_load_all(capsys.readouterr().out) if o and o["kind"] == "Workload"]


def test_the_example_simulates_as_kueue_admitted_it(capsys: pytest.CaptureFixture[str]) -> None:
    shown = _admissions(_simulate_example(capsys))
    assert sorted(shown) == ["0", "1"]
    assert shown["0"]["podSets"] == [("leader", 1), ("worker", 2)]
    # Kueue's recorded checkpoint: one group admitted, the other waiting (which one varies).
    results = yaml.safe_load(RECORDED.read_text())["results"]
    matched = []
    for result in results:
        kueue = result["checkpoints"]["one-group-admitted-one-pending"]
        key = "Workload[p3-lws-demo/LeaderWorkerSet/serve/{}]"
        admitted = [i for i in "01" if kueue[f"{key.format(i)}.admission"] is not None]
        if admitted != ["0"]:
            continue  # simulate admits in creation order: group 0 first
        assert shown["0"]["admission"] == kueue[f"{key.format('0')}.admission"]
        status, rest = kueue[f"{key.format('1')}.conditions.QuotaReserved"].split(" ", 1)
        reason, message = rest.split(": ", 1)
        assert shown["1"]["reserved"] == (status, reason, message)
        matched.append(result)
    assert matched, "no recorded run of Kueue admitted group 0 first"
