"""The reconciler as logic over plain data: watch events in, actions out."""

from __future__ import annotations

import msgspec
import pytest
from structlog.testing import capture_logs

from reconciler.api import ClusterQueue, Job, LocalQueue, Namespace, ResourceFlavor, Workload
from reconciler.api.resources import (
    CLUSTER_QUEUES,
    JOBS,
    LOCAL_QUEUES,
    NAMESPACES,
    RESOURCE_FLAVORS,
    WORKLOADS,
)
from reconciler.integrations.batchjob import job_workload_name
from reconciler.kube import Conflict, Forbidden, NamespaceTerminating
from reconciler.runtime.shared.actions import Create, PostEvent
from reconciler.runtime.shared.writer import WriteDone
from tests.support.builders import cluster_queue_body
from tests.support.reconciler_harness import (
    GPU,
    Harness,
    admission_asked,
    apply_patch,
    created_workload,
    decode,
    gpu_job,
    jobs_with_workloads,
    of,
    queues,
    submitted,
)


def test_nothing_is_decided_before_every_watch_has_synced() -> None:
    h = Harness()
    queues(h)
    h.event("ADDED", JOBS, gpu_job(h, "a"))
    assert h.take() == []
    h.sync_all()
    actions = h.take()
    (create,) = of(actions, "create-workload")
    assert isinstance(create, Create)
    assert create.name == job_workload_name("a", "uid-a")
    body = msgspec.json.decode(create.body)
    assert (body["apiVersion"], body["kind"]) == ("kueue.x-k8s.io/v1beta2", "Workload")


def test_admission_flow_from_job_to_start() -> None:
    h = Harness()
    queues(h)
    h.sync_all()
    job = gpu_job(h, "a")
    workload = submitted(h, job)
    actions = h.take()
    (admit,) = of(actions, "admit")
    patch = msgspec.json.decode(admit.patch)
    # Optimistic concurrency: the admission is conditional on the version it was decided on.
    assert patch["metadata"]["resourceVersion"] == workload.metadata.resource_version
    assert patch["status"]["admission"]["clusterQueue"] == "cq"
    assert h.reconciler.core.ledger.used("cq", ("t4", GPU)) == 1
    admitted = apply_patch(h, workload, admit)
    h.reconciler.handle(WriteDone(admit, body=msgspec.json.encode(admitted)))
    actions = h.take()
    (start,) = of(actions, "job-start")
    assert msgspec.json.decode(start.patch)["spec"] == {
        "suspend": False,
        "template": {
            "spec": {"nodeSelector": {"gpu": "t4"}},
            # Kueue's pod set label and its queue labels (AssignQueueLabelsForPods, on by default).
            "metadata": {
                "labels": {
                    "kueue.x-k8s.io/podset": "main",
                    "kueue.x-k8s.io/local-queue-name": "lq",
                    "kueue.x-k8s.io/cluster-queue-name": "cq",
                }
            },
        },
    }
    reasons = {msgspec.json.decode(e.body)["reason"] for e in actions if isinstance(e, PostEvent)}
    assert {"QuotaReserved", "Admitted"} <= reasons
    # The Job controller touches the Job before our unsuspend is seen: no second start.
    touched = msgspec.json.decode(msgspec.json.encode(job))
    touched["metadata"]["resourceVersion"] = h.next_rv()
    touched["status"] = {"active": 0}
    h.event("MODIFIED", JOBS, decode(touched, Job))
    assert of(h.take(), "job-start") == []
    touched["spec"]["suspend"] = False
    h.reconciler.handle(WriteDone(start, body=msgspec.json.encode(touched)))
    started = [msgspec.json.decode(e.body)["reason"] for e in h.take() if isinstance(e, PostEvent)]
    assert started == ["Started"]


def test_a_conflict_rolls_the_reservation_back() -> None:
    h = Harness()
    _job, workload, admit = admission_asked(h)
    assert h.reconciler.core.ledger.used("cq", ("t4", GPU)) == 1
    h.reconciler.handle(WriteDone(admit, error=Conflict(409, "Conflict", "the object has been modified")))
    assert h.reconciler.core.ledger.used("cq", ("t4", GPU)) == 0
    # The fresh version arrives through the watch: decided again, on that version.
    fresher = decode(
        {
            **msgspec.json.decode(msgspec.json.encode(workload)),
            "metadata": {
                **msgspec.json.decode(msgspec.json.encode(workload.metadata)),
                "resourceVersion": h.next_rv(),
                "generation": 2,
            },
        },
        Workload,
    )
    h.event("MODIFIED", WORKLOADS, fresher)
    (again,) = of(h.take(), "admit")
    assert (
        msgspec.json.decode(again.patch)["metadata"]["resourceVersion"] == fresher.metadata.resource_version
    )


