"""Plain pod groups (framework pod) through the runtime with the in-memory API (finalizers
honoured), as Kueue v0.18.1 runs them: no Workload until the group is complete (a Warning
ErrWorkloadCompose meanwhile), then one Workload named after the group, owned by every pod, one
pod set per pod shape (role hash) charged through deviceClassMappings; admission ungates each
pod with its role's flavor; an eviction marks the running pods TerminationTarget and deletes
them, the quota kept until none runs; a failed pod is replaced; excess pods are deleted; the end
lets go of every finalizer."""

from __future__ import annotations

from typing import Any

import msgspec

from reconciler.api.resources import (
    CLUSTER_QUEUES,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    WORKLOAD_PRIORITY_CLASSES,
    WORKLOADS,
)
from reconciler.integrations import PODSET_LABEL
from reconciler.integrations.pods.group import IS_GROUP_WORKLOAD_ANNOTATION, TERMINATION_TARGET
from reconciler.integrations.pods.pod import (
    ADMISSION_GATE,
    GROUP_NAME_LABEL,
    GROUP_TOTAL_COUNT_ANNOTATION,
    POD_FINALIZER,
    ROLE_HASH_ANNOTATION,
    TOPOLOGY_GATE,
)
from reconciler.runtime.jobs.podgroups import QUIET_SECONDS
from reconciler.runtime.shared.actions import WriteDone
from tests.support.builders import cluster_queue_body
from tests.support.memory_cluster import GPU, Cluster
from tests.support.pod_queues import TAINT, condition, gates, pod_cluster, queues
from tests.support.pods import pod_body, stored_pod

READY = [{"type": "Ready", "status": "True"}]


def group_pod(name: str, *, total: int = 2, claim: str = "gpu-a", cpu: str = "1") -> dict[str, Any]:
    """A pod of group `g` as the pod webhook stores it (gated, managed, finalizer, role hash)."""
    body = pod_body(name, claim_template=claim, cpu=cpu)
    body["metadata"]["labels"][GROUP_NAME_LABEL] = "g"
    body["metadata"]["annotations"] = {GROUP_TOTAL_COUNT_ANNOTATION: str(total)}
    return stored_pod(body)


def workload(c: Cluster) -> dict[str, Any]:
    return c.api.get(WORKLOADS, "ns", "g")


def has_workload(c: Cluster) -> bool:
    return ("workloads", "ns", "g") in c.api.objects


def role(c: Cluster, name: str) -> str:
    return str(c.pod(name)["metadata"]["annotations"][ROLE_HASH_ANNOTATION])


def events(c: Cluster, name: str) -> list[tuple[str, str, str]]:
    return [
        (e["type"], e["reason"], e["message"]) for e in c.api.events if e["involvedObject"]["name"] == name
    ]


def running(c: Cluster, *names: str) -> None:
    for name in names:
        c.api.change(PODS, "ns", name, {"status": {"phase": "Running", "conditions": READY}})
    c.settle()


TOLD = ("Warning", "ErrWorkloadCompose", "'g' group has fewer runnable pods than expected")


def test_a_group_whose_pods_come_one_after_the_other_is_not_told_it_lacks_pods() -> None:
    """Kueue gives no ErrWorkloadCompose to a group applied in one go; a pod joining in time
    starts the wait again, and the warning comes only once the group stays short."""
    c = pod_cluster()
    queues(c, gpus=3)
    start = c.now
    c.api.add(PODS, group_pod("p1", total=3))
    c.settle()
    c.tick(start + 0.6 * QUIET_SECONDS)
    c.api.add(PODS, group_pod("p2", total=3))
    c.settle()
    c.tick(start + 1.2 * QUIET_SECONDS)  # past p1's wait, not p2's
    assert events(c, "p1") == []
    c.tick(start + 1.7 * QUIET_SECONDS)
    assert events(c, "p1") == [TOLD]
    c.api.add(PODS, group_pod("p3", total=3))
    c.settle()
    assert has_workload(c)
    assert events(c, "p1").count(TOLD) == 1


