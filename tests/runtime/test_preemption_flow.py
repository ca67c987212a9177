"""Preemption through the reconciler: the victim is evicted with Kueue's conditions, then the preemptor
goes."""

from __future__ import annotations

import msgspec

from reconciler.api import ClusterQueue, Workload, WorkloadPriorityClass
from reconciler.api.resources import CLUSTER_QUEUES, WORKLOAD_PRIORITY_CLASSES, WORKLOADS
from reconciler.observability.metrics import Metrics
from reconciler.runtime.shared.actions import PostEvent
from reconciler.runtime.shared.writer import WriteDone
from tests.support.builders import cluster_queue_body
from tests.support.metrics import scrape
from tests.support.metrics import value as metric
from tests.support.reconciler_harness import (
    GPU,
    Harness,
    apply_patch,
    decode,
    gpu_job,
    of,
    queues,
    submitted,
)


def queued(h: Harness, name: str, priority_class: str) -> Workload:
    job = gpu_job(h, name)
    job.metadata.labels["kueue.x-k8s.io/priority-class"] = priority_class
    return submitted(h, job)


def preempting_queue(h: Harness) -> None:
    """A queue of one GPU that preempts lower priorities, and the priority classes low and high."""
    queues(h)
    body = cluster_queue_body("cq", [("t4", {GPU: 1})])
    body["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    h.event("MODIFIED", CLUSTER_QUEUES, decode(body, ClusterQueue))
    for name, value in (("low", 10), ("high", 1000)):
        wpc = {"metadata": {"name": name, "resourceVersion": h.next_rv()}, "value": value}
        h.event("ADDED", WORKLOAD_PRIORITY_CLASSES, decode(wpc, WorkloadPriorityClass))
    h.sync_all()


def test_a_high_priority_job_preempts_the_running_low_one() -> None:
    h = Harness()
    metrics = Metrics("leader")
    h.reconciler.metrics = metrics
    preempting_queue(h)
    low = queued(h, "low", "low")
    (admit,) = of(h.take(), "admit")
    running = apply_patch(h, low, admit)
    h.reconciler.handle(WriteDone(admit, body=msgspec.json.encode(running)))
    h.event("MODIFIED", WORKLOADS, running)
    h.take()
    high = queued(h, "high", "high")
    actions = h.take()
    (evict,) = of(actions, "evict")
    assert evict.name == running.metadata.name
    status = msgspec.json.decode(evict.patch)["status"]
    conditions = {c["type"]: c for c in status["conditions"]}
    message = (
        f"Preempted to accommodate a workload (UID: {high.metadata.uid}, JobUID: uid-high) due to "
        "prioritization in the ClusterQueue; preemptor path: /cq; preemptee path: /cq"
    )
    assert (conditions["Evicted"]["reason"], conditions["Evicted"]["message"]) == ("Preempted", message)
    assert (conditions["Preempted"]["status"], conditions["Preempted"]["reason"]) == (
        "True",
        "InClusterQueue",
    )
    assert (conditions["Requeued"]["status"], conditions["Requeued"]["reason"]) == ("True", "Preempted")
    assert status["admission"] is None
    reasons = [msgspec.json.decode(a.body)["reason"] for a in actions if isinstance(a, PostEvent)]
    assert "Preempted" in reasons
    assert "PreemptedWorkload" in reasons
    (pending,) = [a for a in of(actions, "workload-status") if a.name == high.metadata.name]
    assert (
        "Pending the preemption of 1 workload(s)"
        in msgspec.json.decode(pending.patch)["status"]["conditions"][0]["message"]
    )
    assert of(actions, "admit") == []
    # The eviction lands: the quota comes back and the preemptor is admitted.
    evicted = apply_patch(h, running, evict)
    h.reconciler.handle(WriteDone(evict, body=msgspec.json.encode(evicted)))
    (next_admit,) = of(h.take(), "admit")
    assert next_admit.name == high.metadata.name
    assert h.reconciler.core.ledger.used("cq", ("t4", GPU)) == 1
    _, samples = scrape(metrics)
    labels = {"preempting_cluster_queue": "cq", "reason": "InClusterQueue", "replica_role": "leader"}
    assert metric(samples, "kueue_preempted_workloads_total", **labels) == 1
    eviction = {
        "cluster_queue": "cq",
        "reason": "Preempted",
        "underlying_cause": "",
        "priority_class": "low",
    }  # the victim's class
    assert metric(samples, "kueue_evicted_workloads_total", replica_role="leader", **eviction) == 1


def test_a_victim_whose_admission_is_still_being_written_is_evicted_once_it_lands() -> None:
    """The low Job's admission is in flight when the high one comes: the ledger already charges
    it, so the scheduler names it. Its eviction waits for the admission to land and is then
    written on the admitted version (before, it was written at once on the pending version, or
    replaced the admission still waiting in the Workload's slot and wrote Preempted on a Workload
    never admitted)."""
    h = Harness()
    preempting_queue(h)
    low = queued(h, "low", "low")
    (admit,) = of(h.take(), "admit")
    queued(h, "high", "high")
    assert of(h.take(), "evict") == []  # (the low one's admission is in flight)
    admitted = apply_patch(h, low, admit)
    h.reconciler.handle(WriteDone(admit, body=msgspec.json.encode(admitted)))
    (evict,) = of(h.take(), "evict")
    patch = msgspec.json.decode(evict.patch)
    assert evict.name == low.metadata.name
    assert patch["metadata"]["resourceVersion"] == admitted.metadata.resource_version
    preempted = {c["type"]: c["status"] for c in patch["status"]["conditions"]}
    assert (preempted["Evicted"], preempted["Preempted"]) == ("True", "True")
