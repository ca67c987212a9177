"""Topology-aware scheduling through the reconciler (Kueue's TAS controllers): Topologies, Nodes
and the pods bound to them fed to the core; a Job admitted on a TAS flavor starts with Kueue's
topology gate, and each of its pods is released once with the node selector of its domain
(by its completion index), never twice on replays; a non-TAS pod on a node takes its room."""

from __future__ import annotations

import copy
from typing import Any

import msgspec

from reconciler.api import pod_template_view
from reconciler.api.resources import (
    JOBS,
    NODES,
    PODS,
    RESOURCE_FLAVORS,
)
from reconciler.integrations.batchjob.patches import restore_patch, start_patch
from reconciler.runtime.shared.actions import MergePatch
from tests.support.builders import job_body
from tests.support.memory_api import merge
from tests.support.memory_cluster import Cluster, condition
from tests.support.topology_cluster import GATE, HOST, RACK, RACKS, tas_cluster


def submit(c: Cluster, name: str) -> None:
    body = job_body(name, parallelism=4, completions=4, requests={"cpu": "2"})
    body["spec"]["completionMode"] = "Indexed"
    body["spec"]["template"].setdefault("metadata", {})["annotations"] = {
        "kueue.x-k8s.io/podset-required-topology": RACK
    }
    c.api.add(JOBS, body)
    c.settle()


def job_pods(c: Cluster, job: str) -> None:
    """The job controller's pods: the template (gate, labels, annotations) with an index each."""
    stored = c.job(job)
    template = stored["spec"]["template"]
    for index in range(4):
        pod = copy.deepcopy(template)
        meta = pod.setdefault("metadata", {})
        meta.update(name=f"{job}-{index}", namespace="ns")
        meta.setdefault("labels", {})["batch.kubernetes.io/job-completion-index"] = str(index)
        owner = {"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": stored["metadata"]["uid"]}
        meta["ownerReferences"] = [{**owner, "controller": True}]
        pod["status"] = {"phase": "Pending"}
        c.api.add(PODS, pod)


def ungates(actions: list[Any]) -> list[MergePatch]:
    return [a for a in actions if isinstance(a, MergePatch) and a.purpose == "pod-ungate"]


def test_a_required_rack_job_runs_gated_and_each_pod_is_released_into_its_domain_once() -> None:
    c = tas_cluster()
    submit(c, "a")
    job = c.job("a")
    assert job["spec"]["suspend"] is False
    template = job["spec"]["template"]
    assert template["spec"]["schedulingGates"] == [{"name": GATE}]
    workload = c.workload("a")
    assert template["metadata"]["annotations"]["kueue.x-k8s.io/workload"] == workload["metadata"]["name"]
    assignment = workload["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    assert assignment["levels"] == [HOST]  # the lowest level alone when it is the hostname (Kueue's)
    job_pods(c, "a")
    patches = ungates(c.settle())
    assert sorted(p.name for p in patches) == ["a-0", "a-1", "a-2", "a-3"]
    selectors = {f"a-{i}": c.pod(f"a-{i}")["spec"]["nodeSelector"] for i in range(4)}
    assert all(GATE not in str(c.pod(f"a-{i}")["spec"]["schedulingGates"]) for i in range(4))
    racks = {RACKS[s[HOST]] for s in selectors.values()}
    assert len(racks) == 1  # required: rack, all four pods in one rack
    # By completion index: 0 and 1 on the first node of the assignment, 2 and 3 on the second.
    assert (
        selectors["a-0"][HOST] == selectors["a-1"][HOST] != selectors["a-2"][HOST] == selectors["a-3"][HOST]
    )
    assert selectors["a-0"]["pool"] == "gpu"  # the flavor's node labels stay
    # Replays change nothing: no pod is released twice.
    for i in range(4):
        c.api.change(PODS, "ns", f"a-{i}", {"status": {"phase": "Running"}})
    c.reconciler.flush_status()
    assert ungates(c.settle()) == []


def test_pods_bound_to_a_node_take_its_room_and_a_second_job_waits_until_a_rack_frees() -> None:
    c = tas_cluster()
    submit(c, "a")
    # A pod of no job (not TAS) running on n3 leaves n3 2 CPUs: rack r2 holds only 3 pods of 2 CPUs.
    other = job_body("x", queue=None, requests={"cpu": "2"})["spec"]["template"]
    other["metadata"] = {"name": "x", "namespace": "ns"}
    other["spec"]["nodeName"] = "n3"
    other["status"] = {"phase": "Running"}
    c.api.add(PODS, other)
    c.settle()
    submit(c, "b")
    assert c.job("b")["spec"]["suspend"] is True
    assert condition(c.workload("b"), "QuotaReserved") == (
        "False",
        "Pending",
        'couldn\'t assign flavors to pod set main: topology "default" allows to fit only 3 out of 4 '
        'pod(s). Total nodes: 4; excluded: resource "cpu": 2',
    )
    c.api.change(PODS, "ns", "x", {"status": {"phase": "Succeeded"}})
    c.settle()
    assert c.job("b")["spec"]["suspend"] is False


def test_restoring_a_stopped_job_takes_the_gate_and_the_topology_annotations_back_out() -> None:
    template = job_body("a", requests={"cpu": "1"})["spec"]["template"]
    original = pod_template_view(msgspec.Raw(msgspec.json.encode(template)))
    annotations = {"kueue.x-k8s.io/workload": "w", "kueue.x-k8s.io/podset-unconstrained-topology": "true"}
    started = start_patch(
        {"pool": "gpu"}, {"kueue.x-k8s.io/podset": "main"}, pod_annotations=annotations, gates=[GATE]
    )
    after = merge({"spec": {"template": template}}, msgspec.json.decode(started))["spec"]["template"]
    assert after["spec"]["schedulingGates"] == [{"name": GATE}]
    current = pod_template_view(msgspec.Raw(msgspec.json.encode(after)))
    patch = restore_patch(current, original)
    assert patch is not None
    restored = merge({"spec": {"template": after}}, msgspec.json.decode(patch))["spec"]["template"]
    assert restored.get("spec", {}).get("schedulingGates") in (None, [])
    assert not restored.get("metadata", {}).get("annotations")


def test_the_nodes_are_given_to_the_core_only_once_a_flavor_names_a_topology() -> None:
    """Without a TAS flavor, pod churn does not retry every parked workload: no nodes are given."""
    c = Cluster()
    status = {"allocatable": {"cpu": "4", "pods": "110"}, "conditions": [{"type": "Ready", "status": "True"}]}
    c.api.add(NODES, {"metadata": {"name": "n1", "labels": {HOST: "n1"}}, "status": status})
    c.queues(gpus=1)
    assert given(c) is None
    flavor = {"nodeLabels": {"pool": "gpu"}, "topologyName": "default"}
    c.api.add(RESOURCE_FLAVORS, {"metadata": {"name": "tas"}, "spec": flavor})
    c.settle()
    assert given(c) == ["n1"]


def given(c: Cluster) -> list[str] | None:
    """The names of the nodes the core was given (None: none given)."""
    nodes = c.reconciler.ctx.engine.cache.topology_nodes
    return None if nodes is None else [n.name for n in nodes]
