"""A LocalQueue's spec.stopPolicy through the reconciler and the in-memory API, as Kueue v0.18.1:
Hold keeps that LocalQueue's pending Workloads out (QuotaReserved=False "LocalQueue lq is
inactive") while another LocalQueue of the same ClusterQueue is served; HoldAndDrain also evicts
what was admitted through it (LocalQueueStopped, "The LocalQueue is stopped"); None again admits
and requeues (Requeued=True LocalQueueRestarted). The LocalQueue says Active=False Stopped."""

from __future__ import annotations

from typing import Any

from reconciler.api.resources import LOCAL_QUEUES
from tests.support.memory_cluster import Cluster, admitted, condition

INACTIVE = ("False", "Inadmissible", "LocalQueue lq is inactive")
STOPPED = "The LocalQueue is stopped"


def local_queue(c: Cluster, name: str = "lq") -> dict[str, Any]:
    return c.api.get(LOCAL_QUEUES, "ns", name)


def test_hold_keeps_its_pending_workloads_out_and_the_other_local_queue_is_served() -> None:
    c = Cluster()
    c.queues(gpus=3)
    c.local_queue("other")
    c.submit("a")
    assert admitted(c, "a")
    c.local_queue_stop_policy("Hold")
    c.tick(c.now + 1)  # queue status is written on the tick
    lq = local_queue(c)
    assert condition(lq, "Active") == ("False", "Stopped", "LocalQueue is stopped")
    c.submit("b")
    c.submit("c", queue="other")
    assert condition(c.workload("b"), "QuotaReserved") == INACTIVE
    assert admitted(c, "c")
    # What Hold found admitted keeps running.
    assert admitted(c, "a")
    assert condition(c.workload("a"), "Evicted") is None
    c.tick(c.now + 1)
    assert local_queue(c)["status"]["pendingWorkloads"] == 0
    assert condition(local_queue(c, "other"), "Active") == (
        "True",
        "Ready",
        "Can submit new workloads to localQueue",
    )
    # Released: b is admitted.
    c.local_queue_stop_policy("None")
    assert admitted(c, "b")
    assert c.used_gpus() == 3
    c.tick(c.now + 1)
    assert condition(local_queue(c), "Active") == ("True", "Ready", "Can submit new workloads to localQueue")


def test_hold_and_drain_evicts_with_kueues_reason_and_none_requeues() -> None:
    c = Cluster()
    c.queues(gpus=2)
    c.local_queue("other")
    c.submit("a")
    c.submit("o", queue="other")
    assert admitted(c, "a")
    assert admitted(c, "o")
    c.local_queue_stop_policy("HoldAndDrain")
    a = c.workload("a")
    assert condition(a, "Evicted") == ("True", "LocalQueueStopped", STOPPED)
    assert condition(a, "Requeued") == ("False", "LocalQueueStopped", STOPPED)
    assert condition(a, "Admitted") == ("False", "NoReservation", "The workload has no reservation")
    assert a["status"].get("admission") is None
    assert condition(a, "QuotaReserved") == INACTIVE
    assert c.job("a")["spec"]["suspend"] is True
    assert "EvictedDueToLocalQueueStopped" in c.api.reasons("Workload", a["metadata"]["name"])
    # The other LocalQueue's workload is left alone.
    assert admitted(c, "o")
    assert condition(c.workload("o"), "Evicted") is None
    assert c.used_gpus() == 1
    # Hold keeps it out and does not requeue it.
    c.local_queue_stop_policy("Hold")
    assert condition(c.workload("a"), "Requeued") == ("False", "LocalQueueStopped", STOPPED)
    assert c.used_gpus() == 1
    # Released: requeued as Kueue does it, and admitted again.
    c.local_queue_stop_policy("None")
    a = c.workload("a")
    assert condition(a, "Requeued") == (
        "True",
        "LocalQueueRestarted",
        "The LocalQueue was restarted after being stopped",
    )
    assert admitted(c, "a")
    assert c.job("a")["spec"]["suspend"] is False
    assert c.used_gpus() == 2
