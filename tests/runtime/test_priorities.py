"""Priorities through the reconciler: a high-priority Job goes first; a missing class is reported."""

from __future__ import annotations

import msgspec

from reconciler.api.resources import JOBS, WORKLOADS
from reconciler.runtime.shared.actions import PostEvent
from reconciler.runtime.shared.writer import WriteDone
from tests.support.priority_jobs import add_class, labelled, queued
from tests.support.reconciler_harness import GPU, Harness, apply_patch, gpu_job, of, queues


def test_the_higher_priority_job_is_admitted_first_when_quota_frees() -> None:
    h = Harness()
    queues(h)
    add_class(h, "low", 10)
    add_class(h, "high", 1000)
    h.sync_all()
    running = queued(h, gpu_job(h, "running"))
    h.event("ADDED", WORKLOADS, running)
    (admit,) = of(h.take(), "admit")
    admitted = apply_patch(h, running, admit)
    h.reconciler.handle(WriteDone(admit, body=msgspec.json.encode(admitted)))
    low = queued(h, labelled(h, "low", "low"))
    high = queued(h, labelled(h, "high", "high"))
    assert (low.spec.priority, high.spec.priority) == (10, 1000)
    h.event("ADDED", WORKLOADS, low)
    h.event("ADDED", WORKLOADS, high)
    assert of(h.take(), "admit") == []  # the GPU is taken
    h.event("DELETED", WORKLOADS, admitted)  # the running one goes away
    (next_admit,) = of(h.take(), "admit")
    assert next_admit.name == high.metadata.name
    assert h.reconciler.core.ledger.used("cq", ("t4", GPU)) == 1


def test_a_missing_workload_priority_class_holds_the_workload_and_says_why() -> None:
    h = Harness()
    queues(h)
    h.sync_all()
    job = labelled(h, "train", "urgent")
    h.event("ADDED", JOBS, job)
    actions = h.take()
    assert of(actions, "create-workload") == []
    (warning,) = [a for a in actions if isinstance(a, PostEvent)]
    event = msgspec.json.decode(warning.body)
    assert (event["type"], event["reason"]) == ("Warning", "PriorityClassNotFound")
    assert "label kueue.x-k8s.io/priority-class" in event["message"]
    h.event("MODIFIED", JOBS, job)
    assert [a for a in h.take() if isinstance(a, PostEvent)] == []  # said once
    add_class(h, "urgent", 5000)
    (create,) = of(h.take(), "create-workload")
    assert msgspec.json.decode(create.body)["spec"]["priority"] == 5000


def test_a_jobs_changed_priority_class_label_moves_its_workloads_priority() -> None:
    # The Workload is looked at for the label only when the Job carries it: a Job that gains it
    # still moves its Workload.
    h = Harness()
    queues(h)
    add_class(h, "high", 1000)
    h.sync_all()
    job = gpu_job(h, "train")
    workload = queued(h, job)
    assert (workload.spec.priority, workload.spec.priority_class_ref) == (0, None)
    h.event("ADDED", WORKLOADS, workload)
    h.take()
    job.metadata.labels["kueue.x-k8s.io/priority-class"] = "high"
    h.event("MODIFIED", JOBS, job)
    (update,) = of(h.take(), "workload-priority")
    patch = msgspec.json.decode(update.patch)
    assert patch["spec"]["priority"] == 1000
    assert patch["spec"]["priorityClassRef"]["name"] == "high"