def test_a_group_applied_at_once_gets_its_workload_without_a_warning() -> None:
    c = pod_cluster()
    queues(c, gpus=2)
    c.api.add(PODS, group_pod("p1"))
    c.settle()
    c.api.add(PODS, group_pod("p2"))
    c.settle()
    c.tick(c.now + 2 * QUIET_SECONDS)
    assert has_workload(c)
    assert [e for e in c.api.events if e["reason"] == "ErrWorkloadCompose"] == []


def test_a_group_created_pod_by_pod_gets_one_workload_when_complete_and_runs_to_its_end() -> None:
    c = pod_cluster()
    queues(c, gpus=2)
    c.api.add(PODS, group_pod("p1"))
    c.settle()
    assert not has_workload(c)  # Kueue waits for the whole group
    assert gates(c.pod("p1")) == [ADMISSION_GATE, TOPOLOGY_GATE]
    assert events(c, "p1") == []  # not yet: the group's next pod may be on its way
    c.tick(c.now + QUIET_SECONDS)  # no pod joined meanwhile: the group is told what it lacks
    assert events(c, "p1") == [TOLD]
    c.api.add(PODS, group_pod("p2"))
    c.settle()
    wl = workload(c)
    assert wl["metadata"]["annotations"] == {IS_GROUP_WORKLOAD_ANNOTATION: "true"}
    owners = [(r["kind"], r["name"], r.get("controller")) for r in wl["metadata"]["ownerReferences"]]
    assert owners == [("Pod", "p1", None), ("Pod", "p2", None)]  # owned by each, controlled by none
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == [(role(c, "p1"), 2)]
    (assignment,) = wl["status"]["admission"]["podSetAssignments"]
    assert assignment["resourceUsage"] == {"cpu": "2", GPU: "2"}  # each pod's claim, mapped
    assert c.used_gpus() == 2
    for name in ("p1", "p2"):
        pod = c.pod(name)
        assert gates(pod) == []
        assert pod["spec"]["nodeSelector"] == {"gpu": "t4"}
        assert pod["spec"]["tolerations"] == [TAINT]
        assert pod["metadata"]["labels"][PODSET_LABEL] == role(c, name)
    assert events(c, "p1")[1:] == [
        ("Normal", "CreatedWorkload", "Created Workload: ns/g"),
        ("Normal", "Started", "Admitted by clusterQueue cq"),
    ]
    assert events(c, "p2") == [("Normal", "Started", "Admitted by clusterQueue cq")]
    running(c, "p1")
    ready = condition(workload(c), "PodsReady")
    assert ready is not None
    assert ready["status"] == "False"  # one pod is not the group
    running(c, "p2")
    ready = condition(workload(c), "PodsReady")
    assert ready is not None
    assert ready["status"] == "True"
    c.api.change(PODS, "ns", "p1", {"status": {"phase": "Succeeded"}})
    c.settle()
    assert condition(workload(c), "Finished") is None
    assert c.pod("p1")["metadata"]["finalizers"] == [POD_FINALIZER]
    c.api.change(PODS, "ns", "p2", {"status": {"phase": "Succeeded"}})
    c.settle()
    finished = condition(workload(c), "Finished")
    assert finished is not None
    assert (finished["status"], finished["reason"], finished["message"]) == (
        "True",
        "Succeeded",
        "Pods succeeded: 2/2.",
    )
    assert c.used_gpus() == 0
    assert [c.pod(n)["metadata"]["finalizers"] for n in ("p1", "p2")] == [[], []]


