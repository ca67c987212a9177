"""The reconciler's waitForPodsReady flow, driven by events and a controlled clock."""

from __future__ import annotations

import msgspec

from reconciler.api import ClusterQueue, Job, Workload
from reconciler.api.resources import CLUSTER_QUEUES, JOBS, PODS, WORKLOADS
from reconciler.api.times import epoch
from reconciler.config import parse_config
from reconciler.kube import Conflict
from reconciler.runtime.shared.actions import Action
from reconciler.runtime.shared.writer import WriteDone
from tests.support.builders import job_body
from tests.support.metrics import scrape
from tests.support.metrics import value as metric
from tests.support.pods_ready_harness import (
    T0,
    Clocked,
    admitted_job,
    conditions,
    events,
    queued_job,
    ready_pod,
    started,
)
from tests.support.reconciler_harness import GPU, apply_patch, created_workload, decode, of, queues

GPU_CLAIM = {"name": "g", "resourceClaimTemplateName": "gpu"}
BLOCK_ADMISSION = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
    "kind": "Configuration",
    "resources": {"deviceClassMappings": [{"name": GPU, "deviceClassNames": ["gpu.nvidia.com"]}]},
    "waitForPodsReady": {"timeout": "60s", "blockAdmission": True},
}


def test_a_stalled_job_is_evicted_at_the_deadline_and_its_quota_goes_to_the_next() -> None:
    """Kueue's two steps: Evicted=True while the Job's pods are still active (the quota kept, the
    next Job not admitted), then the reservation ends once `status.active` is 0."""
    h = Clocked()
    queues(h)
    h.sync_all()
    job_a, wl_a, actions = admitted_job(h, "a")
    admit_conditions = conditions(of(actions, "admit")[0])
    assert admit_conditions["PodsReady"] == ("False", "WaitForStart", "Not all pods are ready or succeeded")
    _, wl_b, _ = admitted_job(h, "b")
    assert wl_b.status.admission is None  # waits for the only GPU
    job_a = started(h, job_a)
    h.event("MODIFIED", JOBS, job_a)
    h.take()
    assert of(h.tick(T0 + 59), "evict") == []
    actions = h.tick(T0 + 61)
    (evict,) = of(actions, "evict")
    body = msgspec.json.decode(evict.patch)
    assert body["metadata"]["resourceVersion"] == wl_a.metadata.resource_version
    message = f"Exceeded the PodsReady timeout ns/{wl_a.metadata.name}"
    got = conditions(evict)
    assert got["Evicted"] == ("True", "PodsReadyTimeout", message)
    # The Job still has an active pod: the reservation is kept (Kueue's first step).
    assert got["QuotaReserved"][0] == "True"
    assert got["Admitted"][0] == "True"
    assert "Requeued" not in got
    assert body["status"]["admission"] is not None
    assert body["status"]["requeueState"]["count"] == 1
    requeue_at = epoch(body["status"]["requeueState"]["requeueAt"])
    assert requeue_at is not None
    assert T0 + 70 <= requeue_at <= T0 + 72
    assert h.reconciler.core.ledger.used("cq", ("t4", GPU)) == 1
    assert of(h.take(), "admit") == []
    evicted = h.land(evict, wl_a)
    actions = h.take()
    assert ("EvictedDueToPodsReadyTimeout", message) in events(actions)
    assert ("Stopped", message) in events(actions)
    assert of(actions, "job-suspend")
    # Landed, but the Job's pods still run: the quota stays with it, job b waits.
    assert of(actions, "admit") == []
    assert h.reconciler.core.ledger.used("cq", ("t4", GPU)) == 1
    assert h.reconciler.core.is_admitted(("ns", wl_a.metadata.name))
    h.event("MODIFIED", WORKLOADS, evicted)
    assert of(h.take(), "admit") == []
    # Suspended by the Job controller's side, its pod still terminating (active 1).
    suspended = msgspec.json.decode(msgspec.json.encode(job_a))
    suspended["spec"]["suspend"] = True
    suspended["metadata"]["resourceVersion"] = h.next_rv()
    h.event("MODIFIED", JOBS, decode(suspended, Job))
    actions = h.take()
    assert of(actions, "job-clear-start") == []  # pods still active
    assert of(actions, "evict") == []
    assert of(actions, "admit") == []
    assert of(h.tick(T0 + 64), "evict") == []  # no second deadline on an evicting Workload
    # Its pod is gone (active 0): the reservation ends now (Kueue's second step).
    suspended["status"] = {"startTime": suspended["status"]["startTime"], "active": 0}
    suspended["metadata"]["resourceVersion"] = h.next_rv()
    h.event("MODIFIED", JOBS, decode(suspended, Job))
    actions = h.take()
    (release,) = of(actions, "evict")
    got = conditions(release)
    assert got["Evicted"] == ("True", "PodsReadyTimeout", message)
    assert got["QuotaReserved"] == ("False", "Pending", message)
    assert got["Admitted"][0] == "False"
    assert got["Requeued"] == ("False", "PodsReadyTimeout", message)
    assert msgspec.json.decode(release.patch)["status"]["admission"] is None
    assert msgspec.json.decode(release.patch)["status"]["requeueState"]["count"] == 1
    (clear,) = of(actions, "job-clear-start")
    assert clear.subresource == "status"
    assert h.reconciler.core.ledger.used("cq", ("t4", GPU)) == 1  # until the write lands
    evicted = h.land(release, evicted)
    (admit_b,) = of(h.take(), "admit")
    assert admit_b.name == wl_b.metadata.name
    h.event("MODIFIED", WORKLOADS, evicted)
    suspended["status"] = {}
    suspended["metadata"]["resourceVersion"] = h.next_rv()
    h.reconciler.handle(WriteDone(clear, body=msgspec.json.encode(suspended)))
    (restore,) = of(h.take(), "job-restore")
    assert msgspec.json.decode(restore.patch) == {
        "spec": {
            "template": {
                "spec": {"nodeSelector": {"gpu": None}},
                "metadata": {"labels": {"kueue.x-k8s.io/podset": None}},
            }
        }
    }
    # Backoff: nothing before requeueAt; then Requeued=True and the workload queues again.
    assert of(h.tick(T0 + 65), "requeue") == []
    # Waiting out the backoff: counted as pending (inadmissible), never scheduled.
    assert h.reconciler.core.is_held(("ns", wl_a.metadata.name))
    assert h.reconciler.core.queues.pending_counts("cq")[1] == 1
    assert h.reconciler.core.queues.local_queue_pending_counts("ns", "lq") == (0, 1)
    (requeue,) = of(h.tick(requeue_at + 0.5), "requeue")
    got = conditions(requeue)
    assert got["Requeued"] == ("True", "BackoffFinished", "The workload backoff was finished")
    assert msgspec.json.decode(requeue.patch)["status"]["requeueState"] == {"count": 1, "requeueAt": None}
    h.land(requeue, evicted)
    assert not h.reconciler.core.is_held(("ns", wl_a.metadata.name))
    h.take()
    assert h.reconciler.core.queues.pending_counts("cq") == (0, 1)  # queued again, behind job b's quota


