"""LeaderWorkerSets (framework leaderworkerset.x-k8s.io/leaderworkerset) through the runtime with
the in-memory API: a Workload per group with a leader and a worker pod set, each pod's claim
charged per pod set; admission ungates the leader and the workers with their flavor; a second
group waits for quota with Kueue's message; scaling up adds a group's Workload, scaling down
deletes it; an evicted group's running pods are deleted."""

from __future__ import annotations

from typing import Any

from reconciler.api.resources import LEADERWORKERSETS, PODS, WORKLOADS
from reconciler.integrations import PODSET_LABEL
from reconciler.integrations.lws.group import workload_name
from reconciler.integrations.pods.pod import ADMISSION_GATE, TOPOLOGY_GATE
from reconciler.runtime.shared.actions import Delete
from tests.support.lws_cluster import lws_cluster
from tests.support.memory_cluster import GPU
from tests.support.pod_queues import TAINT, condition, gates, queues


def _admitted(workload: dict[str, Any] | None) -> bool:
    assert workload is not None
    admitted = condition(workload, "Admitted")
    return admitted is not None and admitted["status"] == "True"


def test_one_group_gets_a_workload_of_a_leader_and_a_worker_and_is_ungated_on_admission() -> None:
    c = lws_cluster()
    queues(c, gpus=2)
    lws = c.add_set("a")
    assert gates(c.pod("a-0")) == [ADMISSION_GATE, TOPOLOGY_GATE]
    assert gates(c.pod("a-0-1")) == [ADMISSION_GATE, TOPOLOGY_GATE]
    assert "finalizers" not in c.pod("a-0")["metadata"]  # the set is Kueue's parent: no finalizer
    c.settle()
    workload = c.group_workload(lws, 0)
    assert workload is not None
    assert workload["metadata"]["name"].startswith("leaderworkerset-a-0-")
    owner, *pods = workload["metadata"]["ownerReferences"]  # the set, then the group's pods (Kueue's)
    assert (owner["kind"], owner["name"], owner.get("controller")) == ("LeaderWorkerSet", "a", None)
    assert [(p["kind"], p["name"]) for p in pods] == [("Pod", "a-0"), ("Pod", "a-0-1")]
    assert workload["metadata"]["annotations"]["kueue.x-k8s.io/component-workload-index"] == "0"
    assert [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]] == [("leader", 1), ("worker", 1)]
    usage = [a["resourceUsage"] for a in workload["status"]["admission"]["podSetAssignments"]]
    assert usage == [{"cpu": "1", GPU: "1"}, {"cpu": "1", GPU: "1"}]  # each role's claim, per pod set
    assert c.used_gpus() == 2
    for name, role in (("a-0", "leader"), ("a-0-1", "worker")):
        pod = c.pod(name)
        assert gates(pod) == []
        assert pod["spec"]["nodeSelector"] == {"gpu": "t4"}
        assert pod["spec"]["tolerations"] == [TAINT]
        assert pod["metadata"]["labels"][PODSET_LABEL] == role
        assert pod["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] == workload["metadata"]["name"]
        assert pod["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"] == role
    assert c.api.reasons("LeaderWorkerSet", "a") == ["CreatedWorkload"]
    assert "OwnerReferencesAdded" in c.api.reasons("Workload", workload["metadata"]["name"])


def test_two_groups_get_two_workloads_the_second_waits_with_kueues_message() -> None:
    c = lws_cluster()
    queues(c, gpus=2)
    lws = c.add_set("a", replicas=2)
    c.settle()
    workloads = [c.group_workload(lws, 0), c.group_workload(lws, 1)]
    assert len({w["metadata"]["name"] for w in workloads if w is not None}) == 2
    admitted = [i for i in (0, 1) if _admitted(workloads[i])]
    assert len(admitted) == 1  # two GPUs: one group of a leader and a worker
    waiting = 1 - admitted[0]
    second = workloads[waiting]
    assert second is not None
    reserved = condition(second, "QuotaReserved")
    assert reserved is not None
    assert (reserved["status"], reserved["reason"]) == ("False", "Pending")
    assert reserved["message"] == (
        "couldn't assign flavors to pod set leader: insufficient unused quota for nvidia.com/gpu "
        "in flavor t4, 1 more needed; couldn't assign flavors to pod set worker: insufficient "
        "unused quota for nvidia.com/gpu in flavor t4, 2 more needed"
    )
    assert gates(c.pod(f"a-{waiting}")) == [ADMISSION_GATE, TOPOLOGY_GATE]
    assert gates(c.pod(f"a-{waiting}-1")) == [ADMISSION_GATE, TOPOLOGY_GATE]
    assert gates(c.pod(f"a-{admitted[0]}-1")) == []
    assert c.used_gpus() == 2


def test_scale_up_adds_a_groups_workload_and_scale_down_deletes_it_freeing_quota() -> None:
    c = lws_cluster()
    queues(c, gpus=4)
    lws = c.add_set("a")
    c.settle()
    c.api.change(LEADERWORKERSETS, "ns", "a", {"spec": {"replicas": 2}})
    c.add_group(lws, 1)
    c.settle()
    assert _admitted(c.group_workload(lws, 1))
    assert gates(c.pod("a-1-1")) == []
    assert c.used_gpus() == 4
    c.api.change(LEADERWORKERSETS, "ns", "a", {"spec": {"replicas": 1}})
    performed = c.settle()
    assert [a.name for a in performed if isinstance(a, Delete) and a.purpose == "delete-workload"] == [
        workload_name("a", lws["metadata"]["uid"], 1)
    ]
    assert c.group_workload(lws, 1) is None
    assert c.group_workload(lws, 0) is not None
    assert c.used_gpus() == 2


def test_an_evicted_group_has_its_running_pods_deleted_and_its_quota_returned() -> None:
    c = lws_cluster()
    queues(c, gpus=2)
    lws = c.add_set("a")
    c.settle()
    for name in ("a-0", "a-0-1"):
        c.api.change(PODS, "ns", name, {"status": {"phase": "Running"}})
    c.settle()
    workload = c.group_workload(lws, 0)
    assert workload is not None
    c.api.change(WORKLOADS, "ns", workload["metadata"]["name"], {"spec": {"active": False}})
    performed = c.settle()
    assert sorted(a.name for a in performed if isinstance(a, Delete) and a.purpose == "job-delete") == [
        "a-0",
        "a-0-1",
    ]
    assert ("pods", "ns", "a-0") not in c.api.objects
    assert c.used_gpus() == 0
    # The LWS controller recreates the group: its pods wait at the gate again.
    c.add_group(lws, 0)
    c.settle()
    assert gates(c.pod("a-0")) == [ADMISSION_GATE, TOPOLOGY_GATE]
    assert gates(c.pod("a-0-1")) == [ADMISSION_GATE, TOPOLOGY_GATE]


def test_deleting_a_set_frees_its_quota_for_the_next() -> None:
    c = lws_cluster()
    queues(c, gpus=2)
    c.add_set("a")
    c.settle()
    second = c.add_set("b")
    c.settle()
    assert not _admitted(c.group_workload(second, 0))
    c.api.delete(LEADERWORKERSETS, "ns", "a")
    for name in ("a-0", "a-0-1"):
        c.api.delete(PODS, "ns", name)
    c.settle()
    assert _admitted(c.group_workload(second, 0))
    assert gates(c.pod("b-0")) == []
