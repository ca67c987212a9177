"""A Workload's maximum execution time, as Kueue v0.18.1 enforces it, as plain arithmetic.

A job's label `kueue.x-k8s.io/max-exec-time-seconds` becomes its Workload's
`spec.maximumExecutionTimeSeconds` (model.workloads.max_exec_seconds). The time
counts while the Workload is admitted: from the Admitted condition's transition time, plus
`status.accumulatedPastExecutionTimeSeconds`, the whole seconds of its earlier admissions (added
each time Admitted turns False, so a requeued Workload keeps what it has used). Once the maximum
is reached the Workload becomes a deactivation target (condition `DeactivationTarget`, reason
`MaximumExecutionTimeExceeded`, the accumulated time cleared), then `spec.active: false`, then an
eviction whose reason and message name the target's (`deactivated_by_target`).
"""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.api import Condition
from reconciler.api.times import epoch

__all__ = [
    "DEACTIVATION_TARGET",
    "MAXIMUM_EXECUTION_TIME_EXCEEDED",
    "TARGET_MESSAGE",
    "accumulated_after",
    "deactivated_by_target",
    "exceeded_message",
    "execution_deadline",
]

DEACTIVATION_TARGET = "DeactivationTarget"
MAXIMUM_EXECUTION_TIME_EXCEEDED = "MaximumExecutionTimeExceeded"
TARGET_MESSAGE = "exceeding the maximum execution time"


def _admitted(conditions: Sequence[Condition]) -> Condition | None:
    found = next((c for c in conditions if c.type == "Admitted"), None)
    return found if found is not None and found.status == "True" else None


def execution_deadline(
    maximum: int | None, accumulated: int | None, conditions: Sequence[Condition]
) -> float | None:
    """When an admitted Workload reaches its maximum (seconds since the epoch); None when it is not
    admitted or has no maximum."""
    admitted = _admitted(conditions)
    if maximum is None or admitted is None:
        return None
    since = epoch(admitted.last_transition_time)
    if since is None:
        return None
    return since + maximum - (accumulated or 0)


def accumulated_after(previous: Sequence[Condition], accumulated: int | None, now: str) -> int | None:
    """`accumulatedPastExecutionTimeSeconds` once Admitted turns False at `now`: the whole seconds
    of the admission that ends added (Kueue truncates); unchanged when it was not admitted."""
    admitted = _admitted(previous)
    since = None if admitted is None else epoch(admitted.last_transition_time)
    end = epoch(now)
    if since is None or end is None:
        return accumulated
    return (accumulated or 0) + int(end - since)


def exceeded_message(maximum: int) -> str:
    """The Warning Event's message when the maximum is reached."""
    return f"The maximum execution time ({maximum}s) exceeded"


def deactivated_by_target(conditions: Sequence[Condition]) -> tuple[str, str, str] | None:
    """The eviction of an inactive Workload that was a deactivation target: reason, message and
    underlying cause (`DeactivatedDueTo<cause>`, "The workload is deactivated due to <message>");
    None when it carries no DeactivationTarget condition."""
    target = next((c for c in conditions if c.type == DEACTIVATION_TARGET), None)
    if target is None or target.status != "True":
        return None
    return (
        f"DeactivatedDueTo{target.reason}",
        f"The workload is deactivated due to {target.message}",
        target.reason,
    )
