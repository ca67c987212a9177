"""Evicting a JobSet as Kueue v0.18.1 does, in two steps: Evicted=True (the JobSet suspended)
while its reservation is kept, and the reservation ended once none of its Jobs is active; the
quota is charged meanwhile, also across a restart, and an evicting Workload is never evicted
again but is the first preemption candidate."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from reconciler.api.resources import CLUSTER_QUEUES, JOBSETS, WORKLOAD_PRIORITY_CLASSES
from reconciler.runtime.shared.actions import Action, MergePatch
from tests.support.builders import cluster_queue_body
from tests.support.jobset_queues import TWO, condition, jobset_cluster, queues
from tests.support.jobsets import RJ, jobset_body
from tests.support.memory_cluster import GPU, T0, Cluster

PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
ACTIVE = [{"name": "leader", "active": 1}, {"name": "workers", "active": 2}]
STOPPED = [{"name": "leader", "active": 0}, {"name": "workers", "active": 0}]


def preempting_queues(c: Cluster, gpus: int = 3) -> None:
    """`gpus` GPUs, preemption within the ClusterQueue by priority; classes `low` and `high`."""
    queues(c, gpus=gpus)
    body = cluster_queue_body("cq", [("t4", {"cpu": 10, GPU: gpus})])
    body["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    c.api.change(CLUSTER_QUEUES, "", "cq", {"spec": body["spec"]})
    for name, value in (("low", 10), ("high", 1000)):
        c.api.add(WORKLOAD_PRIORITY_CLASSES, {"metadata": {"name": name}, "value": value})
    c.settle()


def running_jobset(c: Cluster, name: str, priority: str, replicated: Sequence[RJ] = TWO) -> list[Action]:
    """A JobSet of that priority class, and what the controller then did."""
    body = jobset_body(name, replicated)
    body["metadata"]["labels"][PRIORITY_LABEL] = priority
    c.api.add(JOBSETS, body)
    return c.settle()


def evictions(performed: list[Action], workload: str) -> list[MergePatch]:
    """The eviction writes (either step) to one Workload."""
    return [a for a in performed if isinstance(a, MergePatch) and a.purpose == "evict" and a.name == workload]


def restarted(c: Cluster) -> Cluster:
    """A new controller process over the same API objects (its watches list them all)."""
    fresh = jobset_cluster()
    fresh.now = c.now
    fresh.api.objects = c.api.objects
    fresh.api._rv, fresh.api._uid = c.api._rv + 1000, c.api._uid + 1000
    for (plural, _, _), body in list(c.api.objects.items()):
        row = fresh.api.resources.get(plural)
        if row is not None:
            fresh.api._watch("ADDED", row.resource, body)
    fresh.api.sync()
    return fresh


def test_a_preempted_jobset_keeps_its_quota_until_its_jobs_are_no_longer_active() -> None:
    """Kueue's two steps: the victim is Evicted and suspended, but its quota is held (the
    preemptor waits) until no Job of it is active; then the reservation ends and the preemptor
    is admitted."""
    c = jobset_cluster()
    preempting_queues(c)
    running_jobset(c, "low", "low")
    assert c.jobset("low")["spec"]["suspend"] is False
    c.api.change(JOBSETS, "ns", "low", {"status": {"replicatedJobsStatus": ACTIVE}})
    c.settle()
    running_jobset(c, "high", "high")
    low = c.workloads()["JobSet/low"]
    evicted = condition(low, "Evicted")
    assert evicted is not None
    assert (evicted["status"], evicted["reason"]) == ("True", "Preempted")
    reserved = condition(low, "QuotaReserved")
    assert reserved is not None
    assert reserved["status"] == "True"
    assert low["status"]["admission"] is not None
    assert c.jobset("low")["spec"]["suspend"] is True  # stopped
    # Its Jobs still active: the preemptor waits, the quota still the victim's.
    assert c.jobset("high")["spec"]["suspend"] is True
    assert c.used_gpus() == 3
    high = c.workloads()["JobSet/high"]
    assert high["status"].get("admission") is None
    pending = condition(high, "QuotaReserved")
    assert pending is not None
    assert "Pending the preemption of 1 workload(s)" in pending["message"]
    # One Job still active: nothing changes.
    c.api.change(JOBSETS, "ns", "low", {"status": {"replicatedJobsStatus": STOPPED[:1] + ACTIVE[1:]}})
    assert evictions(c.settle(), low["metadata"]["name"]) == []
    assert c.jobset("high")["spec"]["suspend"] is True
    # No Job active: the reservation ends with the eviction's words, the preemptor runs.
    c.api.change(JOBSETS, "ns", "low", {"status": {"replicatedJobsStatus": STOPPED}})
    (release,) = evictions(c.settle(), low["metadata"]["name"])
    written = msgspec.json.decode(release.patch)
    assert written["status"]["admission"] is None
    for kind, status, reason in (("QuotaReserved", "False", "Pending"), ("Requeued", "True", "Preempted")):
        found = condition(written, kind)
        assert found is not None
        assert (found["status"], found["reason"], found["message"]) == (status, reason, evicted["message"])
    assert c.jobset("high")["spec"]["suspend"] is False
    assert c.used_gpus() == 3  # now the preemptor's


def test_a_restarted_controller_keeps_an_evicting_jobsets_quota_and_never_evicts_it_again() -> None:
    """A new process sees the victim Evicted with its reservation: its quota is charged (the
    preemptor still waits), no second eviction is written, and the reservation ends once its
    Jobs are no longer active."""
    c = jobset_cluster()
    preempting_queues(c)
    running_jobset(c, "low", "low")
    c.api.change(JOBSETS, "ns", "low", {"status": {"replicatedJobsStatus": ACTIVE}})
    c.settle()
    running_jobset(c, "high", "high")
    name = c.workloads()["JobSet/low"]["metadata"]["name"]
    fresh = restarted(c)
    performed = fresh.settle()
    assert evictions(performed, name) == []  # neither evicted again nor released
    assert fresh.used_gpus() == 3
    assert fresh.reconciler.core.is_admitted(("ns", name))
    assert fresh.jobset("high")["spec"]["suspend"] is True
    high = fresh.workloads()["JobSet/high"]
    assert high["status"].get("admission") is None
    fresh.api.change(JOBSETS, "ns", "low", {"status": {"replicatedJobsStatus": STOPPED}})
    (release,) = evictions(fresh.settle(), name)
    assert msgspec.json.decode(release.patch)["status"]["admission"] is None
    assert fresh.workloads()["JobSet/low"]["status"].get("admission") is None
    assert fresh.jobset("high")["spec"]["suspend"] is False


def test_after_a_restart_the_evicting_workload_is_the_preemption_candidate_first() -> None:
    """Two low JobSets of 1 GPU: `a` evicted at its PodsReady timeout (its Job still active),
    `b` (admitted later, so otherwise the first candidate) ready. After a restart a high one
    needing 1 GPU counts on `a`'s eviction: `b` is not preempted, and the preemptor runs once
    `a`'s Job is no longer active."""
    one: list[RJ] = [("leader", 1, 1, 1, "gpu-a")]
    c = jobset_cluster()
    preempting_queues(c, gpus=2)
    running_jobset(c, "a", "low", one)
    c.api.change(JOBSETS, "ns", "a", {"status": {"replicatedJobsStatus": [{"name": "leader", "active": 1}]}})
    c.now = T0 + 1
    running_jobset(c, "b", "low", one)
    ready = [{"name": "leader", "active": 1, "ready": 1}]
    c.api.change(JOBSETS, "ns", "b", {"status": {"replicatedJobsStatus": ready}})
    c.settle()
    c.tick(T0 + 61)
    a, b = c.workloads()["JobSet/a"], c.workloads()["JobSet/b"]
    evicted = condition(a, "Evicted")
    assert evicted is not None
    assert (evicted["status"], evicted["reason"]) == ("True", "PodsReadyTimeout")
    assert a["status"]["admission"] is not None  # its Job still active
    fresh = restarted(c)
    fresh.settle()
    assert evictions(running_jobset(fresh, "high", "high", one), b["metadata"]["name"]) == []
    assert condition(fresh.workloads()["JobSet/b"], "Evicted") is None
    assert fresh.jobset("high")["spec"]["suspend"] is True
    stopped = [{"name": "leader", "active": 0}]
    fresh.api.change(JOBSETS, "ns", "a", {"status": {"replicatedJobsStatus": stopped}})
    fresh.settle()
    assert fresh.jobset("high")["spec"]["suspend"] is False
    assert fresh.jobset("b")["spec"]["suspend"] is False
