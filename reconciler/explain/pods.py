"""An admitted workload's pods in an explanation: ready counts, unallocated claims, the
PodsReady clock (waitForPodsReady) and the Warning Events a user would dig out with kubectl."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from reconciler.api import Job, Pod, ResourceClaim, Workload
from reconciler.api.times import epoch
from reconciler.core.primitives.podstatus import claim_problems, controller_of, ready_or_counted
from reconciler.core.scheduling.podsready import pods_needed, pods_ready_deadline
from reconciler.core.status import condition
from reconciler.integrations.pods.group import IS_GROUP_WORKLOAD_ANNOTATION

from .state import Event, OtherJob, PodsReadyClock

__all__ = ["PodReport", "event_lines", "report_pods"]

Key = tuple[str, str]
# How long an admitted workload's pods may take to start before it counts as stalled.
STALL_AFTER_SECONDS = 60.0
MAX_EVENTS = 8


@dataclass
class PodReport:
    ready: int
    needed: int
    stalled: bool
    lines: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)


def _pod_line(pod: Pod, claims: dict[Key, ResourceClaim]) -> str:
    namespace = pod.metadata.namespace
    where = f"on {pod.spec.node_name}" if pod.spec.node_name else "not scheduled"
    ready = condition(pod.status.conditions, "Ready")
    state = "ready" if ready is not None and ready.status == "True" else "not ready"
    parts = [f"Pod {namespace}/{pod.metadata.name}: {pod.status.phase or 'Pending'}, {where}, {state}"]
    for status in pod.status.resource_claim_statuses:
        claim = claims.get((namespace, status.resource_claim_name or ""))
        if claim is None:
            parts.append(f"claim {status.name}: ResourceClaim not created yet")
        elif claim.status.allocation is None:
            parts.append(f"claim {status.name}: {claim.metadata.name} not allocated")
        else:
            parts.append(f"claim {status.name}: {claim.metadata.name} allocated")
    return "; ".join(parts)


def report_pods(
    workload: Workload,
    job: Job | None,
    pods: Iterable[Pod],
    claims: Iterable[ResourceClaim],
    now: str,
    wait: PodsReadyClock | None,
    other: OtherJob | None = None,
) -> PodReport:
    """What an admitted workload's pods say, and whether it is stalled (pods not ready long after
    admission, or claims the scheduler cannot allocate)."""
    if other is not None:
        own = [p for p in pods if _controlled_by(p, other)]
        ready = ready_or_counted(own, other.integration.pods_ready_count(other.obj))
    else:
        own = [p for p in pods if job is None or owner_job(p) == job.metadata.name]
        ready = ready_or_succeeded(own, job)
    by_key = {(c.metadata.namespace, c.metadata.name): c for c in claims}
    namespace = workload.metadata.namespace
    group = workload.metadata.annotations.get(IS_GROUP_WORKLOAD_ANNOTATION) == "true"
    needed = pods_needed(job.spec.parallelism, job.spec.completions) if job is not None else 1
    if group or other is not None:  # a pod group, or a job of another kind: every pod its pod sets count
        needed = sum(1 if ps.count is None else ps.count for ps in workload.spec.pod_sets)
    report = PodReport(ready=ready, needed=needed, stalled=False)
    report.lines = [_pod_line(p, by_key) for p in sorted(own, key=lambda p: p.metadata.name)]
    report.lines.insert(0, f"pods ready or succeeded: {report.ready} of {needed} needed")
    if report.ready >= needed:
        return report
    for problem in claim_problems(namespace, own, by_key):
        report.findings.append(
            f"Pod {namespace}/{problem.pod} cannot be scheduled: ResourceClaim {namespace}/{problem.claim} "
            f"is not allocated: {problem.scheduler_message or 'no reason given by the scheduler'} "
            "(the quota was granted, the devices are not free or do not match: check the nodes' "
            "ResourceSlices and the claim's selectors)"
        )
        report.stalled = True
    allocated = condition(workload.status.conditions, "ClaimsAllocated")
    if allocated is not None and allocated.status == "False":
        report.stalled = True
    admitted = condition(workload.status.conditions, "Admitted")
    since, current = epoch(admitted.last_transition_time if admitted else None), epoch(now)
    waited = None if since is None or current is None else current - since
    if waited is not None and waited >= STALL_AFTER_SECONDS:
        report.stalled = True
    if not own:
        report.findings.append(
            "no pod of the group exists: its pods were stopped (deleted); they are made again by "
            "whoever created them (the Workload waits for them, WaitingForReplacementPods)"
            if group
            else "no pod of the Job exists yet: the Job controller creates them once the Job is unsuspended"
        )
    if wait is None:
        report.findings.append(
            "with waitForPodsReady (on by default in a v1beta2 Configuration) the controller evicts it "
            "when its pods are not ready in time and requeues it with backoff"
        )
        return report
    deadline = pods_ready_deadline(
        workload.status.conditions, wait.timeout_seconds, wait.recovery_timeout_seconds
    )
    if deadline is not None and current is not None:
        left = deadline.at - current
        when = f"in {int(left)} s" if left > 0 else "now (overdue)"
        report.findings.append(
            f"waitForPodsReady: unless {needed - report.ready} more pod(s) become ready, the controller "
            f"evicts it {when} (timeout {int(wait.timeout_seconds)} s) and requeues it with backoff"
        )
    return report


def event_lines(events: Iterable[Event], names: set[tuple[str, str]]) -> list[str]:
    """Warning Events about the given (kind, name) objects, newest last."""
    picked = [
        e for e in events if e.type == "Warning" and (e.involved_object.kind, e.involved_object.name) in names
    ]
    picked.sort(key=lambda e: e.when())
    lines: list[str] = []
    for e in picked[-MAX_EVENTS:]:
        times = f" (x{e.count})" if e.count and e.count > 1 else ""
        about = f"{e.involved_object.kind} {e.involved_object.name}"
        lines.append(f"{e.when() or '?'}  {about}: {e.reason}{times}: {e.message}")
    return lines


def _controlled_by(pod: Pod, other: OtherJob) -> bool:
    """Whether the job controls the pod directly (pods its children make are counted by its
    own status instead: `Integration.pods_ready_count`)."""
    return any(
        ref.controller and other.integration.owns(other.obj, ref.kind, ref.api_version, ref.name)
        for ref in pod.metadata.owner_references
    )


def owner_job(pod: Pod) -> str | None:
    """The name of the Job that controls this pod, if any."""
    owner = controller_of(pod, ("Job",))
    return None if owner is None else owner[1]


def ready_or_succeeded(pods: Iterable[Pod], job: Job | None) -> int:
    """Pods ready or succeeded, from the pods seen or the Job's own counts, whichever is larger.

    The Job's counts cover succeeded pods that were already deleted.
    """
    counted = 0 if job is None else job.status.succeeded + (job.status.ready or 0)
    return ready_or_counted(pods, counted)