def test_a_restarted_controller_keeps_the_original_deadline() -> None:
    h = Clocked()
    queues(h)
    h.sync_all()
    job_a, wl_a, _ = admitted_job(h, "a")
    # A new process, 40 s later, sees the same Workload: the deadline is still T0 + 60.
    fresh = Clocked()
    fresh.now = T0 + 40
    queues(fresh)
    fresh.event("ADDED", JOBS, started(fresh, job_a))
    fresh.event("ADDED", WORKLOADS, wl_a)
    fresh.sync_all()
    fresh.take()
    assert fresh.reconciler.timers.get(("ns", wl_a.metadata.name), "pods-ready") == T0 + 60
    assert of(fresh.tick(T0 + 59), "evict") == []
    assert of(fresh.tick(T0 + 60), "evict")


def test_ready_pods_stop_the_clock_and_write_pods_ready_started() -> None:
    h = Clocked()
    queues(h)
    h.sync_all()
    job_a, wl_a, _ = admitted_job(h, "a")
    job_a = started(h, job_a)
    h.event("MODIFIED", JOBS, job_a)
    h.take()
    h.event("ADDED", PODS, ready_pod("a"))
    (ready,) = of(h.take(), "pods-ready")
    assert conditions(ready)["PodsReady"] == (
        "True",
        "Started",
        "All pods reached readiness and the workload is running",
    )
    h.land(ready, wl_a)
    assert h.reconciler.timers.get(("ns", wl_a.metadata.name), "pods-ready") is None
    assert of(h.tick(T0 + 120), "evict") == []


