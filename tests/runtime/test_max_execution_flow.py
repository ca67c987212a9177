"""A Job's maximum execution time through the reconciler and the in-memory API, as Kueue v0.18.1
enforces it: the label read into the Workload, the Workload deactivated once its admitted time
reaches it (DeactivationTarget, spec.active false, then the eviction with Kueue's reason and
message), and the time of an earlier admission counted after a requeue."""

from __future__ import annotations

from reconciler.api.resources import JOBS
from tests.support.builders import job_body
from tests.support.memory_cluster import T0, Cluster, condition

MESSAGE = "The workload is deactivated due to exceeding the maximum execution time"
REASON = "DeactivatedDueToMaximumExecutionTimeExceeded"


def submit(c: Cluster, name: str, seconds: str) -> None:
    body = job_body(name, claims=[{"name": "g", "resourceClaimTemplateName": "gpu"}])
    body["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] = seconds
    c.api.add(JOBS, body)
    c.settle()


def test_an_admitted_job_is_deactivated_once_its_maximum_execution_time_is_exceeded() -> None:
    c = Cluster()
    c.queues(gpus=1)
    submit(c, "a", "5")
    wl = c.workload("a")
    assert wl["spec"]["maximumExecutionTimeSeconds"] == 5
    assert condition(wl, "Admitted") == ("True", "Admitted", "The workload is admitted")
    assert c.job("a")["spec"]["suspend"] is False
    c.tick(T0 + 4)
    assert c.workload("a")["spec"].get("active", True) is True
    c.tick(T0 + 5.5)
    wl = c.workload("a")
    assert wl["spec"]["active"] is False
    assert condition(wl, "Evicted") == ("True", REASON, MESSAGE)
    assert condition(wl, "QuotaReserved") == ("False", "Pending", MESSAGE)
    assert condition(wl, "Admitted") == ("False", "NoReservation", "The workload has no reservation")
    assert condition(wl, "DeactivationTarget") is None  # removed by the eviction, as in Kueue
    assert wl["status"]["accumulatedPastExecutionTimeSeconds"] == 5
    assert c.job("a")["spec"]["suspend"] is True
    assert c.used_gpus() == 0
    warnings = [
        (e["type"], e["reason"], e["message"])
        for e in c.api.events
        if e["involvedObject"]["name"] == wl["metadata"]["name"] and e["type"] == "Warning"
    ]
    assert warnings == [
        ("Warning", "MaximumExecutionTimeExceeded", "The maximum execution time (5s) exceeded")
    ]
    # Deactivated: not admitted again, nothing more written.
    c.tick(T0 + 30)
    assert c.workload("a")["status"].get("admission") is None


def test_time_admitted_before_a_requeue_counts_towards_the_maximum() -> None:
    c = Cluster()
    c.queues(gpus=1)
    submit(c, "a", "10")
    c.tick(T0 + 4)
    c.stop_policy("HoldAndDrain")  # evicted at T0+4 and requeued: 4 s accumulated
    wl = c.workload("a")
    assert (condition(wl, "Evicted") or ("",))[0] == "True"
    assert wl["status"]["accumulatedPastExecutionTimeSeconds"] == 4
    c.now = T0 + 20
    c.stop_policy("None")  # admitted again at T0+20: 6 s are left
    wl = c.workload("a")
    assert condition(wl, "Admitted") == ("True", "Admitted", "The workload is admitted")
    c.tick(T0 + 25.5)
    assert c.workload("a")["spec"].get("active", True) is True
    c.tick(T0 + 26.5)
    wl = c.workload("a")
    assert wl["spec"]["active"] is False
    assert condition(wl, "Evicted") == ("True", REASON, MESSAGE)
    assert c.job("a")["spec"]["suspend"] is True


def test_a_job_without_the_label_runs_on() -> None:
    c = Cluster()
    c.queues(gpus=1)
    c.submit("a")
    assert "maximumExecutionTimeSeconds" not in c.workload("a")["spec"]
    c.tick(T0 + 1_000)  # (within the PodsReady timeout of 30 minutes)
    wl = c.workload("a")
    assert wl["spec"].get("active", True) is True
    assert condition(wl, "Admitted") == ("True", "Admitted", "The workload is admitted")


def test_while_its_running_job_stops_the_deactivation_target_is_written_again_as_in_kueue() -> None:
    """Kueue's eviction removes DeactivationTarget; while the Workload is still admitted (its job's
    pods stopping) the exceeded time writes it again, with a second Warning (the recording of the
    conformance scenario max-execution-time shows both)."""
    c = Cluster()
    c.queues(gpus=1)
    submit(c, "a", "5")
    c.api.change(JOBS, "ns", "a", {"status": {"active": 1, "startTime": "2026-01-01T00:00:01Z"}})
    c.settle()
    c.tick(T0 + 5.5)
    wl = c.workload("a")
    assert wl["spec"]["active"] is False
    assert condition(wl, "Evicted") == ("True", REASON, MESSAGE)
    assert condition(wl, "QuotaReserved") == ("True", "QuotaReserved", "Quota reserved in ClusterQueue cq")
    target = ("True", "MaximumExecutionTimeExceeded", "exceeding the maximum execution time")
    assert condition(wl, "DeactivationTarget") == target
    assert c.job("a")["spec"]["suspend"] is True
    assert c.api.reasons("Workload", wl["metadata"]["name"]).count("MaximumExecutionTimeExceeded") == 2
    assert c.used_gpus() == 1  # until the job's pods are gone
    c.api.change(JOBS, "ns", "a", {"status": {"active": 0}})
    c.settle()
    wl = c.workload("a")
    assert condition(wl, "QuotaReserved") == ("False", "Pending", MESSAGE)
    assert condition(wl, "Requeued") == ("False", REASON, MESSAGE)
    assert condition(wl, "DeactivationTarget") == target
    assert c.used_gpus() == 0
    c.tick(T0 + 30)
    assert c.api.reasons("Workload", wl["metadata"]["name"]).count("MaximumExecutionTimeExceeded") == 2
