"""What an admitted job's pods say: how many are ready, and which claims keep them from starting.

Pure functions over Pod and ResourceClaim projections. The claim report
quotes kube-scheduler's own words (the pod's PodScheduled message), so a user
learns from the Workload why an admitted job does not start.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from reconciler.api import Condition, Pod, ResourceClaim
from reconciler.api.times import epoch

__all__ = [
    "CLAIMS_ALLOCATED",
    "ClaimProblem",
    "all_claims_allocated",
    "claim_problems",
    "claim_report_grace",
    "claims_condition",
    "controller_of",
    "eviction_cause",
    "lasting",
    "ready_or_counted",
    "same_report",
]

CLAIMS_ALLOCATED = "ClaimsAllocated"
NOT_ALLOCATED_REASON = "ClaimNotAllocated"
ALLOCATED_REASON = "ClaimsAllocated"
ALLOCATED_MESSAGE = "All ResourceClaims of the workload's pods are allocated"
# kube-scheduler's PodScheduled reason for a pod it does not try while it has scheduling gates.
SCHEDULING_GATED = "SchedulingGated"

Key = tuple[str, str]


def controller_of(pod: Pod, kinds: Collection[str]) -> tuple[str, str] | None:
    """The (kind, name) of the controller of this pod, when its kind is one of `kinds`."""
    for ref in pod.metadata.owner_references:
        if ref.controller and ref.kind in kinds:
            return ref.kind, ref.name
    return None


def lasting(
    problems: list[ClaimProblem], now: float, grace: float
) -> tuple[list[ClaimProblem], float | None]:
    """The problems that have lasted `grace` seconds, and when the next younger one will have.

    The scheduler often reports a pod unschedulable for a moment while devices are being freed;
    only what lasts is worth a condition and a Warning.
    """
    old = [p for p in problems if p.since is None or p.since + grace <= now]
    young = [p.since + grace for p in problems if p.since is not None and p.since + grace > now]
    return old, min(young) if young else None


# A claim still unallocated is reported once it has been for a quarter of the PodsReady timeout,
# within these bounds (the upper one without waitForPodsReady): in a busy cluster a pod waits for
# a device to be freed, and the scheduler says "cannot allocate all claims" meanwhile; the report
# is for claims that stay so, and still comes well before the eviction.
CLAIM_REPORT_GRACE_MIN = 5.0
CLAIM_REPORT_GRACE_MAX = 60.0


def claim_report_grace(pods_ready_timeout: float | None) -> float:
    """Seconds a pod's claim stays unallocated before the Workload reports it."""
    if pods_ready_timeout is None:
        return CLAIM_REPORT_GRACE_MAX
    return min(CLAIM_REPORT_GRACE_MAX, max(CLAIM_REPORT_GRACE_MIN, pods_ready_timeout / 4))


_MORE_PODS = re.compile(r" \(and \d+ more pods?\)$")


def same_report(previous: str, message: str) -> bool:
    """Two ClaimNotAllocated messages name the same pod, claim and number of other pods: only the
    scheduler's words differ (its node counts change at every retry), which is no news."""

    def subject(text: str) -> tuple[str, str]:
        more = _MORE_PODS.search(text)
        return text.split(" is not allocated: ", 1)[0], more.group(0) if more else ""

    return subject(previous) == subject(message)


def _condition(conditions: Iterable[Condition], kind: str) -> Condition | None:
    return next((c for c in conditions if c.type == kind), None)


def _is_ready(pod: Pod) -> bool:
    if pod.metadata.deletion_timestamp or pod.status.phase != "Running":
        return False
    ready = _condition(pod.status.conditions, "Ready")
    return ready is not None and ready.status == "True"


def ready_or_counted(pods: Iterable[Pod], counted: int) -> int:
    """Pods ready or succeeded, from the pods seen or a job's own count, whichever is larger."""
    seen = sum(1 for p in pods if _is_ready(p) or p.status.phase == "Succeeded")
    return max(seen, counted)