def test_a_pod_not_ready_for_longer_than_the_recovery_timeout_evicts_the_workload() -> None:
    """recoveryTimeout: once all pods were ready, a pod that stops being ready starts a clock of
    its own (not the start timeout, which has long passed); at its end Kueue's PodsReadyTimeout
    eviction follows, with WaitForRecovery as the underlying cause."""
    h = Clocked(wait={"recoveryTimeout": "30s"})
    queues(h)
    h.sync_all()
    job_a, wl_a, _ = admitted_job(h, "a")
    key = ("ns", wl_a.metadata.name)
    h.event("MODIFIED", JOBS, started(h, job_a))
    h.take()
    h.now = T0 + 10
    h.event("ADDED", PODS, ready_pod("a"))
    (ready,) = of(h.take(), "pods-ready")
    wl_a = h.land(ready, wl_a)
    h.event("MODIFIED", WORKLOADS, wl_a)
    h.take()
    assert h.reconciler.timers.get(key, "pods-ready") is None
    assert of(h.tick(T0 + 100), "evict") == []  # past the 60 s start timeout, but running
    # The pod stops being ready at T0 + 100: WaitForRecovery, and a 30 s clock from then.
    h.event("MODIFIED", PODS, ready_pod("a", ready=False))
    (recovering,) = of(h.take(), "pods-ready")
    assert conditions(recovering)["PodsReady"] == (
        "False",
        "WaitForRecovery",
        "At least one pod has failed, waiting for recovery",
    )
    wl_a = h.land(recovering, wl_a)
    h.event("MODIFIED", WORKLOADS, wl_a)
    h.take()
    assert h.reconciler.timers.get(key, "pods-ready") == T0 + 130
    assert of(h.tick(T0 + 129), "evict") == []
    (evict,) = of(h.tick(T0 + 131), "evict")
    message = f"Exceeded the PodsReady timeout ns/{wl_a.metadata.name}"
    got = conditions(evict)
    assert got["Evicted"] == ("True", "PodsReadyTimeout", message)
    assert got["QuotaReserved"][0] == "True"  # its Job's pod still runs: kept until it stops
    body = msgspec.json.decode(evict.patch)["status"]
    assert body["admission"] is not None
    assert body["requeueState"]["count"] == 1
    wl_a = h.land(evict, wl_a)
    actions = h.take()
    assert ("EvictedDueToPodsReadyTimeout", message) in events(actions)
    assert of(actions, "job-suspend")
    assert h.reconciler.core.ledger.used("cq", ("t4", GPU)) == 1
    # The Job is suspended and its pod gone: the reservation ends.
    stopped = msgspec.json.decode(msgspec.json.encode(started(h, job_a)))
    stopped["spec"]["suspend"] = True
    stopped["status"] = {"active": 0}
    h.event("MODIFIED", JOBS, decode(stopped, Job))
    (release,) = of(h.take(), "evict")
    got = conditions(release)
    assert got["QuotaReserved"] == ("False", "Pending", message)
    assert got["Requeued"] == ("False", "PodsReadyTimeout", message)
    assert msgspec.json.decode(release.patch)["status"]["admission"] is None
    h.land(release, wl_a)
    assert h.reconciler.core.ledger.used("cq", ("t4", GPU)) == 0
    labels = {
        "cluster_queue": "cq",
        "reason": "PodsReadyTimeout",
        "priority_class": "",
        "replica_role": "standalone",
    }
    samples = scrape(h.reconciler.metrics)[1]
    assert metric(samples, "kueue_evicted_workloads_total", **labels, underlying_cause="WaitForRecovery") == 1
    assert metric(samples, "kueue_evicted_workloads_total", **labels, underlying_cause="WaitForStart") is None


