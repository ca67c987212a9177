"""Issue 41: a MultiKueue worker's Workloads, as Kueue v0.18.1's worker runs them.

A manager creates the Workload on the worker (ownerless, with the multikueue-origin label) and
then a copy of the job naming it in `kueue.x-k8s.io/prebuilt-workload-name`. The Workload is
queued and admitted like any other and never taken for an orphan; the job adopts it instead of
creating its own, starts with the worker pod label, waits stopped while it is missing (deleted
by the manager), and finishes it OutOfSync when the job no longer matches it.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import pytest

from reconciler.api import Job, Workload
from reconciler.api.resources import JOBS, WORKLOADS
from reconciler.integrations.prebuilt import (
    MULTIKUEUE_ORIGIN_LABEL,
    MULTIKUEUE_WORKER_POD_LABEL,
    PREBUILT_WORKLOAD_KEY,
)
from reconciler.runtime.shared.actions import Create, MergePatch, PostEvent
from reconciler.runtime.shared.writer import WriteDone
from tests.support.memory_api import merge
from tests.support.reconciler_harness import (
    Harness,
    apply_patch,
    created_workload,
    decode,
    gpu_job,
    of,
    queues,
)

NAME = "job-a-mk123"


def _events(actions: Sequence[object]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for action in actions:
        if isinstance(action, PostEvent):
            body = msgspec.json.decode(action.body)
            out.append((body["reason"], body["message"]))
    return out


def _manager_workload(h: Harness) -> Workload:
    """The Workload a manager creates on the worker: a job's pod sets, no owner, its origin."""
    other = Harness()
    queues(other)
    other.sync_all()
    other.event("ADDED", JOBS, gpu_job(other, "a"))
    (create,) = of(other.take(), "create-workload")
    assert isinstance(create, Create)
    body = msgspec.json.decode(msgspec.json.encode(created_workload(other, create)))
    meta = body["metadata"]
    meta.update(name=NAME, ownerReferences=[], labels={MULTIKUEUE_ORIGIN_LABEL: "manager"})
    meta["resourceVersion"] = h.next_rv()
    workload: Workload = decode(body, Workload)
    return workload


def _worker_job(h: Harness, *, where: str = "annotations", suspend: bool = True) -> Job:
    body = msgspec.json.decode(msgspec.json.encode(gpu_job(h, "a", suspend=suspend)))
    body["metadata"].setdefault(where, {})[PREBUILT_WORKLOAD_KEY] = NAME
    body["metadata"]["labels"][MULTIKUEUE_ORIGIN_LABEL] = "manager"
    job: Job = decode(body, Job)
    return job


def _patched(h: Harness, obj: object, patch: bytes, kind: type[object]) -> object:
    body = merge(msgspec.json.decode(msgspec.json.encode(obj)), msgspec.json.decode(patch))
    body["metadata"]["resourceVersion"] = h.next_rv()
    return decode(body, kind)


def _admitted(h: Harness) -> Workload:
    """The manager's Workload seen on the worker and admitted (no job yet)."""
    queues(h)
    h.sync_all()
    workload = _manager_workload(h)
    h.event("ADDED", WORKLOADS, workload)
    (admit,) = of(h.take(), "admit")
    admitted = apply_patch(h, workload, admit)
    h.reconciler.handle(WriteDone(admit, body=msgspec.json.encode(admitted)))
    h.event("MODIFIED", WORKLOADS, admitted)
    actions = h.take()
    assert not of(actions, "finish")
    assert not of(actions, "delete-workload")
    return admitted


def _adopted(h: Harness, admitted: Workload, job: Job) -> Workload:
    (adopt,) = of(h.take(), "workload-owners")
    assert isinstance(adopt, MergePatch)
    owned = _patched(h, admitted, adopt.patch, Workload)
    assert isinstance(owned, Workload)
    h.reconciler.handle(WriteDone(adopt, body=msgspec.json.encode(owned)))
    h.event("MODIFIED", WORKLOADS, owned)
    return owned


