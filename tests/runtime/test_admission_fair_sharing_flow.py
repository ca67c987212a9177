"""Admission fair sharing through the reconciler and the in-memory API: two LocalQueues of one
ClusterQueue with admissionMode UsageBasedAdmissionFairSharing take turns (the entry penalty of
each admission puts the other LocalQueue first), the LocalQueues' status shows Kueue's
admissionFairSharingStatus and this controller's score and place, and the usage survives a
restart (read back from that status), so the heavier user waits."""

from __future__ import annotations

from typing import Any

from reconciler.api.resources import CLUSTER_QUEUES
from reconciler.api.resources import JOBS
from reconciler.api.resources import LOCAL_QUEUES
from reconciler.api.resources import NAMESPACES
from reconciler.api.resources import RESOURCE_CLAIM_TEMPLATES
from reconciler.api.resources import RESOURCE_FLAVORS
from reconciler.config import Configuration
from reconciler.config import parse_config
from reconciler.core.status import AFS_CONDITION

from tests.support.builders import cluster_queue_body
from tests.support.builders import job_body
from tests.support.memory_cluster import GPU
from tests.support.memory_cluster import T0
from tests.support.memory_cluster import Cluster
from tests.support.memory_cluster import condition
from tests.support.memory_cluster import gpu_template


def config(afs: bool = True, half_life: str = "10m", sampling: str = "1m") -> Configuration:
    doc: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "resources": {"deviceClassMappings": [{"name": GPU, "deviceClassNames": ["gpu.nvidia.com"]}]},
    }
    if afs:
        doc["admissionFairSharing"] = {"usageHalfLifeTime": half_life, "usageSamplingInterval": sampling}
    return parse_config(doc)


