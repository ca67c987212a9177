"""A ClusterQueue's spec.stopPolicy through the reconciler and the in-memory API: Hold admits
nothing new and leaves what is admitted alone; HoldAndDrain also evicts what is admitted, with
Kueue's reason and message; releasing the stop resumes admission without any other event."""

from __future__ import annotations

from reconciler.api.resources import CLUSTER_QUEUES
from tests.support.memory_cluster import Cluster, admitted, condition

INACTIVE = ("False", "Inadmissible", "ClusterQueue cq is inactive")
STOPPED = "The ClusterQueue is stopped"


def test_hold_admits_nothing_new_and_leaves_the_admitted_alone() -> None:
    c = Cluster()
    c.queues(gpus=2)
    c.submit("a")
    assert admitted(c, "a")
    assert c.job("a")["spec"]["suspend"] is False
    c.stop_policy("Hold")
    c.tick(c.now + 1)  # queue status is written on the tick
    active = condition(c.api.get(CLUSTER_QUEUES, "", "cq"), "Active")
    assert active == ("False", "Stopped", "Can't admit new workloads: is stopped.")
    c.submit("b")
    # A GPU is free, but the stopped ClusterQueue admits nothing; a keeps running.
    assert condition(c.workload("b"), "QuotaReserved") == INACTIVE
    assert admitted(c, "a")
    assert condition(c.workload("a"), "Evicted") is None
    assert c.job("a")["spec"]["suspend"] is False
    assert c.used_gpus() == 1
    # Released: b is admitted with no other change.
    c.stop_policy("None")
    assert admitted(c, "b")
    assert c.job("b")["spec"]["suspend"] is False
    assert c.used_gpus() == 2


def test_hold_and_drain_evicts_the_admitted_with_kueues_reason_and_release_admits_again() -> None:
    c = Cluster()
    c.queues(gpus=2)
    c.submit("a")
    assert admitted(c, "a")
    c.stop_policy("HoldAndDrain")
    a = c.workload("a")
    assert condition(a, "Evicted") == ("True", "ClusterQueueStopped", STOPPED)
    assert condition(a, "Admitted") == ("False", "NoReservation", "The workload has no reservation")
    assert condition(a, "Requeued") == ("False", "ClusterQueueStopped", STOPPED)
    assert a["status"].get("admission") is None
    # Back in its queue, which admits nothing while stopped; its Job suspended.
    assert condition(a, "QuotaReserved") == INACTIVE
    assert c.job("a")["spec"]["suspend"] is True
    assert c.used_gpus() == 0
    assert "EvictedDueToClusterQueueStopped" in c.api.reasons("Workload", a["metadata"]["name"])
    assert "Stopped" in c.api.reasons("Job", "a")
    c.submit("b")
    assert condition(c.workload("b"), "QuotaReserved") == INACTIVE
    # Released: a is requeued as Kueue does it, and both are admitted.
    c.stop_policy("None")
    a = c.workload("a")
    assert condition(a, "Requeued") == (
        "True",
        "ClusterQueueRestarted",
        "The ClusterQueue was restarted after being stopped",
    )
    assert admitted(c, "a")
    assert admitted(c, "b")
    assert condition(a, "Evicted") == ("False", "QuotaReserved", f"Previously: {STOPPED}")
    assert c.job("a")["spec"]["suspend"] is False
    assert c.used_gpus() == 2


def test_a_workload_evicted_by_the_stop_stays_out_while_the_queue_is_stopped() -> None:
    """From HoldAndDrain to Hold: nothing is admitted again, and nothing is requeued yet."""
    c = Cluster()
    c.queues(gpus=1)
    c.submit("a")
    c.stop_policy("HoldAndDrain")
    c.stop_policy("Hold")
    a = c.workload("a")
    assert condition(a, "Requeued") == ("False", "ClusterQueueStopped", STOPPED)
    assert condition(a, "QuotaReserved") == INACTIVE
    assert c.used_gpus() == 0
