"""The maximum execution time as Kueue v0.18.1 counts it: the label read into the Workload, the
time admitted (with what earlier admissions accumulated), exceeded or not, and what the eviction
of a deactivation target says."""

from __future__ import annotations

from reconciler.api import Condition, WorkloadStatus
from reconciler.api.times import rfc3339
from reconciler.core.eviction_status import evicted_workload_status, unreserved_workload_status
from reconciler.core.model.workloads import MAX_EXEC_TIME_LABEL, max_exec_seconds
from reconciler.core.scheduling.max_execution import (
    DEACTIVATION_TARGET,
    accumulated_after,
    deactivated_by_target,
    exceeded_message,
    execution_deadline,
)

T0 = 1767225600.0


def admitted(at: float, status: str = "True") -> list[Condition]:
    return [
        Condition(
            type="QuotaReserved", status=status, reason="QuotaReserved", last_transition_time=rfc3339(at)
        ),
        Condition(type="Admitted", status=status, reason="Admitted", last_transition_time=rfc3339(at)),
    ]


def test_the_label_becomes_the_maximum_when_it_is_a_positive_int32() -> None:
    assert max_exec_seconds({MAX_EXEC_TIME_LABEL: "5"}) == 5
    assert max_exec_seconds({MAX_EXEC_TIME_LABEL: "+7"}) == 7
    for text in ("0", "-3", "abc", " 5", "1_0", "", str(2**31)):
        assert max_exec_seconds({MAX_EXEC_TIME_LABEL: text}) is None, text
    assert max_exec_seconds({}) is None


def test_the_deadline_counts_from_admission_less_what_was_accumulated() -> None:
    assert execution_deadline(60, None, admitted(T0)) == T0 + 60
    assert execution_deadline(60, 45, admitted(T0)) == T0 + 15
    # Exceeded already: the deadline lies in the past.
    assert execution_deadline(60, 70, admitted(T0)) == T0 - 10


def test_no_deadline_without_a_maximum_or_an_admission() -> None:
    assert execution_deadline(None, None, admitted(T0)) is None
    assert execution_deadline(60, None, admitted(T0, status="False")) is None
    assert execution_deadline(60, None, []) is None


def test_an_admission_that_ends_adds_its_whole_seconds() -> None:
    assert accumulated_after(admitted(T0), None, rfc3339(T0 + 4.9)) == 4
    assert accumulated_after(admitted(T0), 10, rfc3339(T0 + 5)) == 15
    # Not admitted: nothing to add.
    assert accumulated_after(admitted(T0, status="False"), 10, rfc3339(T0 + 5)) == 10
    assert accumulated_after([], None, rfc3339(T0 + 5)) is None


def test_a_requeued_workload_keeps_what_it_used_and_its_deadline_comes_sooner() -> None:
    """Evicted at T0+40 (a preemption: one write), admitted again at T0+100 with a maximum of 60:
    20 s are left."""
    before = WorkloadStatus(conditions=admitted(T0))
    evicted = evicted_workload_status(
        before, reason="Preempted", message="m", requeue_state=None, requests=[], now=rfc3339(T0 + 40)
    )
    assert evicted.accumulated_past_execution_time_seconds == 40
    assert execution_deadline(60, 40, admitted(T0 + 100)) == T0 + 120
    # An eviction in two steps counts once, when the reservation ends.
    kept = evicted_workload_status(
        before,
        reason="PodsReadyTimeout",
        message="m",
        requeue_state=None,
        requests=[],
        now=rfc3339(T0 + 40),
        keep_reservation=True,
    )
    assert kept.accumulated_past_execution_time_seconds is None
    released = unreserved_workload_status(kept, rfc3339(T0 + 43))
    assert released.accumulated_past_execution_time_seconds == 43


def test_a_deactivation_target_names_the_eviction_and_goes_with_it() -> None:
    target = Condition(
        type=DEACTIVATION_TARGET,
        status="True",
        reason="MaximumExecutionTimeExceeded",
        message="exceeding the maximum execution time",
    )
    reason, message, cause = deactivated_by_target([*admitted(T0), target]) or ("", "", "")
    assert reason == "DeactivatedDueToMaximumExecutionTimeExceeded"
    assert message == "The workload is deactivated due to exceeding the maximum execution time"
    assert cause == "MaximumExecutionTimeExceeded"
    assert deactivated_by_target(admitted(T0)) is None
    status = evicted_workload_status(
        WorkloadStatus(conditions=[*admitted(T0), target]),
        reason=reason,
        message=message,
        requeue_state=None,
        requests=[],
        now=rfc3339(T0 + 6),
    )
    assert DEACTIVATION_TARGET not in {c.type for c in status.conditions}
    assert status.accumulated_past_execution_time_seconds == 6
    assert exceeded_message(5) == "The maximum execution time (5s) exceeded"