def cluster(afs: bool = True, gpus: int = 1, **settings: str) -> Cluster:
    """ClusterQueue cq (`gpus` GPUs, admission fair sharing when `afs`), LocalQueues a and b."""
    c = Cluster(config(afs, **settings))
    c.api.add(NAMESPACES, {"metadata": {"name": "ns", "labels": {"kubernetes.io/metadata.name": "ns"}}})
    c.api.add(RESOURCE_FLAVORS, {"metadata": {"name": "t4"}, "spec": {"nodeLabels": {"gpu": "t4"}}})
    cq = cluster_queue_body("cq", [("t4", {GPU: gpus})])
    cq["spec"]["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    c.api.add(CLUSTER_QUEUES, cq)
    for lq in ("a", "b"):
        c.api.add(LOCAL_QUEUES, {"metadata": {"name": lq, "namespace": "ns"}, "spec": {"clusterQueue": "cq"}})
    c.api.add(RESOURCE_CLAIM_TEMPLATES, gpu_template())
    c.api.sync()
    c.settle()
    return c


def submit(c: Cluster, name: str, queue: str) -> None:
    c.now += 1  # each job a second younger than the one before
    c.api.add(JOBS, job_body(name, queue=queue, claims=[{"name": "g", "resourceClaimTemplateName": "gpu"}]))
    c.settle()


def running(c: Cluster) -> list[str]:
    """The Jobs started (not suspended) and not finished."""
    return sorted(
        body["metadata"]["name"]
        for (plural, _, _), body in c.api.objects.items()
        if plural == JOBS.plural
        and body["spec"]["suspend"] is False
        and not body.get("status", {}).get("conditions")
    )


def finish(c: Cluster, name: str) -> None:
    done = {"status": {"conditions": [{"type": "Complete", "status": "True", "message": "done"}]}}
    c.api.change(JOBS, "ns", name, done)
    c.settle()


def admission_order(c: Cluster, jobs: list[tuple[str, str]]) -> list[str]:
    for name, queue in jobs:
        submit(c, name, queue)
    order: list[str] = []
    for _ in jobs:
        (now,) = [name for name in running(c) if name not in order]
        order.append(now)
        finish(c, now)
    return order


JOBS_AB = [("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b"), ("b2", "b"), ("b3", "b")]


def test_two_local_queues_take_turns() -> None:
    # a's jobs are all older; the entry penalty of each admission lets the other LocalQueue in.
    # Half-life 1h, sampling 5m: a penalty is 1000m * (1 - 0.5^(5/60)) = 56m; a's five seconds
    # of decay between a1's and a2's admissions come to nothing (truncated), so after a2 a has
    # 55m + 56m = 111m against b's 56m + 56m = 112m after b2, and a3 goes before b3.
    c = cluster(half_life="1h", sampling="5m")
    assert admission_order(c, JOBS_AB) == ["a1", "b1", "a2", "b2", "a3", "b3"]


def test_time_running_counts_against_a_local_queue() -> None:
    # Half-life 10m: a's five seconds of running between a1's and a2's admissions
    # (1000m * (1 - 0.5^(5/600)) = 5m) put it behind b, which ran for none.
    assert admission_order(cluster(), JOBS_AB) == ["a1", "b1", "a2", "b2", "b3", "a3"]


def test_without_admission_fair_sharing_the_older_jobs_go_first() -> None:
    assert admission_order(cluster(afs=False), JOBS_AB) == ["a1", "a2", "a3", "b1", "b2", "b3"]


def local_queue(c: Cluster, name: str) -> dict[str, Any]:
    return c.api.get(LOCAL_QUEUES, "ns", name)


def test_the_status_shows_the_decayed_usage_and_the_score_at_each_sample() -> None:
    c = cluster()
    submit(c, "a1", "a")
    assert running(c) == ["a1"]
    c.tick(T0 + 10)
    # One GPU for 10 minutes (one half-life) from its admission's entry penalty.
    c.tick(T0 + 10 + 600)
    status = local_queue(c, "a")["status"]["fairSharing"]
    afs = status["admissionFairSharingStatus"]
    assert afs["lastUpdate"] == "2026-01-01T00:10:10Z"
    # 1 GPU * alpha(1m, 10m) = 66m penalty at admission (T0+1); the tick at T0+10 is within the
    # sampling interval; at T0+610, 609s of decay towards 1000m: alpha = 1 - 0.5^(609/600) =
    # 0.50518, so 66m * 0.49482 + 1000m * 0.50518 = 32m + 505m.
    assert afs["consumedResources"][GPU] == "537m"
    assert status["weightedShare"] == 0
    assert condition(local_queue(c, "a"), AFS_CONDITION) == (
        "True",
        "Ranked",
        "score 0.537 (weighted usage over weight 1); place 2 of 2 LocalQueues in ClusterQueue cq, "
        "lowest score admitted first",
    )
    b = local_queue(c, "b")
    assert b["status"]["fairSharing"]["admissionFairSharingStatus"]["consumedResources"] == {}
    assert condition(b, AFS_CONDITION) is not None
    assert "place 1 of 2" in condition(b, AFS_CONDITION)[2]  # type: ignore[index]
    # Not sampled again before usageSamplingInterval: no new status.
    before = local_queue(c, "a")["metadata"]["resourceVersion"]
    c.tick(T0 + 10 + 630)
    assert local_queue(c, "a")["metadata"]["resourceVersion"] == before


def restarted(c: Cluster) -> Cluster:
    """A new controller over the same objects (its state only from what the API shows)."""
    fresh = Cluster(config())
    fresh.now = c.now
    for (plural, _ns, _name), body in c.api.objects.items():
        row = fresh.api.resources.get(plural)
        if row is None:
            continue
        fresh.api.objects[(plural, _ns, _name)] = body
        fresh.api._watch("ADDED", row.resource, body)
    fresh.api._rv = c.api._rv
    fresh.api.sync()
    fresh.settle()
    return fresh


def test_usage_survives_a_restart_and_the_heavier_user_waits() -> None:
    c = cluster()
    submit(c, "a1", "a")
    c.tick(T0 + 10)
    c.tick(T0 + 10 + 3600)  # a used its GPU for an hour
    finish(c, "a1")
    c.tick(T0 + 10 + 3600 + 60)  # the sample after it finished is written
    submit(c, "a2", "a")  # fits at once (the GPU is free): let it run, queue behind it
    submit(c, "a3", "a")
    submit(c, "b1", "b")
    consumed = local_queue(c, "a")["status"]["fairSharing"]["admissionFairSharingStatus"]["consumedResources"]
    # An hour at 1 GPU (half-life 10m): 66m / 64 + 1000m * 63/64 = 1m + 984m; then a minute idle:
    # 985m * 0.5^(1/10) = 919m.
    assert consumed[GPU] == "919m"
    c2 = restarted(c)
    # The new controller starts from a's usage in its status: a's older job waits for b's.
    assert running(c2) == ["a2"]
    finish(c2, "a2")
    assert running(c2) == ["b1"]


MEMORY = "example.com/gpu-memory"


def memory_cluster(weights: dict[str, float]) -> Cluster:
    """Two GPUs and 40Gi of GPU memory, charged from the requests' capacity through a capacity
    mapping; templates big (20Gi) and small (5Gi)."""
    doc: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "resources": {
            "deviceClassMappings": [
                {
                    "name": GPU,
                    "deviceClassNames": ["gpu.nvidia.com"],
                    "capacity": [{"name": "memory", "resource": MEMORY}],
                }
            ]
        },
        "admissionFairSharing": {
            "usageHalfLifeTime": "10m",
            "usageSamplingInterval": "1m",
            "resourceWeights": weights,
        },
    }
    c = Cluster(parse_config(doc))
    c.api.add(NAMESPACES, {"metadata": {"name": "ns", "labels": {"kubernetes.io/metadata.name": "ns"}}})
    c.api.add(RESOURCE_FLAVORS, {"metadata": {"name": "t4"}, "spec": {"nodeLabels": {"gpu": "t4"}}})
    cq = cluster_queue_body("cq", [("t4", {GPU: 2, MEMORY: "40Gi"})])
    cq["spec"]["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    c.api.add(CLUSTER_QUEUES, cq)
    for lq in ("a", "b"):
        c.api.add(LOCAL_QUEUES, {"metadata": {"name": lq, "namespace": "ns"}, "spec": {"clusterQueue": "cq"}})
    for name, size in (("big", "20Gi"), ("small", "5Gi")):
        template = gpu_template(name)
        template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["capacity"] = {
            "requests": {"memory": size}
        }
        c.api.add(RESOURCE_CLAIM_TEMPLATES, template)
    c.api.sync()
    c.settle()
    return c


def submit_with(c: Cluster, name: str, queue: str, template: str) -> None:
    c.now += 1
    claims = [{"name": "g", "resourceClaimTemplateName": template}]
    c.api.add(JOBS, job_body(name, queue=queue, claims=claims))
    c.settle()


def test_resource_weights_apply_to_the_logical_resources_a_capacity_mapping_charges() -> None:
    def next_after_a1(weights: dict[str, float]) -> list[str]:
        c = memory_cluster(weights)
        submit_with(c, "a1", "a", "big")
        submit_with(c, "b1", "b", "small")
        assert running(c) == ["a1", "b1"]
        submit_with(c, "a2", "a", "small")  # older than b2; both wait for a GPU
        submit_with(c, "b2", "b", "small")
        finish(c, "a1")
        return running(c)

    # By GPUs a and b used the same (one each): a's older job goes first.
    assert next_after_a1({GPU: 1, MEMORY: 0}) == ["a2", "b1"]
    # By GPU memory (per GiB) a used four times as much: b's job goes first.
    assert next_after_a1({GPU: 0, MEMORY: 1 / 2**30}) == ["b1", "b2"]
    c = memory_cluster({GPU: 0, MEMORY: 1 / 2**30})
    submit_with(c, "a1", "a", "big")
    c.tick(c.now)
    # 20Gi * (1 - 0.5^(1/10)) = 1.33934 GiB of entry penalty; the GPU counts for nothing.
    message = condition(local_queue(c, "a"), AFS_CONDITION)
    assert message is not None
    assert message[2].startswith("score 1.33934 ")
    consumed = local_queue(c, "a")["status"]["fairSharing"]["admissionFairSharingStatus"]["consumedResources"]
    assert set(consumed) == {GPU, MEMORY}
