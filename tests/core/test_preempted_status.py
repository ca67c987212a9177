"""A preemption victim's status as the core builds it for the controller and `simulate` alike:
Kueue v0.18.1's conditions when it is evicted, and when it is admitted again."""

from __future__ import annotations

from reconciler.api import Condition, WorkloadStatus
from reconciler.core.eviction_status import evicted_workload_status
from reconciler.core.scheduling.preemption import IN_CLUSTER_QUEUE
from reconciler.core.scheduling.scheduler import Admit
from reconciler.core.status import admitted_workload_status

EVICTED_AT, ADMITTED_AT = "2026-01-01T00:00:01Z", "2026-01-01T00:00:09Z"
MESSAGE = "Preempted to accommodate a workload (UID: u, JobUID: j) due to ..."


def _admitted() -> WorkloadStatus:
    return WorkloadStatus(
        conditions=[
            Condition("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq", "t0", 3),
            Condition("Admitted", "True", "Admitted", "The workload is admitted", "t0", 3),
        ]
    )


def _preempted() -> WorkloadStatus:
    return evicted_workload_status(
        _admitted(),
        reason="Preempted",
        message=MESSAGE,
        requeue_state=None,
        requests=[],
        now=EVICTED_AT,
        generation=3,
        preempted_reason=IN_CLUSTER_QUEUE,
    )


def _by_type(status: WorkloadStatus) -> dict[str, tuple[str, str, str, str | None, int | None]]:
    return {
        c.type: (c.status, c.reason, c.message, c.last_transition_time, c.observed_generation)
        for c in status.conditions
    }


def test_a_preempted_workload_carries_kueues_conditions() -> None:
    conditions = _by_type(_preempted())
    assert conditions == {
        "QuotaReserved": ("False", "Pending", MESSAGE, EVICTED_AT, 3),
        "Admitted": ("False", "NoReservation", "The workload has no reservation", EVICTED_AT, 3),
        "Evicted": ("True", "Preempted", MESSAGE, EVICTED_AT, 3),
        "Requeued": ("True", "Preempted", MESSAGE, EVICTED_AT, 3),
        # Kueue's SetPreemptedCondition sets no observedGeneration.
        "Preempted": ("True", IN_CLUSTER_QUEUE, MESSAGE, EVICTED_AT, None),
    }


def test_admitted_again_the_preemption_is_shown_as_past() -> None:
    """Kueue's SetQuotaReservation turns an active Evicted and Preempted to False, "Previously: ..."."""
    admit = Admit(("ns", "victim"), "cq", [])
    conditions = _by_type(admitted_workload_status(_preempted(), admit, ADMITTED_AT, 4))
    past = f"Previously: {MESSAGE}"
    assert conditions["Evicted"] == ("False", "QuotaReserved", past, ADMITTED_AT, 4)
    assert conditions["Preempted"] == ("False", "QuotaReserved", past, ADMITTED_AT, 4)
    assert conditions["QuotaReserved"][:2] == ("True", "QuotaReserved")
    # A Requeued=True stays as it was.
    assert conditions["Requeued"] == ("True", "Preempted", MESSAGE, EVICTED_AT, 3)
