"""StatefulSets (framework statefulset, the pod integration implied) through the runtime with the
in-memory API, as Kueue v0.18.1: one Workload made from the set (one pod set `main` of
`replicas` pods, named for the set, owned by it and then by each pod), its pods given Kueue's
serving pod-group metadata, held at the gate until it is admitted and then ungated on their
flavor; a pod deleted and made again is ungated under the same Workload, which keeps its quota
meanwhile; a second set waits with Kueue's message; a set scaled to zero loses its Workload."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from reconciler.admission.queue_rules import JobPolicy
from reconciler.api.resources import PODS, STATEFULSETS, WORKLOADS
from reconciler.config import parse_config
from reconciler.core.model.workloads import workload_name_for_job
from reconciler.integrations import PODSET_LABEL
from reconciler.integrations.pods.pod import ADMISSION_GATE, TOPOLOGY_GATE
from reconciler.runtime.shared.actions import MergePatch
from tests.support.memory_cluster import GPU, Cluster
from tests.support.pod_queues import TAINT, condition, gates, queues
from tests.support.pods import pod_body, stored_pod

CONFIG = dataclasses.replace(
    parse_config(
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "integrations": {"frameworks": ["batch/job", "statefulset"]},
            "resources": {"deviceClassMappings": [{"name": GPU, "deviceClassNames": ["gpu.nvidia.com"]}]},
        }
    ),
)
POLICY = JobPolicy(frameworks=frozenset(CONFIG.frameworks), own_namespace="kueue-system")
PARENT = "kueue.x-k8s.io/pod-suspending-parent"
GROUP = "kueue.x-k8s.io/pod-group-name"


def sts_body(name: str, replicas: int) -> dict[str, Any]:
    template = {"metadata": {"annotations": {PARENT: "statefulset"}}, "spec": pod_body("x")["spec"]}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "labels": {"kueue.x-k8s.io/queue-name": "lq"},
        },
        "spec": {"replicas": replicas, "template": template},
    }


def replica(sts: dict[str, Any], index: int) -> dict[str, Any]:
    """A pod as the StatefulSet controller makes it from the marked template, through the pod webhook."""
    name = sts["metadata"]["name"]
    body = pod_body(f"{name}-{index}", queue=None)
    body["metadata"]["annotations"] = {PARENT: "statefulset"}
    body["metadata"]["labels"]["apps.kubernetes.io/pod-index"] = str(index)
    owner = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": name, "uid": sts["metadata"]["uid"]}
    body["metadata"]["ownerReferences"] = [{**owner, "controller": True}]
    body["metadata"]["uid"] = f"uid-{name}-{index}-{len(str(body))}"
    return stored_pod(body, POLICY)


def workload_of(c: Cluster, sts: dict[str, Any]) -> dict[str, Any] | None:
    name = workload_name_for_job(sts["metadata"]["name"], sts["metadata"]["uid"], "StatefulSet", "apps")
    found: dict[str, Any] | None = c.api.objects.get((WORKLOADS.plural, "ns", name))
    return found


def started_set(gpus: int = 2) -> tuple[Cluster, dict[str, Any]]:
    c = Cluster(CONFIG, finalizers=True)
    queues(c, gpus=gpus)
    sts = sts_body("web", 2)
    c.api.add(STATEFULSETS, sts)
    c.settle()
    for index in (0, 1):
        c.api.add(PODS, replica(sts, index))
        c.settle()
    return c, sts


def test_a_statefulset_is_one_serving_group_admitted_as_a_whole() -> None:
    c, sts = started_set()
    workload = workload_of(c, sts)
    assert workload is not None
    name = workload["metadata"]["name"]
    assert name.startswith("statefulset-web-")
    assert [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]] == [("main", 2)]
    owner, *pods = workload["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner.get("controller")) == ("StatefulSet", "web", None)
    assert sorted(p["name"] for p in pods) == ["web-0", "web-1"]
    annotations = workload["metadata"]["annotations"]
    assert annotations["kueue.x-k8s.io/is-group-workload"] == "true"
    assert annotations["kueue.x-k8s.io/job-owner-gvk"] == "apps/v1, Kind=StatefulSet"
    assert workload["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == "uid-web"
    (assignment,) = workload["status"]["admission"]["podSetAssignments"]
    assert assignment["resourceUsage"] == {"cpu": "2", GPU: "2"}
    assert c.used_gpus() == 2
    for index in (0, 1):
        pod = c.pod(f"web-{index}")
        assert gates(pod) == []
        assert pod["spec"]["nodeSelector"] == {"gpu": "t4"}
        assert pod["spec"]["tolerations"] == [TAINT]
        assert pod["metadata"]["labels"][PODSET_LABEL] == "main"
        assert pod["metadata"]["labels"]["kueue.x-k8s.io/managed"] == "true"
        assert pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "lq"
        meta = pod["metadata"]["annotations"]
        assert meta[GROUP] == meta["kueue.x-k8s.io/prebuilt-workload-name"] == name
        assert meta["kueue.x-k8s.io/pod-group-total-count"] == "2"
        assert meta["kueue.x-k8s.io/pod-group-serving"] == "true"
        assert meta["kueue.x-k8s.io/pod-group-fast-admission"] == "true"
        assert meta["kueue.x-k8s.io/role-hash"] == "main"
        assert "finalizers" not in pod["metadata"]
    # Serving: the pods succeeding does not finish it (a StatefulSet's pods are remade).
    assert condition(workload, "Finished") is None


def test_a_deleted_pod_is_replaced_under_the_same_workload_which_keeps_its_quota() -> None:
    c, sts = started_set()
    before = workload_of(c, sts)
    assert before is not None
    for index in (0, 1):
        c.api.change(PODS, "ns", f"web-{index}", {"status": {"phase": "Running"}})
    c.settle()
    c.api.delete(PODS, "ns", "web-1")
    c.settle()
    assert ("pods", "ns", "web-1") not in c.api.objects
    assert c.used_gpus() == 2  # the group's quota stays while its pod is remade
    c.api.add(PODS, replica(sts, 1))  # the StatefulSet controller makes it again, gated
    c.settle()
    after = workload_of(c, sts)
    assert after is not None
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert gates(c.pod("web-1")) == []
    assert c.pod("web-1")["spec"]["nodeSelector"] == {"gpu": "t4"}
    assert c.used_gpus() == 2


def test_a_second_set_waits_with_kueues_message_and_a_set_scaled_to_zero_loses_its_workload() -> None:
    c, web = started_set()
    db = sts_body("db", 2)
    c.api.add(STATEFULSETS, db)
    c.settle()
    c.api.add(PODS, replica(db, 0))
    c.settle()
    waiting = workload_of(c, db)
    assert waiting is not None
    reserved = condition(waiting, "QuotaReserved")
    assert reserved is not None
    assert reserved["message"] == (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
        "in flavor t4, 2 more needed"
    )
    assert gates(c.pod("db-0")) == [ADMISSION_GATE, TOPOLOGY_GATE]
    # web scaled to zero: its pods go, its Workload is deleted, db is admitted.
    c.api.change(STATEFULSETS, "ns", "web", {"spec": {"replicas": 0}})
    for index in (0, 1):
        c.api.delete(PODS, "ns", f"web-{index}")
    c.settle()
    assert workload_of(c, web) is None
    assert gates(c.pod("db-0")) == []
    assert c.used_gpus() == 2


def test_an_evicted_group_has_its_running_pods_deleted_and_its_quota_returned() -> None:
    c, sts = started_set()
    for index in (0, 1):
        c.api.change(PODS, "ns", f"web-{index}", {"status": {"phase": "Running"}})
    c.settle()
    workload = workload_of(c, sts)
    assert workload is not None
    c.api.change(WORKLOADS, "ns", workload["metadata"]["name"], {"spec": {"active": False}})
    performed = c.settle()
    assert ("pods", "ns", "web-0") not in c.api.objects
    assert ("pods", "ns", "web-1") not in c.api.objects
    assert c.used_gpus() == 0
    # As Kueue stops a pod group: each running pod marked TerminationTarget, then deleted.
    marked = sorted(
        (a.name, a.subresource)
        for a in performed
        if isinstance(a, MergePatch) and a.purpose == "job-terminate" and b"TerminationTarget" in a.patch
    )
    assert marked == [("web-0", "status"), ("web-1", "status")]
    stopped = sorted(e["involvedObject"]["name"] for e in c.api.events if e["reason"] == "Stopped")
    assert stopped == ["web-0", "web-1"]  # on each pod, none on the set


def test_a_new_image_keeps_the_sets_workload_and_its_running_pods() -> None:
    """Kueue's pod group rule (pod set names and counts, not templates): a rolling update to a
    new image neither stops the group nor replaces its Workload."""
    c, sts = started_set()
    for index in (0, 1):
        c.api.change(PODS, "ns", f"web-{index}", {"status": {"phase": "Running"}})
    c.settle()
    before = workload_of(c, sts)
    assert before is not None
    template = copy.deepcopy(c.api.get(STATEFULSETS, "ns", "web")["spec"]["template"])
    template["spec"]["containers"][0]["image"] = "busybox:1.36"
    c.api.change(STATEFULSETS, "ns", "web", {"spec": {"template": template}})
    performed = c.settle()
    assert not [a for a in performed if a.purpose in ("delete-workload", "job-delete", "job-terminate")]
    after = workload_of(c, sts)
    assert after is not None
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert c.used_gpus() == 2
