"""Jobs with priority classes on the reconciler harness: a WorkloadPriorityClass added, a labelled Job, its
queued Workload."""

from __future__ import annotations

import msgspec

from reconciler.api import Job, Workload, WorkloadPriorityClass
from reconciler.api.resources import JOBS, WORKLOAD_PRIORITY_CLASSES
from reconciler.runtime.shared.writer import WriteDone
from tests.support.reconciler_harness import Harness, created_workload, decode, gpu_job, of


def labelled(h: Harness, name: str, priority_class: str) -> Job:
    job = gpu_job(h, name)
    job.metadata.labels["kueue.x-k8s.io/priority-class"] = priority_class
    return job


def add_class(h: Harness, name: str, value: int) -> None:
    body = {"metadata": {"name": name, "resourceVersion": h.next_rv()}, "value": value}
    h.event("ADDED", WORKLOAD_PRIORITY_CLASSES, decode(body, WorkloadPriorityClass))


def queued(h: Harness, job: Job) -> Workload:
    h.event("ADDED", JOBS, job)
    (create,) = of(h.take(), "create-workload")
    workload = created_workload(h, create)
    h.reconciler.handle(WriteDone(create, body=msgspec.json.encode(workload)))
    return workload
