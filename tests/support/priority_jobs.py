"""Jobs with priority classes on the reconciler harness: a WorkloadPriorityClass added, a labelled Job, its
queued Workload."""

from __future__ import annotations

import msgspec
from reconciler.api import Job
from reconciler.api import Workload
from reconciler.api import WorkloadPriorityClass
from reconciler.api.resources import JOBS
from reconciler.api.resources import WORKLOAD_PRIORITY_CLASSES
from reconciler.runtime.writer import WriteDone

from tests.support.reconciler_harness import Harness
from tests.support.reconciler_harness import created_workload
from tests.support.reconciler_harness import decode
from tests.support.reconciler_harness import gpu_job
from tests.support.reconciler_harness import of


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