def test_the_retry_limit_deactivates_and_then_evicts_with_kueues_reason() -> None:
    h = Clocked(backoffLimitCount=0)
    queues(h)
    h.sync_all()
    _, wl_a, _ = admitted_job(h, "a")
    (deactivate,) = of(h.tick(T0 + 61), "deactivate")
    assert msgspec.json.decode(deactivate.patch) == {"spec": {"active": False}}
    inactive = msgspec.json.decode(msgspec.json.encode(wl_a))
    inactive["spec"]["active"] = False
    inactive["metadata"]["resourceVersion"] = h.next_rv()
    h.reconciler.handle(WriteDone(deactivate, body=msgspec.json.encode(inactive)))
    (evict,) = of(h.take(), "evict")
    assert conditions(evict)["Evicted"] == (
        "True",
        "DeactivatedDueToRequeuingLimitExceeded",
        "The workload is deactivated due to exceeding the maximum number of re-queuing retries",
    )
    evicted = h.land(evict, decode(inactive, Workload))
    h.take()
    assert h.reconciler.core.workload(("ns", evicted.metadata.name)) is None  # inactive: never queued
    assert h.reconciler.core.ledger.used("cq", ("t4", GPU)) == 0


def test_a_conflicting_eviction_keeps_the_quota_and_fires_again_on_fresh_state() -> None:
    h = Clocked()
    queues(h)
    h.sync_all()
    _, _wl_a, _ = admitted_job(h, "a")
    (evict,) = of(h.tick(T0 + 61), "evict")
    h.reconciler.handle(WriteDone(evict, error=Conflict(409, "conflict")))
    assert h.reconciler.core.ledger.used("cq", ("t4", GPU)) == 1
    assert of(h.tick(T0 + 62), "evict")


def test_the_clock_starts_even_when_the_admission_event_beats_the_write_result() -> None:
    h = Clocked()
    queues(h)
    h.sync_all()
    _, workload, actions = queued_job(h, "a")
    (admit,) = of(actions, "admit")
    admitted = apply_patch(h, workload, admit)
    h.event("MODIFIED", WORKLOADS, admitted)  # the watch is faster than the writer's result
    h.reconciler.handle(WriteDone(admit, body=msgspec.json.encode(admitted)))
    h.take()
    assert h.reconciler.timers.get(("ns", admitted.metadata.name), "pods-ready") == T0 + 60


def test_block_admission_holds_new_admissions_until_the_admitted_one_is_ready() -> None:
    h = Clocked()
    h.reconciler.config = parse_config(BLOCK_ADMISSION)
    queues(h, gpus=2)
    h.sync_all()
    job_a, wl_a, _ = admitted_job(h, "a")
    assert wl_a.status.admission is not None
    _, wl_b, actions = admitted_job(h, "b")
    assert of(actions, "admit") == []  # a GPU is free, but job a is not ready yet
    job_a = started(h, job_a)
    h.event("MODIFIED", JOBS, job_a)
    h.event("ADDED", PODS, ready_pod("a"))
    (ready,) = of(h.take(), "pods-ready")
    h.land(ready, wl_a)
    (admit_b,) = of(h.take(), "admit")
    assert admit_b.name == wl_b.metadata.name


def test_block_admission_holds_while_an_evicted_job_still_runs() -> None:
    """An evicted Workload whose Job is still active keeps its reservation and, not ready, keeps
    blockAdmission holding (Kueue's cache keeps it until its reservation ends): the free GPU is
    not given to job b until job a's pods are gone."""
    h = Clocked()
    h.reconciler.config = parse_config(BLOCK_ADMISSION)
    queues(h, gpus=2)
    h.sync_all()
    job_a, wl_a, _ = admitted_job(h, "a")
    job_a = started(h, job_a)
    h.event("MODIFIED", JOBS, job_a)
    _, wl_b, actions = admitted_job(h, "b")
    assert of(actions, "admit") == []  # a GPU is free, but job a is not ready
    (evict,) = of(h.tick(T0 + 61), "evict")
    assert of(h.take(), "admit") == []  # while the eviction is written
    evicted = h.land(evict, wl_a)
    assert evicted.status.admission is not None  # job a is still active
    h.event("MODIFIED", WORKLOADS, evicted)
    assert of(h.take(), "admit") == []
    stopped = msgspec.json.decode(msgspec.json.encode(job_a))
    stopped["spec"]["suspend"] = True
    stopped["status"] = {"active": 0}
    stopped["metadata"]["resourceVersion"] = h.next_rv()
    h.event("MODIFIED", JOBS, decode(stopped, Job))
    (release,) = of(h.take(), "evict")
    h.land(release, evicted)
    admits = of(h.take(), "admit")
    assert [a.name for a in admits] == [wl_b.metadata.name]