def test_a_failed_admission_of_a_workload_released_meanwhile_is_decided_again_at_once() -> None:
    """While its admission was in flight the workload lost its reservation (e.g. a preemptor in
    the cohort took it back) and its newer version came (set aside then). When the 409 comes back
    no further event will: it is decided again on what the store has at once, not left out of
    every queue until the next resync (seen on Kueue's large shape: 30 s stalls)."""
    h = Harness()
    _job, workload, admit = admission_asked(h)
    key = (workload.metadata.namespace, workload.metadata.name)
    h.reconciler.core.remove_workload(key)  # its reservation taken back meanwhile
    body = msgspec.json.decode(msgspec.json.encode(workload))
    body["metadata"]["resourceVersion"] = h.next_rv()
    h.event("MODIFIED", WORKLOADS, decode(body, Workload))
    assert of(h.take(), "admit") == []  # (its admission is in flight)
    h.reconciler.handle(WriteDone(admit, error=Conflict(409, "Conflict", "the object has been modified")))
    (again,) = of(h.take(), "admit")
    assert (
        msgspec.json.decode(again.patch)["metadata"]["resourceVersion"] == body["metadata"]["resourceVersion"]
    )


def test_an_unsuspended_queue_job_is_suspended_at_once_with_an_event() -> None:
    h = Harness()
    queues(h)
    h.sync_all()
    h.event("ADDED", JOBS, gpu_job(h, "eager", suspend=False))
    actions = h.take()
    (suspend,) = of(actions, "job-suspend")
    assert msgspec.json.decode(suspend.patch) == {"spec": {"suspend": True}}
    events = [msgspec.json.decode(e.body) for e in actions if isinstance(e, PostEvent)]
    assert any(e["reason"] == "Suspended" and "queue lq" in e["message"] for e in events)


def test_second_job_waits_with_kueues_message_and_its_status_is_written_once() -> None:
    h = Harness()
    queues(h)
    h.sync_all()
    for workload in jobs_with_workloads(h, "a", "b").values():
        h.event("ADDED", WORKLOADS, workload)
    actions = h.take()
    assert len(of(actions, "admit")) == 1
    (pending,) = of(actions, "workload-status")
    status = msgspec.json.decode(pending.patch)["status"]
    conditions = {c["type"]: c for c in status["conditions"]}
    assert set(conditions) == {"QuotaReserved", "PodsReady"}
    # waitForPodsReady (on by default): not admitted yet, so PodsReady=False WaitForStart, as Kueue
    assert (conditions["PodsReady"]["status"], conditions["PodsReady"]["reason"]) == ("False", "WaitForStart")
    quota = conditions["QuotaReserved"]
    assert quota["reason"] == "Pending"
    assert quota["message"].endswith(
        "insufficient unused quota for nvidia.com/gpu in flavor t4, 1 more needed"
    )
    # The same verdict is not written again on the next batch.
    assert of(h.take(), "workload-status") == []


def admitted_job_a() -> tuple[Harness, Job, Workload]:
    """Job a admitted and its admission seen back through the watch."""
    h = Harness()
    job, workload, admit = admission_asked(h)
    admitted = apply_patch(h, workload, admit)
    h.reconciler.handle(WriteDone(admit, body=msgspec.json.encode(admitted)))
    h.event("MODIFIED", WORKLOADS, admitted)
    h.take()
    return h, job, admitted


@pytest.mark.parametrize("finished", ["Complete", "Failed"])
def test_a_finished_job_finishes_its_workload_and_frees_quota(finished: str) -> None:
    h, job, admitted = admitted_job_a()
    done_body = msgspec.json.decode(msgspec.json.encode(job))
    done_body["spec"]["suspend"] = False
    done_body["status"] = {"conditions": [{"type": finished, "status": "True", "message": "done"}]}
    done_body["metadata"]["resourceVersion"] = h.next_rv()
    h.event("MODIFIED", JOBS, decode(done_body, Job))
    actions = h.take()
    (finish,) = of(actions, "finish")
    (cond,) = [
        c for c in msgspec.json.decode(finish.patch)["status"]["conditions"] if c["type"] == "Finished"
    ]
    assert cond["reason"] == ("Succeeded" if finished == "Complete" else "Failed")
    # Until the API shows the Workload finished, it still counts against the quota.
    assert h.reconciler.core.ledger.used("cq", ("t4", GPU)) == 1
    current = h.reconciler.workloads[(admitted.metadata.namespace, admitted.metadata.name)]
    written = apply_patch(h, current, finish)
    h.reconciler.handle(WriteDone(finish, body=msgspec.json.encode(written)))
    assert h.reconciler.core.ledger.used("cq", ("t4", GPU)) == 0


