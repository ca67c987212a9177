"""Issue 28 item 1: a Job whose parallelism is raised no longer matches its Workload.

As Kueue v0.18.1's job reconciler: an admitted (or running) Job is stopped and its Workload
deleted ("Deleted not matching Workload"), then a new Workload is created for what the Job asks
now; a suspended Job whose Workload holds no quota gets its Workload updated in place.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from reconciler.api import Job, Workload
from reconciler.api.resources import JOBS, WORKLOADS
from reconciler.runtime.shared.actions import Create, Delete, MergePatch, PostEvent
from reconciler.runtime.shared.writer import WriteDone
from tests.support.memory_api import merge
from tests.support.reconciler_harness import (
    GPU,
    Harness,
    apply_patch,
    created_workload,
    decode,
    gpu_job,
    of,
    queues,
    submitted,
)


def _reasons(actions: Sequence[object]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for action in actions:
        if isinstance(action, PostEvent):
            body = msgspec.json.decode(action.body)
            out.append((body["reason"], body["message"]))
    return out


def _with(h: Harness, job: Job, **spec: object) -> Job:
    body = msgspec.json.decode(msgspec.json.encode(job))
    body["spec"].update(spec)
    body["metadata"]["resourceVersion"] = h.next_rv()
    changed: Job = decode(body, Job)
    return changed


def _patched(h: Harness, job: Job, patch: bytes) -> Job:
    body = merge(msgspec.json.decode(msgspec.json.encode(job)), msgspec.json.decode(patch))
    body["metadata"]["resourceVersion"] = h.next_rv()
    patched: Job = decode(body, Job)
    return patched


def _admitted(h: Harness) -> tuple[Job, Workload]:
    queues(h)
    h.sync_all()
    job = gpu_job(h, "a")
    workload = submitted(h, job)
    (admit,) = of(h.take(), "admit")
    admitted = apply_patch(h, workload, admit)
    h.reconciler.handle(WriteDone(admit, body=msgspec.json.encode(admitted)))
    h.event("MODIFIED", WORKLOADS, admitted)
    (start,) = of(h.take(), "job-start")
    running = _patched(h, job, start.patch)
    h.reconciler.handle(WriteDone(start, body=msgspec.json.encode(running)))
    h.event("MODIFIED", JOBS, running)
    h.take()
    return running, admitted


def test_raising_parallelism_of_a_running_job_stops_it_and_replaces_its_workload() -> None:
    h = Harness()
    running, admitted = _admitted(h)
    assert h.reconciler.core.ledger.used("cq", ("t4", GPU)) == 1
    raised = _with(h, running, parallelism=3, completions=3)
    h.event("MODIFIED", JOBS, raised)
    actions = h.take()
    (suspend,) = of(actions, "job-suspend")
    assert msgspec.json.decode(suspend.patch) == {"spec": {"suspend": True}}
    assert of(actions, "delete-workload") == []  # the templates are restored from it first
    assert ("Stopped", "No matching Workload; restoring pod templates according to existent Workload") in (
        _reasons(actions)
    )
    stopped = _with(h, raised, suspend=True)
    h.reconciler.handle(WriteDone(suspend, body=msgspec.json.encode(stopped)))
    # Its pod template back as the Workload recorded it (no flavor nodeSelector, no pod set label).
    (restore,) = of(h.take(), "job-restore")
    restored = _patched(h, stopped, restore.patch)
    template = msgspec.json.decode(restored.spec.template)
    assert template["spec"].get("nodeSelector", {}) == {}
    assert "kueue.x-k8s.io/podset" not in template.get("metadata", {}).get("labels", {})
    h.reconciler.handle(WriteDone(restore, body=msgspec.json.encode(restored)))
    h.event("MODIFIED", JOBS, _with(h, restored))
    actions = h.take()
    (delete,) = of(actions, "delete-workload")
    assert isinstance(delete, Delete)
    assert (delete.resource, delete.name) == (WORKLOADS, admitted.metadata.name)
    h.reconciler.handle(WriteDone(delete, body=b""))
    assert ("DeletedWorkload", f"Deleted not matching Workload: ns/{admitted.metadata.name}") in _reasons(
        h.take()
    )
    # The old Workload is gone: a new one asks for the 3 pods, and waits for quota (1 GPU).
    h.event("DELETED", WORKLOADS, admitted)
    actions = h.take()
    (create,) = of(actions, "create-workload")
    assert isinstance(create, Create)
    assert msgspec.json.decode(create.body)["spec"]["podSets"][0]["count"] == 3
    h.event("ADDED", WORKLOADS, created_workload(h, create))
    assert of(h.take(), "admit") == []
    assert h.reconciler.core.ledger.used("cq", ("t4", GPU)) == 0


def test_a_job_re_applied_suspended_and_raised_keeps_its_template_and_loses_its_workload() -> None:
    """A manifest written for Kueue carries `suspend: true`: re-applied with a higher parallelism
    after admission, the Job arrives suspended by its user. Kueue only deletes the Workload (its
    stopJob runs for a running job alone), so the flavor's nodeSelector stays until the next
    admission; nothing is restored."""
    h = Harness()
    running, admitted = _admitted(h)
    reapplied = _with(h, running, parallelism=3, completions=3, suspend=True)
    h.event("MODIFIED", JOBS, reapplied)
    actions = h.take()
    assert of(actions, "job-restore") == []
    assert of(actions, "job-suspend") == []
    (delete,) = of(actions, "delete-workload")
    assert isinstance(delete, Delete)
    assert delete.name == admitted.metadata.name
    template = msgspec.json.decode(reapplied.spec.template)
    assert template["spec"]["nodeSelector"]  # the flavor's labels stay, as Kueue leaves them


def test_a_replaced_workload_is_deleted_once() -> None:
    h = Harness()
    running, _ = _admitted(h)
    raised = _with(h, running, parallelism=2, completions=2)
    h.event("MODIFIED", JOBS, raised)
    (suspend,) = of(h.take(), "job-suspend")
    stopped = _with(h, raised, suspend=True)
    h.reconciler.handle(WriteDone(suspend, body=msgspec.json.encode(stopped)))
    (restore,) = of(h.take(), "job-restore")
    restored = _patched(h, stopped, restore.patch)
    h.reconciler.handle(WriteDone(restore, body=msgspec.json.encode(restored)))
    h.event("MODIFIED", JOBS, _with(h, restored))
    (delete,) = of(h.take(), "delete-workload")
    h.reconciler.handle(WriteDone(delete, body=b""))
    h.take()
    # Events before the watch shows the deletion do not ask again.
    h.event("MODIFIED", JOBS, _with(h, running, parallelism=2, completions=2, suspend=True))
    assert of(h.take(), "delete-workload") == []


def test_raising_parallelism_while_pending_updates_the_workload() -> None:
    h = Harness()
    queues(h, gpus=0)  # no quota: the Workload pends
    h.sync_all()
    job = gpu_job(h, "a")
    workload = submitted(h, job)
    assert of(h.take(), "admit") == []
    h.event("MODIFIED", JOBS, _with(h, job, parallelism=3, completions=3))
    actions = h.take()
    (update,) = of(actions, "workload-update")
    assert isinstance(update, MergePatch)
    patch = msgspec.json.decode(update.patch)
    assert [ps["count"] for ps in patch["spec"]["podSets"]] == [3]
    assert patch["metadata"]["resourceVersion"] == workload.metadata.resource_version
    assert of(actions, "delete-workload") == []
    assert of(actions, "job-suspend") == []
    body = msgspec.json.decode(msgspec.json.encode(workload))
    body["spec"]["podSets"] = patch["spec"]["podSets"]
    body["metadata"] |= {"resourceVersion": h.next_rv(), "generation": 2}
    updated = decode(body, Workload)
    h.reconciler.handle(WriteDone(update, body=msgspec.json.encode(updated)))
    message = f"Updated not matching Workload for suspended job: ns/{workload.metadata.name}"
    actions = h.take()
    assert ("UpdatedWorkload", message) in _reasons(actions)
    # The queue now holds it for 3 pods; the Job, still matching, is left alone.
    info = h.reconciler.ctx.engine.workload(("ns", workload.metadata.name))
    assert info is not None
    assert [ps.count for ps in info.pod_sets] == [3]
    h.event("MODIFIED", JOBS, _with(h, job, parallelism=3, completions=3))
    assert of(h.take(), "workload-update") == []


def test_a_matching_job_keeps_its_workload() -> None:
    h = Harness()
    running, _ = _admitted(h)
    # Labels and status changes are not a different job.
    h.event("MODIFIED", JOBS, _with(h, running, parallelism=1))
    actions = h.take()
    assert of(actions, "delete-workload") == []
    assert of(actions, "job-suspend") == []