def test_a_two_shape_group_has_a_pod_set_per_shape_each_charged_through_its_claims() -> None:
    c = pod_cluster()
    queues(c, gpus=8)
    request = {"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}}
    template = {
        "metadata": {"name": "gpu-b", "namespace": "ns"},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }
    c.api.add(RESOURCE_CLAIM_TEMPLATES, template)
    c.api.add(PODS, group_pod("worker-1", total=3))
    c.api.add(PODS, group_pod("worker-2", total=3))
    c.api.add(PODS, group_pod("leader", total=3, claim="gpu-b", cpu="2"))
    c.settle()
    wl = workload(c)
    worker, leader = role(c, "worker-1"), role(c, "leader")
    assert worker != leader
    assert role(c, "worker-2") == worker
    sets = sorted([(worker, 2), (leader, 1)])
    assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == sets
    usage = {a["name"]: a["resourceUsage"] for a in wl["status"]["admission"]["podSetAssignments"]}
    assert usage == {worker: {"cpu": "2", GPU: "2"}, leader: {"cpu": "2", GPU: "2"}}
    assert c.used_gpus() == 4
    for name in ("worker-1", "worker-2", "leader"):
        assert gates(c.pod(name)) == []
        assert c.pod(name)["metadata"]["labels"][PODSET_LABEL] == role(c, name)


def stopped(c: Cluster, *names: str) -> None:
    """The kubelet has stopped the (deleted) pods: no longer Running."""
    for name in names:
        c.api.change(PODS, "ns", name, {"status": {"phase": "Failed"}})
    c.settle()


def test_a_pods_ready_timeout_marks_the_running_pods_termination_target_and_deletes_them() -> None:
    c = pod_cluster()
    queues(c, gpus=2)
    c.api.add(PODS, group_pod("p1"))
    c.api.add(PODS, group_pod("p2"))
    c.settle()
    running(c, "p1")  # p2 never gets ready
    c.api.change(PODS, "ns", "p2", {"status": {"phase": "Running"}})
    c.settle()
    c.now += 61
    c.reconciler.flush_status()
    c.settle()
    evicted = condition(workload(c), "Evicted")
    assert evicted is not None
    assert evicted["reason"] == "PodsReadyTimeout"
    assert c.used_gpus() == 2  # its pods still run: the quota is kept until they stop (Kueue)
    for name in ("p1", "p2"):
        pod = c.pod(name)
        target = condition(pod, TERMINATION_TARGET)
        assert target is not None
        assert (target["status"], target["reason"], target["message"]) == (
            "True",
            "WorkloadEvictedDueToPodsReadyTimeout",
            evicted["message"],
        )
        assert pod["metadata"]["deletionTimestamp"]  # deleted; Kueue's finalizer holds it
        assert events(c, name)[-1] == ("Normal", "Stopped", evicted["message"])
    # Both gone from the group: the Workload waits for their replacements, saying why.
    waiting = condition(workload(c), "WaitingForReplacementPods")
    assert waiting is not None
    assert (waiting["status"], waiting["reason"]) == ("True", "PodsReadyTimeout")
    stopped(c, "p1", "p2")
    assert c.used_gpus() == 0
    reserved = condition(workload(c), "QuotaReserved")
    assert reserved is not None
    assert (reserved["status"], reserved["reason"], reserved["message"]) == (
        "False",
        "Pending",
        evicted["message"],
    )


def test_a_higher_priority_workload_preempts_the_group_whose_pods_are_deleted() -> None:
    c = pod_cluster()
    queues(c, gpus=2)
    body = cluster_queue_body("cq", [("t4", {"cpu": 10, GPU: 2})])
    body["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    c.api.change(CLUSTER_QUEUES, "", "cq", {"spec": body["spec"]})
    c.api.add(PODS, group_pod("p1"))
    c.api.add(PODS, group_pod("p2"))
    c.settle()
    running(c, "p1", "p2")
    c.api.add(WORKLOAD_PRIORITY_CLASSES, {"metadata": {"name": "high"}, "value": 1000})
    urgent = pod_body("urgent")
    urgent["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "high"
    c.api.add(PODS, stored_pod(urgent))
    c.settle()
    preempted = condition(workload(c), "Evicted")
    assert preempted is not None
    assert preempted["reason"] == "Preempted"
    for name in ("p1", "p2"):
        target = condition(c.pod(name), TERMINATION_TARGET)
        assert target is not None
        assert (target["reason"], target["message"]) == (
            "WorkloadEvictedDueToPreempted",
            preempted["message"],
        )
        assert c.pod(name)["metadata"]["deletionTimestamp"]
    # Deleted but still running (Kueue's finalizer holds them): the group keeps its quota.
    assert ADMISSION_GATE in gates(c.pod("urgent"))
    assert c.used_gpus() == 2
    stopped(c, "p1", "p2")
    assert gates(c.pod("urgent")) == []  # the quota went to the preemptor


def test_a_failed_pod_is_replaced_and_the_replacement_starts_on_the_admitted_workload() -> None:
    c = pod_cluster()
    queues(c, gpus=3)
    c.api.add(PODS, group_pod("p1"))
    c.api.add(PODS, group_pod("p2"))
    c.settle()
    running(c, "p1", "p2")
    c.api.change(PODS, "ns", "p2", {"status": {"phase": "Failed"}})
    c.settle()
    waiting = condition(workload(c), "WaitingForReplacementPods")
    assert waiting is not None
    assert (waiting["status"], waiting["reason"], waiting["message"]) == (
        "True",
        "PodsFailed",
        "Some Failed pods need replacement",
    )
    assert c.pod("p2")["metadata"]["finalizers"] == [POD_FINALIZER]  # kept until replaced
    c.api.add(PODS, group_pod("p3"))
    c.settle()
    assert c.pod("p2")["metadata"]["finalizers"] == []  # replaced: let go
    wl = workload(c)
    assert [r["name"] for r in wl["metadata"]["ownerReferences"]] == ["p1", "p2", "p3"]
    waiting = condition(wl, "WaitingForReplacementPods")
    assert waiting is not None
    assert (waiting["status"], waiting["reason"]) == ("False", "PodsReady")
    assert gates(c.pod("p3")) == []
    assert c.pod("p3")["spec"]["nodeSelector"] == {"gpu": "t4"}
    assert c.used_gpus() == 2  # the Workload's quota, unchanged


def test_pods_beyond_the_total_count_are_deleted_as_excess() -> None:
    c = pod_cluster()
    queues(c, gpus=4)
    for name in ("p1", "p2"):
        c.api.add(PODS, group_pod(name))
    c.now += 1
    c.api.add(PODS, group_pod("p3"))  # the newest: the one Kueue lets go
    c.settle()
    assert ("pods", "ns", "p3") not in c.api.objects
    assert events(c, "p3") == [("Normal", "ExcessPodDeleted", "Excess pod deleted")]
    wl = workload(c)
    assert [r["name"] for r in wl["metadata"]["ownerReferences"]] == ["p1", "p2"]
    assert [ps["count"] for ps in wl["spec"]["podSets"]] == [2]


def test_a_deleted_group_workload_deletes_and_lets_go_of_every_pod() -> None:
    c = pod_cluster()
    queues(c, gpus=0)
    c.api.add(PODS, group_pod("p1"))
    c.api.add(PODS, group_pod("p2"))
    c.settle()
    assert gates(c.pod("p1")) == [ADMISSION_GATE, TOPOLOGY_GATE]  # no quota: waits
    c.api.delete(WORKLOADS, "ns", "g")
    c.settle()
    assert ("pods", "ns", "p1") not in c.api.objects
    assert ("pods", "ns", "p2") not in c.api.objects
    assert events(c, "p2")[-1] == ("Normal", "Stopped", "Workload is deleted")


def test_a_running_groups_excess_pod_made_by_another_controller_is_deleted_not_an_overrun() -> None:
    """Pods of a group made by a controller of their own (a StatefulSet): a third pod while the
    two-pod group runs is Kueue's excess pod, deleted; the Workload is not evicted for running
    more than charged (that rule is for a job's children, not for a pod group's members)."""
    c = pod_cluster()
    queues(c, gpus=4)
    owner = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "name": "web",
        "uid": "web-uid",
        "controller": True,
    }
    for name in ("p1", "p2"):
        body = group_pod(name)
        body["metadata"]["ownerReferences"] = [owner]
        c.api.add(PODS, body)
    c.settle()
    running(c, "p1", "p2")
    c.now += 1
    extra = group_pod("p3")
    extra["metadata"]["ownerReferences"] = [owner]
    extra["status"] = {"phase": "Pending"}
    c.api.add(PODS, extra)
    c.settle()
    assert ("pods", "ns", "p3") not in c.api.objects
    assert events(c, "p3") == [("Normal", "ExcessPodDeleted", "Excess pod deleted")]
    assert condition(workload(c), "Evicted") is None
    assert c.used_gpus() == 2


def test_a_deleted_running_pod_keeps_its_finalizer_and_the_group_its_quota_until_replaced() -> None:
    """Kueue v0.18.1's replacement rules for a pod deleted by a user (issue 42, item 2): a
    deleted pod on a node still counts while it runs; once terminated it is missing, the
    Workload stays admitted with its quota and WaitingForReplacementPods=True, and the pod stays
    behind its finalizer until a pod of its shape replaces it."""
    c = pod_cluster()
    queues(c, gpus=3)
    c.api.add(PODS, group_pod("p1"))
    c.api.add(PODS, group_pod("p2"))
    c.settle()
    for name in ("p1", "p2"):
        c.api.change(PODS, "ns", name, {"spec": {"nodeName": "node-1"}})
    running(c, "p1", "p2")
    c.api.delete(PODS, "ns", "p2")
    c.settle()
    p2 = c.pod("p2")
    assert p2["metadata"]["deletionTimestamp"]
    assert p2["metadata"]["finalizers"] == [POD_FINALIZER]  # Kueue's finalizer holds it
    assert condition(workload(c), "WaitingForReplacementPods") is None  # on a node, still running
    stopped_phase = {"phase": "Failed", "conditions": [{"type": "Ready", "status": "False"}]}
    c.api.change(PODS, "ns", "p2", {"status": stopped_phase})  # the kubelet stops it
    c.settle()
    waiting = condition(workload(c), "WaitingForReplacementPods")
    assert waiting is not None
    assert (waiting["status"], waiting["reason"]) == ("True", "PodsFailed")
    ready = condition(workload(c), "PodsReady")
    assert ready is not None
    assert (ready["status"], ready["reason"]) == ("False", "WaitForRecovery")
    assert c.pod("p2")["metadata"]["finalizers"] == [POD_FINALIZER]  # kept until replaced
    assert condition(workload(c), "Finished") is None
    assert c.used_gpus() == 2  # the group keeps its quota
    c.api.add(PODS, group_pod("p3"))
    c.settle()
    assert ("pods", "ns", "p2") not in c.api.objects  # replaced: let go, so the API removes it
    waiting = condition(workload(c), "WaitingForReplacementPods")
    assert waiting is not None
    assert (waiting["status"], waiting["reason"]) == ("False", "PodsReady")
    assert gates(c.pod("p3")) == []
    assert c.used_gpus() == 2


def test_owners_added_are_told_even_when_the_watch_shows_the_write_before_its_response() -> None:
    """The Workload's OwnerReferencesAdded Event is posted for a write that landed, also when
    the watch delivered its new version first (the response is then stale and not applied)."""
    c = pod_cluster()
    queues(c, gpus=3)
    c.api.add(PODS, group_pod("p1"))
    c.api.add(PODS, group_pod("p2"))
    c.settle()
    running(c, "p1", "p2")
    c.api.change(PODS, "ns", "p2", {"status": {"phase": "Failed"}})
    c.settle()
    perform = c.api.perform

    def watch_first(action: Any) -> None:
        if getattr(action, "purpose", "") != "workload-owners":
            perform(action)
            return
        before = c.api.get(WORKLOADS, "ns", "g")
        c.api.change(WORKLOADS, "ns", "g", msgspec.json.decode(action.patch))  # the watch sees it
        after = c.api.get(WORKLOADS, "ns", "g")
        assert after["metadata"]["resourceVersion"] != before["metadata"]["resourceVersion"]
        c.reconciler.handle(WriteDone(action, body=msgspec.json.encode(after)))

    c.api.perform = watch_first  # type: ignore[method-assign]
    c.api.add(PODS, group_pod("p3"))
    c.settle()
    assert [r["name"] for r in workload(c)["metadata"]["ownerReferences"]] == ["p1", "p2", "p3"]
    assert ("Normal", "OwnerReferencesAdded", "Added 1 owner reference(s)") in events(c, "g")
