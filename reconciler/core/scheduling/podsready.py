"""waitForPodsReady as Kueue defines it, as plain arithmetic over conditions and counts.

Which PodsReady condition an admitted workload should show, when its
deadline falls (from the conditions' transition times, so a restarted
controller keeps the original deadline), and what a timeout does: evict and
requeue after Kueue's backoff, or deactivate once the retry limit is spent.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from reconciler.api import Condition, RequeueState
from reconciler.api.times import epoch, rfc3339

from ..queueing.queues import backoff_seconds

__all__ = [
    "DEACTIVATED_MESSAGE",
    "PODS_READY",
    "Deactivate",
    "Deadline",
    "Evict",
    "PodsReadyState",
    "TimeoutPlan",
    "deactivation_reason",
    "plan_timeout",
    "pods_needed",
    "pods_ready_deadline",
    "pods_ready_state",
    "timeout_message",
]

PODS_READY = "PodsReady"
WAIT_FOR_START = "WaitForStart"
WAIT_FOR_RECOVERY = "WaitForRecovery"
STARTED = "Started"
RECOVERED = "Recovered"
NOT_READY_MESSAGE = "Not all pods are ready or succeeded"
READY_MESSAGE = "All pods reached readiness and the workload is running"
RECOVERY_MESSAGE = "At least one pod has failed, waiting for recovery"
PODS_READY_TIMEOUT = "PodsReadyTimeout"
REQUEUING_LIMIT_EXCEEDED = "DeactivatedDueToRequeuingLimitExceeded"
DEACTIVATED = "Deactivated"
DEACTIVATED_MESSAGE = "The workload is deactivated"
LIMIT_EXCEEDED_MESSAGE = (
    "The workload is deactivated due to exceeding the maximum number of re-queuing retries"
)


@dataclass(frozen=True, slots=True)
class PodsReadyState:
    status: str
    reason: str
    message: str


def pods_needed(parallelism: int | None, completions: int | None) -> int:
    """How many pods must be ready or succeeded: min(parallelism, completions), as Kueue counts."""
    wanted = 1 if parallelism is None else parallelism
    if completions is not None:
        wanted = min(wanted, completions)
    return wanted


def pods_ready_state(
    *, admitted: bool, ready: int, needed: int, previous: Condition | None
) -> PodsReadyState:
    """The PodsReady condition a workload should carry now."""
    if not admitted:
        return PodsReadyState("False", WAIT_FOR_START, NOT_READY_MESSAGE)
    was_true = previous is not None and previous.status == "True"
    recovering = previous is not None and previous.reason in (WAIT_FOR_RECOVERY, RECOVERED)
    if ready >= needed:
        return PodsReadyState("True", RECOVERED if recovering else STARTED, READY_MESSAGE)
    if was_true or (previous is not None and previous.reason == WAIT_FOR_RECOVERY):
        return PodsReadyState("False", WAIT_FOR_RECOVERY, RECOVERY_MESSAGE)
    return PodsReadyState("False", WAIT_FOR_START, NOT_READY_MESSAGE)


@dataclass(frozen=True, slots=True)
class Deadline:
    at: float  # seconds since the epoch
    cause: str  # WaitForStart or WaitForRecovery: the eviction's underlying cause


def _find(conditions: Sequence[Condition], kind: str) -> Condition | None:
    return next((c for c in conditions if c.type == kind), None)


def pods_ready_deadline(
    conditions: Sequence[Condition], timeout: float, recovery_timeout: float | None
) -> Deadline | None:
    """When an admitted workload that is not ready runs out of time; None if no clock runs."""
    admitted = _find(conditions, "Admitted")
    if admitted is None or admitted.status != "True":
        return None
    ready = _find(conditions, PODS_READY)
    if ready is not None and ready.status == "True":
        return None
    if ready is not None and ready.reason == WAIT_FOR_RECOVERY:
        if not recovery_timeout:
            return None  # recovery checking is off
        since = epoch(ready.last_transition_time)
        return None if since is None else Deadline(since + recovery_timeout, WAIT_FOR_RECOVERY)
    since = epoch(admitted.last_transition_time)
    return None if since is None else Deadline(since + timeout, WAIT_FOR_START)


def timeout_message(namespace: str, name: str) -> str:
    return f"Exceeded the PodsReady timeout {namespace}/{name}"


@dataclass(frozen=True, slots=True)
class Evict:
    """Evict and requeue no earlier than `requeue_at`."""

    requeue_state: RequeueState
    requeue_at: float


@dataclass(frozen=True, slots=True)
class Deactivate:
    """The retry limit is spent: set spec.active=false; the eviction follows from that."""


TimeoutPlan = Evict | Deactivate


def plan_timeout(
    previous: RequeueState | None,
    now: float,
    *,
    limit: int | None,
    base_seconds: int,
    max_seconds: int,
    rng: random.Random | None = None,
) -> TimeoutPlan:
    """Kueue's requeue bookkeeping on a PodsReady timeout.

    With a limit, the count after this eviction must not exceed it (limit 0:
    the first timeout deactivates). The requeue time only moves forward.
    """
    count = (previous.count or 0) if previous is not None else 0
    if limit is not None and count + 1 > limit:
        return Deactivate()
    count += 1
    at = now + backoff_seconds(count, base_seconds, max_seconds, rng=rng)
    earlier = epoch(previous.requeue_at) if previous is not None else None
    if earlier is not None and earlier > at:
        at = earlier
    return Evict(RequeueState(count=count, requeue_at=rfc3339(at)), at)


def deactivation_reason(requeue_state: RequeueState | None, limit: int | None) -> tuple[str, str]:
    """The eviction reason and message of a workload found with spec.active=false."""
    count = (requeue_state.count or 0) if requeue_state is not None else 0
    if limit is not None and count + 1 > limit:
        return REQUEUING_LIMIT_EXCEEDED, LIMIT_EXCEEDED_MESSAGE
    return DEACTIVATED, DEACTIVATED_MESSAGE