@pytest.mark.parametrize("where", ["annotations", "labels"])
def test_a_job_adopts_the_managers_workload_and_starts_with_the_worker_pod_label(where: str) -> None:
    h = Harness()
    admitted = _admitted(h)
    assert h.reconciler.core.is_admitted(("ns", NAME))
    job = _worker_job(h, where=where)
    h.event("ADDED", JOBS, job)
    actions = h.take()
    assert not of(actions, "create-workload")
    (adopt,) = of(actions, "workload-owners")
    meta = msgspec.json.decode(adopt.patch)["metadata"]
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "a",
            "uid": "uid-a",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert meta["labels"] == {"kueue.x-k8s.io/job-uid": "uid-a"}
    owned = _patched(h, admitted, adopt.patch, Workload)
    h.reconciler.handle(WriteDone(adopt, body=msgspec.json.encode(owned)))
    h.event("MODIFIED", WORKLOADS, owned)
    actions = h.take()
    (start,) = of(actions, "job-start")
    labels = msgspec.json.decode(start.patch)["spec"]["template"]["metadata"]["labels"]
    assert labels[MULTIKUEUE_WORKER_POD_LABEL] == "true"
    assert "UpdatedWorkload" not in [reason for reason, _ in _events(actions)]


def test_a_job_whose_prebuilt_workload_is_missing_is_stopped_and_gets_none_of_its_own() -> None:
    h = Harness()
    queues(h)
    h.sync_all()
    h.event("ADDED", JOBS, _worker_job(h, suspend=False))
    actions = h.take()
    assert not of(actions, "create-workload")
    (suspend,) = of(actions, "job-suspend")
    assert msgspec.json.decode(suspend.patch) == {"spec": {"suspend": True}}
    assert ("Stopped", "missing workload") in _events(actions)


def test_the_manager_deleting_the_workload_stops_the_running_job() -> None:
    h = Harness()
    admitted = _admitted(h)
    job = _worker_job(h)
    h.event("ADDED", JOBS, job)
    owned = _adopted(h, admitted, job)
    (start,) = of(h.take(), "job-start")
    running = _patched(h, job, start.patch, Job)
    h.reconciler.handle(WriteDone(start, body=msgspec.json.encode(running)))
    h.event("MODIFIED", JOBS, running)
    h.take()
    h.event("DELETED", WORKLOADS, owned)
    actions = h.take()
    assert of(actions, "job-suspend")
    assert not of(actions, "create-workload")
    assert not h.reconciler.core.is_admitted(("ns", NAME))


def test_a_job_that_no_longer_matches_its_prebuilt_workload_finishes_it_out_of_sync() -> None:
    h = Harness()
    queues(h)
    h.sync_all()
    workload = _manager_workload(h)
    h.event("ADDED", WORKLOADS, workload)
    h.take()
    body = msgspec.json.decode(msgspec.json.encode(_worker_job(h)))
    body["spec"]["parallelism"] = 2
    body["spec"]["completions"] = 2
    job: Job = decode(body, Job)
    h.event("ADDED", JOBS, job)
    _adopted(h, workload, job)
    actions = h.take()
    assert not of(actions, "delete-workload")
    assert not of(actions, "workload-update")
    (finish,) = of(actions, "finish")
    (cond,) = [
        c for c in msgspec.json.decode(finish.patch)["status"]["conditions"] if c["type"] == "Finished"
    ]
    assert (cond["reason"], cond["message"]) == (
        "OutOfSync",
        "The prebuilt workload is out of sync with its user job",
    )


def test_a_workload_controlled_by_another_object_is_not_adopted() -> None:
    h = Harness()
    queues(h)
    h.sync_all()
    body = msgspec.json.decode(msgspec.json.encode(_manager_workload(h)))
    body["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "other", "uid": "uid-other", "controller": True}
    ]
    h.event("ADDED", WORKLOADS, decode(body, Workload))
    h.take()
    h.event("ADDED", JOBS, _worker_job(h, suspend=False))
    actions = h.take()
    assert not of(actions, "workload-owners")
    assert not of(actions, "create-workload")
    assert of(actions, "job-suspend")