def test_a_deleted_admitted_jobs_workload_is_finished_owner_not_found_and_frees_quota() -> None:
    """As Kueue (FinishOrphanedWorkloads): the Workload of a Job that is gone is finished with
    OwnerNotFound, which returns its quota, and Kueue's finalizer is taken off."""
    h, job, admitted = admitted_job_a()
    h.event("DELETED", JOBS, job)
    actions = h.take()
    (finish,) = of(actions, "finish")
    (cond,) = [
        c for c in msgspec.json.decode(finish.patch)["status"]["conditions"] if c["type"] == "Finished"
    ]
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "True",
        "OwnerNotFound",
        "The workload's owner no longer exists",
    )
    (release,) = of(actions, "release-finalizer")
    assert msgspec.json.decode(release.patch)["metadata"]["finalizers"] == []
    assert h.reconciler.core.ledger.used("cq", ("t4", GPU)) == 1  # until the API shows it finished
    current = h.reconciler.workloads[(admitted.metadata.namespace, admitted.metadata.name)]
    written = apply_patch(h, current, finish)
    h.reconciler.handle(WriteDone(finish, body=msgspec.json.encode(written)))
    assert h.reconciler.core.ledger.used("cq", ("t4", GPU)) == 0


def test_only_a_change_of_what_the_core_models_wakes_parked_workloads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A ClusterQueue status write (often our own), a flavor's new finalizer or an unchanged
    namespace must not wake parked workloads: Kueue retries them on quota or spec changes."""
    h = Harness()
    queues(h)
    h.sync_all()
    h.take()
    retried: list[object] = []
    core = h.reconciler.core
    monkeypatch.setattr(core.queues, "retry", lambda names=None: retried.append(names))
    cq = h.reconciler.ctx.store.cluster_queues["cq"]
    body = msgspec.json.decode(msgspec.json.encode(cq))
    body["status"] = {"admittedWorkloads": 1}
    body["metadata"]["resourceVersion"] = h.next_rv()
    h.event("MODIFIED", CLUSTER_QUEUES, decode(body, ClusterQueue))
    flavor = msgspec.json.decode(msgspec.json.encode(core.flavors["t4"]))
    flavor["metadata"]["finalizers"] = ["kueue.x-k8s.io/resource-in-use"]
    h.event("MODIFIED", RESOURCE_FLAVORS, decode(flavor, ResourceFlavor))
    h.event("MODIFIED", NAMESPACES, decode({"metadata": {"name": "ns"}}, Namespace))
    assert retried == []
    body["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 2
    h.event("MODIFIED", CLUSTER_QUEUES, decode(body, ClusterQueue))
    assert retried


def test_a_local_queue_status_write_does_not_requeue_its_parked_workloads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    h = Harness()
    queues(h)
    h.sync_all()
    h.take()
    parked: list[object] = []
    queue = h.reconciler.core.queues
    lq = h.reconciler.ctx.store.local_queues[("ns", "lq")]
    body = msgspec.json.decode(msgspec.json.encode(lq))
    body["status"] = {"pendingWorkloads": 1}
    body["metadata"]["resourceVersion"] = h.next_rv()
    before = dict(queue.local_queues)
    replaced = queue._replace_members

    def spy(local_queue: tuple[str, str]) -> None:
        parked.append(local_queue)
        replaced(local_queue)

    monkeypatch.setattr(queue, "_replace_members", spy)
    h.event("MODIFIED", LOCAL_QUEUES, decode(body, LocalQueue))
    assert parked == []
    assert queue.local_queues == before
    body["spec"]["clusterQueue"] = "other"
    h.event("MODIFIED", LOCAL_QUEUES, decode(body, LocalQueue))
    assert parked == [("ns", "lq")]


def test_a_create_refused_in_a_terminating_namespace_is_not_a_write_error() -> None:
    # The API refuses new objects in a namespace being deleted with a 403 whose cause says so;
    # that is not an RBAC problem and must not be logged or counted as one.
    h = Harness()
    queues(h)
    h.sync_all()
    h.event("ADDED", JOBS, gpu_job(h, "a"))
    (create,) = of(h.take(), "create-workload")
    terminating = NamespaceTerminating(403, "Forbidden", "unable to create new content in namespace ns")
    with capture_logs() as logs:
        h.reconciler.handle(WriteDone(create, error=terminating))
        h.take()
    assert h.reconciler.ctx.stats.write_errors == 0
    assert [e for e in logs if e["log_level"] in ("warning", "error")] == []
    # A plain 403 (RBAC) still is one.
    h.event("ADDED", JOBS, gpu_job(h, "b"))
    (create_b,) = of(h.take(), "create-workload")
    with capture_logs() as logs:
        h.reconciler.handle(WriteDone(create_b, error=Forbidden(403, "Forbidden", "no RBAC")))
    assert h.reconciler.ctx.stats.write_errors == 1
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["write failed"]


def test_a_workload_told_twice_in_one_cycle_gets_one_status_write_and_both_events() -> None:
    """A release lets two heads of a cohort in; the one that fits without borrowing goes first,
    so the borrower is told 'no longer fits' and then, in the next round of the same cycle, by
    how much quota it lacks. Both are recorded as Events, as Kueue's cycles record them; only the
    last is written to its status (the first would be overwritten at once)."""
    h = Harness()
    queues(h, gpus=0)
    h.event(
        "MODIFIED",
        CLUSTER_QUEUES,
        decode(cluster_queue_body("cq", [("t4", {GPU: 0})], cohort="pool"), ClusterQueue),
    )
    h.event(
        "ADDED",
        CLUSTER_QUEUES,
        decode(cluster_queue_body("cq-b", [("t4", {GPU: 0})], cohort="pool"), ClusterQueue),
    )
    local_queue = {"metadata": {"name": "lq-b", "namespace": "ns"}, "spec": {"clusterQueue": "cq-b"}}
    h.event("ADDED", LOCAL_QUEUES, decode(local_queue, LocalQueue))
    h.sync_all()
    borrower = msgspec.json.decode(msgspec.json.encode(gpu_job(h, "b")))
    borrower["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "lq-b"
    for job in (gpu_job(h, "a"), decode(borrower, Job)):
        h.event("ADDED", JOBS, job)
        (create,) = of(h.take(), "create-workload")
        h.event("ADDED", WORKLOADS, created_workload(h, create))
    h.take()
    h.event(
        "MODIFIED",
        CLUSTER_QUEUES,
        decode(cluster_queue_body("cq", [("t4", {GPU: 1})], cohort="pool"), ClusterQueue),
    )
    actions = h.take()
    assert [a.name for a in of(actions, "admit")] == [job_workload_name("a", "uid-a")]
    name_b = job_workload_name("b", "uid-b")
    writes = [msgspec.json.decode(a.patch) for a in of(actions, "workload-status") if a.name == name_b]
    assert [
        c["message"] for w in writes for c in w["status"]["conditions"] if c["type"] == "QuotaReserved"
    ] == [
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor t4, "
        "1 more needed"
    ]
    told = [msgspec.json.decode(e.body) for e in actions if isinstance(e, PostEvent)]
    assert [e["message"][:40] for e in told if e["involvedObject"]["name"] == name_b] == [
        "Workload no longer fits after processing",
        "couldn't assign flavors to pod set main:",
    ]


def test_an_admission_is_sent_on_the_version_our_own_pending_write_left() -> None:
    """b's pending verdict is in flight when the GPU comes back and b is admitted on the version
    the store showed. The verdict lands first (same slot) and moves the version on: the admission
    is sent on the version after it, not failed (409) against our own write."""
    h = Harness()
    queues(h)
    h.sync_all()
    workloads = jobs_with_workloads(h, "a", "b")
    for workload in workloads.values():
        h.event("ADDED", WORKLOADS, workload)
    actions = h.take()
    (verdict,) = [a for a in of(actions, "workload-status") if a.name == workloads["b"].metadata.name]
    assert verdict.prepare(verdict.patch) == verdict.patch  # sent now, on b's version
    h.event("DELETED", WORKLOADS, workloads["a"])  # the GPU comes back
    (admit,) = of(h.take(), "admit")
    decided_on = workloads["b"].metadata.resource_version
    assert msgspec.json.decode(admit.patch)["metadata"]["resourceVersion"] == decided_on
    told = apply_patch(h, workloads["b"], verdict)
    h.reconciler.handle(WriteDone(verdict, body=msgspec.json.encode(told)))
    sent = msgspec.json.decode(admit.prepare(admit.patch))
    assert sent["metadata"]["resourceVersion"] == told.metadata.resource_version
    assert sent["status"] == msgspec.json.decode(admit.patch)["status"]
