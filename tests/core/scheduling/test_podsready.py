"""waitForPodsReady arithmetic at its edges: conditions, deadlines, backoff, retry limit."""

from __future__ import annotations

import random

import pytest

from reconciler.api import Condition, RequeueState
from reconciler.api.times import epoch, rfc3339
from reconciler.core.queueing.queues import backoff_seconds
from reconciler.core.scheduling.podsready import (
    Deactivate,
    Evict,
    deactivation_reason,
    plan_timeout,
    pods_needed,
    pods_ready_deadline,
    pods_ready_state,
)

T0 = "2026-01-01T00:00:00Z"
T0_EPOCH = 1767225600.0


def cond(kind: str, status: str, reason: str = "", at: str = T0) -> Condition:
    return Condition(kind, status, reason, "", at)


def test_times_round_trip() -> None:
    assert epoch(T0) == T0_EPOCH
    assert rfc3339(T0_EPOCH + 61.7) == "2026-01-01T00:01:01Z"
    assert epoch(None) is None
    assert epoch("yesterday") is None


@pytest.mark.parametrize(
    ("parallelism", "completions", "needed"),
    [(None, None, 1), (3, None, 3), (3, 2, 2), (2, 5, 2), (0, 1, 0)],
)
def test_pods_needed_is_min_of_parallelism_and_completions(
    parallelism: int | None, completions: int | None, needed: int
) -> None:
    assert pods_needed(parallelism, completions) == needed


def test_pods_ready_state_start_and_recovery() -> None:
    not_admitted = pods_ready_state(admitted=False, ready=5, needed=1, previous=None)
    assert (not_admitted.status, not_admitted.reason) == ("False", "WaitForStart")
    waiting = pods_ready_state(admitted=True, ready=1, needed=2, previous=None)
    assert (waiting.status, waiting.reason, waiting.message) == (
        "False",
        "WaitForStart",
        "Not all pods are ready or succeeded",
    )
    started = pods_ready_state(
        admitted=True, ready=2, needed=2, previous=cond("PodsReady", "False", "WaitForStart")
    )
    assert (started.status, started.reason, started.message) == (
        "True",
        "Started",
        "All pods reached readiness and the workload is running",
    )
    lost = pods_ready_state(admitted=True, ready=1, needed=2, previous=cond("PodsReady", "True", "Started"))
    assert (lost.status, lost.reason, lost.message) == (
        "False",
        "WaitForRecovery",
        "At least one pod has failed, waiting for recovery",
    )
    still = pods_ready_state(
        admitted=True, ready=0, needed=2, previous=cond("PodsReady", "False", "WaitForRecovery")
    )
    assert still.reason == "WaitForRecovery"
    back = pods_ready_state(
        admitted=True, ready=2, needed=2, previous=cond("PodsReady", "False", "WaitForRecovery")
    )
    assert (back.status, back.reason) == ("True", "Recovered")


def test_deadline_starts_at_admission_and_recovery_at_the_pods_ready_transition() -> None:
    admitted = cond("Admitted", "True", "Admitted")
    start = pods_ready_deadline([admitted], 300, 60)
    assert start is not None
    assert (start.at, start.cause) == (T0_EPOCH + 300, "WaitForStart")
    recovering = cond("PodsReady", "False", "WaitForRecovery", at="2026-01-01T01:00:00Z")
    recovery = pods_ready_deadline([admitted, recovering], 300, 60)
    assert recovery is not None
    assert (recovery.at, recovery.cause) == (T0_EPOCH + 3600 + 60, "WaitForRecovery")


def test_no_clock_runs_when_ready_not_admitted_or_recovery_timeout_is_zero() -> None:
    admitted = cond("Admitted", "True")
    assert pods_ready_deadline([admitted, cond("PodsReady", "True", "Started")], 300, 60) is None
    assert pods_ready_deadline([cond("Admitted", "False")], 300, 60) is None
    assert pods_ready_deadline([], 300, 60) is None
    recovering = cond("PodsReady", "False", "WaitForRecovery")
    assert pods_ready_deadline([admitted, recovering], 300, None) is None
    assert pods_ready_deadline([admitted, recovering], 300, 0) is None


def test_backoff_doubles_from_base_and_stops_at_max() -> None:
    assert [backoff_seconds(n, 60, 3600, jitter=0) for n in range(0, 9)] == [
        0,
        60,
        120,
        240,
        480,
        960,
        1920,
        3600,
        3600,
    ]
    # max 0 means no cap; jitter only lengthens, by at most 1e-4.
    assert backoff_seconds(10, 1, 0, jitter=0) == 512
    jittered = backoff_seconds(3, 60, 3600, rng=random.Random(7))
    assert 240 <= jittered < 240 * 1.0001


def test_timeout_plan_counts_and_requeues() -> None:
    plan = plan_timeout(None, T0_EPOCH, limit=None, base_seconds=10, max_seconds=3600, rng=random.Random(1))
    assert isinstance(plan, Evict)
    assert plan.requeue_state.count == 1
    assert T0_EPOCH + 10 <= plan.requeue_at < T0_EPOCH + 10.01
    again = plan_timeout(plan.requeue_state, T0_EPOCH + 100, limit=None, base_seconds=10, max_seconds=15)
    assert isinstance(again, Evict)
    assert again.requeue_state.count == 2
    assert T0_EPOCH + 115 <= again.requeue_at < T0_EPOCH + 115.01  # 20 s capped at 15


def test_requeue_time_only_moves_forward() -> None:
    later = RequeueState(count=1, requeue_at="2026-01-01T10:00:00Z")
    plan = plan_timeout(later, T0_EPOCH, limit=None, base_seconds=10, max_seconds=3600)
    assert isinstance(plan, Evict)
    assert plan.requeue_state.requeue_at == "2026-01-01T10:00:00Z"


def test_limit_zero_deactivates_on_the_first_timeout() -> None:
    assert isinstance(plan_timeout(None, T0_EPOCH, limit=0, base_seconds=10, max_seconds=60), Deactivate)


def test_limit_allows_exactly_that_many_requeues() -> None:
    first = plan_timeout(None, T0_EPOCH, limit=2, base_seconds=1, max_seconds=60)
    assert isinstance(first, Evict)
    second = plan_timeout(first.requeue_state, T0_EPOCH, limit=2, base_seconds=1, max_seconds=60)
    assert isinstance(second, Evict)
    assert second.requeue_state.count == 2
    assert isinstance(
        plan_timeout(second.requeue_state, T0_EPOCH, limit=2, base_seconds=1, max_seconds=60), Deactivate
    )


def test_deactivation_reason_names_the_limit_only_when_it_was_spent() -> None:
    assert deactivation_reason(RequeueState(count=2), 2) == (
        "DeactivatedDueToRequeuingLimitExceeded",
        "The workload is deactivated due to exceeding the maximum number of re-queuing retries",
    )
    assert deactivation_reason(RequeueState(count=1), 2) == ("Deactivated", "The workload is deactivated")
    assert deactivation_reason(None, None) == ("Deactivated", "The workload is deactivated")