def test_a_job_that_ends_at_its_deadline_is_finished_not_evicted() -> None:
    h = Clocked()
    queues(h)
    h.sync_all()
    job_a, _, _ = admitted_job(h, "a")
    done = msgspec.json.decode(msgspec.json.encode(started(h, job_a)))
    done["status"]["conditions"] = [{"type": "Complete", "status": "True", "message": "done"}]
    done["metadata"]["resourceVersion"] = h.next_rv()
    h.event("MODIFIED", JOBS, decode(done, Job))
    assert of(h.take(), "finish")
    assert of(h.tick(T0 + 61), "evict") == []  # the Finished write is in flight


def test_a_deactivated_workload_loses_its_requeue_count_and_is_requeued_when_reactivated() -> None:
    h = Clocked(backoffLimitCount=0)
    queues(h)
    h.sync_all()
    _, wl_a, _ = admitted_job(h, "a")
    (deactivate,) = of(h.tick(T0 + 61), "deactivate")
    inactive = msgspec.json.decode(msgspec.json.encode(wl_a))
    inactive["spec"]["active"] = False
    inactive["metadata"]["resourceVersion"] = h.next_rv()
    h.reconciler.handle(WriteDone(deactivate, body=msgspec.json.encode(inactive)))
    (evict,) = of(h.take(), "evict")
    evicted = h.land(evict, decode(inactive, Workload))
    h.event("MODIFIED", WORKLOADS, evicted)  # the eviction's own watch event
    h.take()
    # Inactive with a requeue count (as after earlier timeouts): the count goes, as in Kueue.
    counted = msgspec.json.decode(msgspec.json.encode(evicted))
    counted["status"]["requeueState"] = {"count": 3}
    counted["metadata"]["resourceVersion"] = h.next_rv()
    h.event("MODIFIED", WORKLOADS, decode(counted, Workload))
    (reset,) = of(h.take(), "requeue")
    assert msgspec.json.decode(reset.patch)["status"] == {"requeueState": None}
    cleared = h.land(reset, decode(counted, Workload))
    assert cleared.status.requeue_state is None
    h.event("MODIFIED", WORKLOADS, cleared)
    assert of(h.take(), "requeue") == []
    # A user sets spec.active back to true: Requeued=True Reactivated, and it is queued again.
    active = msgspec.json.decode(msgspec.json.encode(cleared))
    active["spec"]["active"] = True
    active["metadata"]["resourceVersion"] = h.next_rv()
    h.event("MODIFIED", WORKLOADS, decode(active, Workload))
    (reactivated,) = of(h.take(), "requeue")
    assert conditions(reactivated)["Requeued"] == ("True", "Reactivated", "The workload was reactivated")
    assert h.reconciler.core.workload(("ns", evicted.metadata.name)) is not None