@dataclass(frozen=True, slots=True, order=True)
class ClaimProblem:
    pod: str
    claim: str
    scheduler_message: str
    # When the scheduler first said the pod is unschedulable (seconds since the epoch), if known.
    since: float | None = field(default=None, compare=False)


def claim_problems(
    namespace: str, pods: Iterable[Pod], claims: Mapping[Key, ResourceClaim]
) -> list[ClaimProblem]:
    """Pods the scheduler could not place that have a claim still unallocated, sorted.

    A pod the scheduler reports `SchedulingGated` is left out: it was not tried yet (a plain
    pod held by Kueue's admission gate, whose claim waits as it should, and the scheduler's
    condition stays so for a moment after the pod is ungated)."""
    found: list[ClaimProblem] = []
    for pod in pods:
        if pod.spec.node_name or pod.metadata.deletion_timestamp:
            continue
        scheduled = _condition(pod.status.conditions, "PodScheduled")
        if scheduled is None or scheduled.status != "False" or scheduled.reason == SCHEDULING_GATED:
            continue
        for status in pod.status.resource_claim_statuses:
            name = status.resource_claim_name
            if not name:
                continue
            claim = claims.get((namespace, name))
            if claim is not None and claim.status.allocation is None:
                since = epoch(scheduled.last_transition_time)
                found.append(ClaimProblem(pod.metadata.name, name, scheduled.message, since))
    return sorted(found)


def all_claims_allocated(namespace: str, pods: Iterable[Pod], claims: Mapping[Key, ResourceClaim]) -> bool:
    """Every pod seen has every claim it names allocated (False when no pod is seen yet)."""
    seen = False
    for pod in pods:
        seen = True
        for status in pod.status.resource_claim_statuses:
            claim = claims.get((namespace, status.resource_claim_name or ""))
            if claim is None or claim.status.allocation is None:
                return False
    return seen


def claims_condition(
    namespace: str, problems: list[ClaimProblem], previous: Condition | None, *, all_allocated: bool
) -> tuple[str, str, str] | None:
    """(status, reason, message) of the ClaimsAllocated condition; None leaves it as it is."""
    if not problems:
        if previous is None or not all_allocated:
            return None  # never reported, or not yet known to be resolved
        return "True", ALLOCATED_REASON, ALLOCATED_MESSAGE
    first = problems[0]
    message = (
        f"Pod {namespace}/{first.pod} cannot be scheduled: ResourceClaim {namespace}/{first.claim} "
        f"is not allocated: {first.scheduler_message or 'no reason given by the scheduler'}"
    )
    others = len({p.pod for p in problems}) - 1
    if others:
        message += f" (and {others} more pod{'s' if others > 1 else ''})"
    return "False", NOT_ALLOCATED_REASON, message


def eviction_cause(namespace: str, pods: Iterable[Pod], claims: Mapping[Key, ResourceClaim]) -> str | None:
    """Why an admitted job's pods did not start, when it is a claim that cannot be allocated.

    None when nothing points at DRA (a slow start: image pulls, a pod still running its init
    containers...). A claim is to blame when an unscheduled pod names a claim still unallocated, or
    when the scheduler's own message for an unscheduled pod speaks of claims.
    """
    problems = claim_problems(namespace, pods, claims)
    if problems:
        first = problems[0]
        return (
            f"ResourceClaim {namespace}/{first.claim} of pod {namespace}/{first.pod} cannot be allocated: "
            f"{first.scheduler_message or 'no reason given by the scheduler'}"
        )
    for pod in pods:
        if pod.spec.node_name or pod.metadata.deletion_timestamp:
            continue
        scheduled = _condition(pod.status.conditions, "PodScheduled")
        if scheduled is not None and scheduled.status == "False" and "claim" in scheduled.message.lower():
            return f"pod {namespace}/{pod.metadata.name} cannot be scheduled: {scheduled.message}"
    return None
