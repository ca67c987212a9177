"""An eviction's Workload status, in Kueue v0.18.1's two steps: Evicted=True first (the
reservation kept while the job still runs), then the reservation ended once it no longer does;
both in one write when the job is not running at the eviction. The admission that ends adds its
seconds to `accumulatedPastExecutionTimeSeconds` (the maximum execution time counts them)."""

from __future__ import annotations

from reconciler.api import Condition, PodSetRequest, RequeueState, Workload, WorkloadStatus

from .scheduling.max_execution import DEACTIVATION_TARGET, accumulated_after
from .status import (
    ADMITTED,
    EVICTED,
    PREEMPTED,
    QUOTA_RESERVED,
    REQUEUED,
    condition,
    set_condition,
    waiting_for_start,
)

__all__ = ["evicted_workload_status", "released_after_eviction", "unreserved_workload_status"]

DEACTIVATED = "Deactivated"


def _evicted(
    conditions: list[Condition],
    reason: str,
    message: str,
    now: str,
    generation: int | None,
    *,
    unreserve: bool,
    pods_ready: bool,
    preempted_reason: str | None,
) -> list[Condition]:
    if reason.startswith(DEACTIVATED):
        # Kueue's eviction of an inactive Workload removes its DeactivationTarget.
        conditions = [c for c in conditions if c.type != DEACTIVATION_TARGET]
    conditions = set_condition(conditions, EVICTED, "True", reason, message, now, generation)
    if unreserve:
        conditions = _unreserved(conditions, reason, message, now, generation)
    if pods_ready:
        conditions = waiting_for_start(conditions, now, generation)
    if preempted_reason is not None:
        # Without observedGeneration, as Kueue v0.18.1 sets it.
        conditions = set_condition(conditions, PREEMPTED, "True", preempted_reason, message, now)
    return conditions


def _unreserved(
    conditions: list[Condition], reason: str, message: str, now: str, generation: int | None
) -> list[Condition]:
    """The reservation ended by an eviction; Requeued=True for a preemption (or node failures)."""
    requeued = "True" if reason in (PREEMPTED, "NodeFailures") else "False"
    conditions = set_condition(conditions, QUOTA_RESERVED, "False", "Pending", message, now, generation)
    conditions = set_condition(
        conditions, ADMITTED, "False", "NoReservation", "The workload has no reservation", now, generation
    )
    return set_condition(conditions, REQUEUED, requeued, reason, message, now, generation)


def evicted_workload_status(
    previous: WorkloadStatus,
    *,
    reason: str,
    message: str,
    requeue_state: RequeueState | None,
    requests: list[PodSetRequest],
    now: str,
    generation: int | None = None,
    pods_ready: bool = False,
    preempted_reason: str | None = None,
    keep_reservation: bool = False,
) -> WorkloadStatus:
    """Evicted=True; and its quota given back in the same write (its job no longer runs): the API
    never shows it holding quota after. With `keep_reservation`, the eviction's first step only:
    the reservation stays until its job is seen no longer running (`unreserved_workload_status`).

    `preempted_reason`: a preemption's victim, Preempted=True with this reason (InClusterQueue, ...)."""
    conditions = _evicted(
        previous.conditions,
        reason,
        message,
        now,
        generation,
        unreserve=not keep_reservation,
        pods_ready=pods_ready,
        preempted_reason=preempted_reason,
    )
    accumulated = previous.accumulated_past_execution_time_seconds
    return WorkloadStatus(
        conditions=conditions,
        admission=previous.admission if keep_reservation else None,
        requeue_state=requeue_state,
        resource_requests=requests,
        accumulated_past_execution_time_seconds=(
            accumulated if keep_reservation else accumulated_after(previous.conditions, accumulated, now)
        ),
    )


def unreserved_workload_status(
    previous: WorkloadStatus, now: str, generation: int | None = None
) -> WorkloadStatus:
    """An eviction's second step, once its job no longer runs: the reservation ends, with the
    Evicted condition's reason and message (Kueue's words then)."""
    evicted = condition(previous.conditions, EVICTED)
    reason, message = (evicted.reason, evicted.message) if evicted is not None else ("", "")
    conditions = _unreserved(previous.conditions, reason, message, now, generation)
    return WorkloadStatus(
        conditions=conditions,
        admission=None,
        requeue_state=previous.requeue_state,
        resource_requests=previous.resource_requests,
        accumulated_past_execution_time_seconds=accumulated_after(
            previous.conditions, previous.accumulated_past_execution_time_seconds, now
        ),
    )


def _reserving(workload: Workload) -> bool:
    """Kueue's Workload status QuotaReserved or Admitted: not finished, QuotaReserved=True."""
    finished = condition(workload.status.conditions, "Finished")
    reserved = condition(workload.status.conditions, QUOTA_RESERVED)
    if finished is not None and finished.status == "True":
        return False
    return reserved is not None and reserved.status == "True"


def released_after_eviction(
    previous: Workload | None, current: Workload
) -> tuple[str, str, str | None] | None:
    """A Workload pending again after holding quota, with Evicted=True (Kueue's moment for the
    eviction latency): (the ClusterQueue of its previous admission, the Evicted reason, when
    Evicted turned True). None for any other change."""
    if previous is None or not _reserving(previous) or _reserving(current):
        return None
    finished = condition(current.status.conditions, "Finished")
    if finished is not None and finished.status == "True":
        return None
    evicted = condition(current.status.conditions, EVICTED)
    admission = previous.status.admission
    if evicted is None or evicted.status != "True" or admission is None or not admission.cluster_queue:
        return None
    return admission.cluster_queue, evicted.reason, evicted.last_transition_time
