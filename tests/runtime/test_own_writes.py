"""Our own write's watch event (and newer ones) can arrive before the write's response.

Seen on the test-bed after a leader hand-over: the Job controller's update followed our unsuspend
on the watch before the PATCH response was handled; the older response then replaced the newer
cached Job and every later Job event was ignored while waiting for a version already seen, so the
Job's completion never finished its Workload and its quota was held for ever.
"""

from __future__ import annotations

import msgspec

from reconciler.api import Job, Workload
from reconciler.api.resources import JOBS, WORKLOADS
from reconciler.runtime.shared.writer import WriteDone
from tests.support.reconciler_harness import (
    GPU,
    Harness,
    admission_asked,
    apply_patch,
    decode,
    of,
)


def test_job_events_that_overtake_our_write_response_are_kept() -> None:
    h = Harness()
    job, workload, admit = admission_asked(h)
    admitted = apply_patch(h, workload, admit)
    h.reconciler.handle(WriteDone(admit, body=msgspec.json.encode(admitted)))
    h.event("MODIFIED", WORKLOADS, admitted)
    (start,) = of(h.take(), "job-start")
    body = msgspec.json.decode(msgspec.json.encode(job))
    body["spec"]["suspend"] = False
    body["metadata"]["resourceVersion"] = h.next_rv()
    started: Job = decode(body, Job)
    h.event("MODIFIED", JOBS, started)  # our unsuspend, on the watch
    body["metadata"]["resourceVersion"] = h.next_rv()
    body["status"] = {"active": 1}
    h.event("MODIFIED", JOBS, decode(body, Job))  # the Job controller's update
    h.reconciler.handle(WriteDone(start, body=msgspec.json.encode(started)))  # our response, late
    key = ("ns", "a")
    assert (
        h.reconciler.store.of_kind("Job")[key].metadata.resource_version
        == body["metadata"]["resourceVersion"]
    )
    h.take()
    body["metadata"]["resourceVersion"] = h.next_rv()
    body["status"] = {"conditions": [{"type": "Complete", "status": "True", "message": "done"}]}
    h.event("MODIFIED", JOBS, decode(body, Job))
    assert of(h.take(), "finish"), "the Job's completion was ignored"


def test_workload_events_that_overtake_our_admission_response_are_kept() -> None:
    h = Harness()
    _job, workload, admit = admission_asked(h)
    admitted = apply_patch(h, workload, admit)
    h.event("MODIFIED", WORKLOADS, admitted)  # our admission, on the watch
    newer_body = msgspec.json.decode(msgspec.json.encode(admitted))
    newer_body["metadata"]["resourceVersion"] = h.next_rv()
    newer_body["metadata"]["labels"] = {"touched": "by-someone"}
    newer: Workload = decode(newer_body, Workload)
    h.event("MODIFIED", WORKLOADS, newer)
    h.reconciler.handle(WriteDone(admit, body=msgspec.json.encode(admitted)))  # our response, late
    key = (workload.metadata.namespace, workload.metadata.name)
    assert h.reconciler.workloads[key].metadata.resource_version == newer.metadata.resource_version
    assert h.reconciler.core.ledger.used("cq", ("t4", GPU)) == 1
    # Later events are not ignored: a deletion of the Workload frees its quota.
    h.event("DELETED", WORKLOADS, newer)
    assert key not in h.reconciler.workloads
    assert h.reconciler.core.ledger.used("cq", ("t4", GPU)) == 0
