"""A Deployment's pods through the runtime with only `deployment` enabled (the pod integration
implied, as Kueue v0.18.1): each pod the ReplicaSet makes (stored by the pod webhook: gated,
marked by its parent, no finalizer) is a single pod with a Workload of its own; scaled to three
on two GPUs of quota, two are admitted and ungated, the third waits gated with Kueue's message;
a scale-down deletes a running pod, its quota returns and the waiting one is admitted. A plain
queue-named pod is not a job while `pod` is only implied (Kueue's pod reconciler skips it)."""

from __future__ import annotations

import dataclasses
from typing import Any

from reconciler.admission.queue_rules import JobPolicy
from reconciler.api.resources import PODS
from reconciler.config import parse_config
from reconciler.integrations.pods.pod import ADMISSION_GATE, TOPOLOGY_GATE
from tests.support.memory_cluster import GPU, Cluster
from tests.support.pod_queues import condition, gates, queues
from tests.support.pods import pod_body, stored_pod

CONFIG = dataclasses.replace(
    parse_config(
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "integrations": {"frameworks": ["batch/job", "deployment"]},
            "resources": {"deviceClassMappings": [{"name": GPU, "deviceClassNames": ["gpu.nvidia.com"]}]},
        }
    ),
)
POLICY = JobPolicy(frameworks=frozenset(CONFIG.frameworks), own_namespace="kueue-system")
PARENT = "kueue.x-k8s.io/pod-suspending-parent"


def replica(name: str) -> dict[str, Any]:
    """A pod as a Deployment's ReplicaSet makes it from the marked template, through the pod webhook."""
    body = pod_body(name)
    body["metadata"]["labels"]["kueue.x-k8s.io/managed"] = "true"
    body["metadata"]["annotations"] = {PARENT: "deployment"}
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "infer-7d9",
        "uid": "rs-1",
        "controller": True,
    }
    body["metadata"]["ownerReferences"] = [owner]
    return stored_pod(body, POLICY)


def test_a_deployment_scaled_to_three_on_two_gpus_runs_two_and_the_third_waits() -> None:
    c = Cluster(CONFIG, finalizers=True)
    queues(c, gpus=2)
    for name in ("infer-a", "infer-b", "infer-c"):
        pod = replica(name)
        assert "finalizers" not in pod["metadata"]
        c.api.add(PODS, pod)
        c.settle()
    workloads = c.workloads()
    assert sorted(workloads) == ["Pod/infer-a", "Pod/infer-b", "Pod/infer-c"]
    assert [(ps["name"], ps["count"]) for ps in workloads["Pod/infer-a"]["spec"]["podSets"]] == [("main", 1)]
    assert c.used_gpus() == 2
    assert gates(c.pod("infer-a")) == gates(c.pod("infer-b")) == []
    assert gates(c.pod("infer-c")) == [ADMISSION_GATE, TOPOLOGY_GATE]
    waiting = condition(workloads["Pod/infer-c"], "QuotaReserved")
    assert waiting is not None
    assert waiting["message"] == (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
        "in flavor t4, 1 more needed"
    )
    # Scaled down: the ReplicaSet deletes a running pod (no finalizer: it goes), its quota returns.
    c.api.change(PODS, "ns", "infer-a", {"status": {"phase": "Running"}})
    c.settle()
    c.api.delete(PODS, "ns", "infer-a")
    c.settle()
    assert ("pods", "ns", "infer-a") not in c.api.objects
    assert gates(c.pod("infer-c")) == []
    assert c.used_gpus() == 2


def test_a_plain_pod_is_not_a_job_while_the_pod_integration_is_only_implied() -> None:
    c = Cluster(CONFIG, finalizers=True)
    queues(c, gpus=2)
    plain = pod_body("plain")
    plain["metadata"]["labels"]["kueue.x-k8s.io/managed"] = "true"  # as if marked before
    c.api.add(PODS, plain)
    c.settle()
    assert c.workloads() == {}


def test_a_rolling_updates_new_pod_waits_for_quota_until_an_old_one_goes() -> None:
    """A rolling update's new pod (another ReplicaSet's) is a pod like any other: with the two
    old pods holding the quota it waits gated; once the ReplicaSet deletes an old one it runs."""
    c = Cluster(CONFIG, finalizers=True)
    queues(c, gpus=2)
    for name in ("old-a", "old-b"):
        c.api.add(PODS, replica(name))
        c.settle()
        c.api.change(PODS, "ns", name, {"status": {"phase": "Running"}})
    c.api.add(PODS, replica("new-a"))
    c.settle()
    assert gates(c.pod("new-a")) == [ADMISSION_GATE, TOPOLOGY_GATE]
    c.api.delete(PODS, "ns", "old-a")
    c.settle()
    assert gates(c.pod("new-a")) == []
    assert c.used_gpus() == 2