def strict_fifo_with_a_blocked_head(h: Clocked) -> list[Action]:
    """StrictFIFO over 2 GPUs: Job a admitted, then a two-GPU head that waits; what it was given."""
    queues(h)
    cq = h.reconciler.ctx.store.cluster_queues["cq"]
    body = msgspec.json.decode(msgspec.json.encode(cq))
    body["spec"]["queueingStrategy"] = "StrictFIFO"
    body["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 2
    h.event("MODIFIED", CLUSTER_QUEUES, decode(body, ClusterQueue))
    h.sync_all()
    admitted_job(h, "a")
    big = job_body("big", uid="uid-big", parallelism=2, completions=2, claims=[GPU_CLAIM])
    big["metadata"]["resourceVersion"] = h.next_rv()
    h.event("ADDED", JOBS, decode(big, Job))
    (create,) = of(h.take(), "create-workload")
    h.event("ADDED", WORKLOADS, created_workload(h, create))
    return h.take()


def test_a_workload_no_verdict_is_written_for_still_shows_waiting_for_start() -> None:
    """Behind a StrictFIFO head nothing is decided for the followers; Kueue's job reconciler
    still gives their Workloads PodsReady=False WaitForStart, and so does the controller,
    once, after the scheduler's decisions (never racing an admission)."""
    h = Clocked()
    (pending,) = of(strict_fifo_with_a_blocked_head(h), "workload-status")  # the head's verdict
    assert conditions(pending)["PodsReady"][1] == "WaitForStart"
    _, follower, actions = queued_job(h, "c")
    assert of(actions, "workload-status") == []  # no verdict behind a StrictFIFO head
    (wait,) = of(actions, "waiting-for-start")
    assert conditions(wait) == {"PodsReady": ("False", "WaitForStart", "Not all pods are ready or succeeded")}
    assert (
        msgspec.json.decode(wait.patch)["metadata"]["resourceVersion"] == follower.metadata.resource_version
    )
    assert of(h.take(), "waiting-for-start") == []  # in flight: not asked for twice


def test_waiting_for_start_is_written_when_the_watch_shows_the_workload_before_the_create_returns() -> None:
    """The watch's ADDED event may come before the create's response: the create is then still in
    flight when the scheduler runs, and the follower must still get WaitForStart once it returns."""
    h = Clocked()
    strict_fifo_with_a_blocked_head(h)
    follower_job = job_body("c", uid="uid-c", claims=[GPU_CLAIM])
    follower_job["metadata"]["resourceVersion"] = h.next_rv()
    h.event("ADDED", JOBS, decode(follower_job, Job))
    (create_c,) = of(h.take(), "create-workload")
    follower = created_workload(h, create_c)
    h.event("ADDED", WORKLOADS, follower)  # before the create's response
    early = h.take()
    h.reconciler.handle(WriteDone(create_c, body=msgspec.json.encode(follower)))
    waits = of(early + h.take(), "waiting-for-start")
    assert len(waits) == 1
    assert conditions(waits[0]) == {
        "PodsReady": ("False", "WaitForStart", "Not all pods are ready or succeeded")
    }


def test_a_pods_ready_write_lost_to_a_conflict_is_made_again_on_the_newer_workload() -> None:
    """Another write to the Workload (a pod group's WaitingForReplacementPods) lands first and
    this one gets 409: PodsReady is decided again on the newer Workload, not left stale (the
    pod-group-deleted-pod scenario kept PodsReady=True while Kueue wrote WaitForRecovery)."""
    h = Clocked()
    queues(h)
    h.sync_all()
    job_a, wl_a, _ = admitted_job(h, "a")
    h.event("MODIFIED", JOBS, started(h, job_a))
    h.take()
    h.event("ADDED", PODS, ready_pod("a"))
    (ready,) = of(h.take(), "pods-ready")
    wl_a = h.land(ready, wl_a)
    h.event("MODIFIED", WORKLOADS, wl_a)
    h.take()
    h.event("MODIFIED", PODS, ready_pod("a", ready=False))
    (lost,) = of(h.take(), "pods-ready")
    other = msgspec.json.decode(msgspec.json.encode(wl_a))
    other["metadata"]["resourceVersion"] = h.next_rv()  # someone else's write landed first
    h.event("MODIFIED", WORKLOADS, decode(other, Workload))
    h.take()
    h.reconciler.handle(WriteDone(lost, error=Conflict(409, "Conflict", "the object has been modified")))
    (again,) = of(h.take(), "pods-ready")
    assert conditions(again)["PodsReady"][:2] == ("False", "WaitForRecovery")
    sent = msgspec.json.decode(again.patch)
    assert sent["metadata"]["resourceVersion"] == other["metadata"]["resourceVersion"]
