"""What to do for a pod group, decided from plain data (no I/O), in the order of Kueue v0.18.1's
job reconciler for a composable job.

1. A Workload is matched to the group (Kueue's FindMatchingWorkloads for a group): per pod set,
   the running pods of its role beyond its count are excess (finalized and deleted, oldest and
   ungated kept), failed pods replaced by newer ones are let go (finalized), and the pods still
   missing make the Workload `WaitingForReplacementPods`. Pods the Workload gains are added to
   its owners. A Workload left with no pod of its roles no longer matches: it is deleted (a
   running group stopped first).
2. A finished Workload lets go of every pod; one being deleted stops them all, even finished ones.
3. A group whose pods all succeeded (or with none running and one marked not retriable) has its
   Workload finished.
4. Without a Workload, once no pod runs: failed pods are let go, and the Workload is made only
   when as many pods as the group's total count can run (until then a Warning
   `ErrWorkloadCompose`); pods beyond it are excess.
5. An evicted Workload stops its running pods (reason `WorkloadEvictedDueTo<reason>`); an
   admitted one starts its gated pods, each with its role's flavors; running pods without an
   admitted Workload are stopped (`NotAdmitted`).

Stopping a pod is Kueue's: the condition `TerminationTarget` (the stop's reason and message) on
it, then its deletion.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from reconciler.api import Condition, PodSet, ResourceFlavor, Workload
from reconciler.api.pods import ManagedPod
from reconciler.api.times import epoch
from reconciler.core.model.workloads import QUEUE_NAME_LABEL
from reconciler.core.status import condition, set_condition

from ..base import Outcome, PodSetStart
from ..decide import pod_set_starts, queue_pod_labels
from .group import (
    MAX_ROLES,
    PodGroup,
    group_finished,
    group_pod_sets,
    has_finalizer,
    is_gated,
    role_of,
    runnable_or_succeeded,
    suspended,
    total_count,
)
from .pod import GROUP_TOTAL_COUNT_ANNOTATION

__all__ = [
    "NO_MATCH",
    "WAITING_FOR_REPLACEMENT",
    "GroupKnown",
    "GroupPlan",
    "Stop",
    "plan_group",
    "replacement_conditions",
]

WAITING_FOR_REPLACEMENT = "WaitingForReplacementPods"
NO_MATCH = "No matching Workload; restoring pod templates according to existent Workload"
NOT_ADMITTED = "Not admitted by cluster queue"


@dataclass(frozen=True, slots=True)
class GroupKnown:
    """What the runtime knows besides the objects: the ledger's view and writes in flight."""

    admitted: bool = False
    creating: bool = False
    admitting: bool = False
    finishing: bool = False
    deleting: bool = False


@dataclass(frozen=True, slots=True)
class Stop:
    """Pods to mark TerminationTarget (reason, message) and delete."""

    pods: tuple[ManagedPod, ...]
    reason: str
    message: str


@dataclass
class GroupPlan:
    """The steps for one group now (each performed once; the next pass sees their results)."""

    finalize: list[ManagedPod] = field(default_factory=list)  # let go: the finalizer removed
    excess: list[ManagedPod] = field(default_factory=list)  # finalized and deleted
    owners: list[ManagedPod] = field(default_factory=list)  # added to the Workload's owners
    conditions: list[Condition] | None = None  # the Workload's, WaitingForReplacementPods changed
    stop: Stop | None = None
    start: list[tuple[ManagedPod, PodSetStart]] = field(default_factory=list)
    finish: Outcome | None = None
    # A Workload to create, from these pods and pod sets; or why it cannot be yet (`problem`,
    # told with a Warning Event when `tell`).
    create: tuple[tuple[ManagedPod, ...], list[PodSet]] | None = None
    problem: str = ""
    tell: bool = False
    delete_workload: bool = False


# --- ordering (Kueue's sortActivePods / sortInactivePods) ---------------------------------


def _created(pod: ManagedPod) -> float:
    return epoch(pod.metadata.creation_timestamp) or 0.0


def _keep_first_active(pods: Sequence[ManagedPod]) -> list[ManagedPod]:
    """Running pods in the order they are kept: with the finalizer, ungated, oldest first."""
    return sorted(pods, key=lambda p: (not has_finalizer(p), is_gated(p), _created(p)))


def _last_active(pod: ManagedPod, now: float) -> float:
    failed_at = now
    for c in pod.status.conditions:
        if c.type == "ContainersReady":
            if c.status == "False" and c.reason == "PodFailed":
                failed_at = epoch(c.last_transition_time) or now
            break
    deleted_at = epoch(pod.metadata.deletion_timestamp) or now
    return min(failed_at, deleted_at)


def _keep_first_inactive(pods: Sequence[ManagedPod], now: float) -> list[ManagedPod]:
    """Failed pods in the order they are kept: with the finalizer, active last, oldest first."""
    return sorted(pods, key=lambda p: (not has_finalizer(p), -_last_active(p, now), _created(p)))


# --- 1. matching a Workload ------------------------------------------------------------


@dataclass
class _Match:
    kept: list[ManagedPod] = field(default_factory=list)
    excess: list[ManagedPod] = field(default_factory=list)
    replaced: list[ManagedPod] = field(default_factory=list)
    absent: int = 0


def _match(pods: Sequence[ManagedPod], workload: Workload, now: float) -> _Match:
    out = _Match()
    active = [p for p in pods if runnable_or_succeeded(p)]
    inactive = [p for p in pods if not runnable_or_succeeded(p)]
    for ps in workload.spec.pod_sets:
        count = 1 if ps.count is None else ps.count
        role_active = [p for p in active if role_of(p) == ps.name]
        role_inactive = [p for p in inactive if role_of(p) == ps.name]
        out.absent += max(0, count - len(role_active))
        ordered = _keep_first_active(role_active)
        out.kept += ordered[:count]
        out.excess += ordered[count:]
        let_go = min(len(role_inactive), len(role_inactive) + len(role_active) - count)
        if let_go > 0:
            kept_inactive = _keep_first_inactive(role_inactive, now)
            out.kept += kept_inactive[: len(kept_inactive) - let_go]
            out.replaced += kept_inactive[len(kept_inactive) - let_go :]
        else:
            out.kept += role_inactive
    return out


def _equivalent(workload: Workload, pod_sets: list[PodSet]) -> bool:
    """Kueue's equivalentToWorkload for a group: every role of the pods is one of the
    Workload's, in order, with no more pods than it counts (counts ignored once finished)."""
    finished = _is_true(workload, "Finished")
    recorded = workload.spec.pod_sets
    if not finished and len(recorded) < len(pod_sets):
        return False
    j = -1
    for ps in pod_sets:
        j += 1
        while j < len(recorded) and recorded[j].name != ps.name:
            j += 1
        if j == len(recorded):
            return False
        if not finished and (recorded[j].count or 0) < (ps.count or 0):
            return False
    return True


def replacement_conditions(workload: Workload, absent: int, now: str) -> list[Condition] | None:
    """The Workload's conditions with WaitingForReplacementPods brought up to date (None: as
    they are): True while pods are missing (the eviction's reason and message when evicted,
    else `PodsFailed`), False `PodsReady` once none is."""
    current = condition(workload.status.conditions, WAITING_FOR_REPLACEMENT)
    if current is None and absent == 0:
        return None
    generation = workload.metadata.generation or None
    if absent > 0:
        evicted = condition(workload.status.conditions, "Evicted")
        if evicted is not None and evicted.status == "True":
            reason, message = evicted.reason, evicted.message
        elif current is None or current.status != "True":
            reason, message = "PodsFailed", "Some Failed pods need replacement"
        else:
            return None
        status = "True"
    elif current is not None and current.status != "False":
        status, reason, message = "False", "PodsReady", "No pods need replacement"
    else:
        return None
    if current is not None and (current.status, current.reason, current.message) == (status, reason, message):
        return None
    return set_condition(
        workload.status.conditions, WAITING_FOR_REPLACEMENT, status, reason, message, now, generation
    )


# --- 4. composing a Workload -----------------------------------------------------------


def _compose(group: PodGroup, plan: GroupPlan) -> None:
    """Kueue's ConstructComposableWorkload for a group (a problem stops it; `tell` says when
    Kueue records it as a Warning Event)."""
    active = [p for p in group.pods if runnable_or_succeeded(p)]
    plan.finalize += [p for p in group.pods if not runnable_or_succeeded(p) and has_finalizer(p)]
    first = group.metadata
    total = total_count(first.annotations)
    if total is None:
        plan.problem = f"pod '{first.name}': '{GROUP_TOTAL_COUNT_ANNOTATION}' is not a positive integer"
        return
    if len(active) < total:
        plan.problem, plan.tell = f"'{group.name}' group has fewer runnable pods than expected", True
        return
    queue = first.labels.get(QUEUE_NAME_LABEL, "")
    for pod in group.pods:
        if pod.status.phase == "Failed":
            continue
        other = pod.metadata.labels.get(QUEUE_NAME_LABEL, "")
        if other != queue:
            plan.problem = (
                f"pods '{first.name}' and '{pod.metadata.name}' has different queue names: {queue}!={other}"
            )
            return
        count = total_count(pod.metadata.annotations)
        if count != total:
            plan.problem = (
                f"pods '{first.name}' and '{pod.metadata.name}' has different "
                f"'{GROUP_TOTAL_COUNT_ANNOTATION}' values: {total}!={count}"
            )
            return
    ordered = _keep_first_active(active)
    plan.excess += ordered[total:]
    kept = tuple(ordered[:total])
    pod_sets = group_pod_sets(kept)
    if len(pod_sets) > MAX_ROLES:
        plan.problem = f"pod group can't include more than {MAX_ROLES} roles"
        return
    plan.create = (kept, pod_sets)


# --- the whole decision ----------------------------------------------------------------


def _is_true(workload: Workload, kind: str) -> bool:
    found = condition(workload.status.conditions, kind)
    return found is not None and found.status == "True"


def _running(pods: Sequence[ManagedPod]) -> tuple[ManagedPod, ...]:
    """The pods a stop deletes: not being deleted already, neither gated nor terminated."""
    return tuple(p for p in pods if not p.metadata.deletion_timestamp and not suspended(p))


def _finalizable(pods: Sequence[ManagedPod]) -> list[ManagedPod]:
    return [p for p in pods if has_finalizer(p)]


def plan_group(
    group: PodGroup,
    workload: Workload | None,
    known: GroupKnown,
    flavors: Mapping[str, ResourceFlavor],
    *,
    now: str,
) -> GroupPlan:
    """The steps for a managed group and its Workload (None: not created yet)."""
    plan = GroupPlan()
    if workload is not None:
        if known.deleting:
            return plan
        match = _match(group.pods, workload, epoch(now) or 0.0)
        if not match.kept or not _equivalent(workload, group_pod_sets(match.kept)):
            plan.delete_workload = True
            if not any(suspended(p) for p in group.pods) and not _is_true(workload, "Finished"):
                plan.stop = Stop(_running(group.pods), "NoMatchingWorkload", NO_MATCH)
            return plan
        recorded = {(r.name, r.uid) for r in workload.metadata.owner_references}
        plan.owners = [p for p in match.kept if (p.metadata.name, p.metadata.uid) not in recorded]
        plan.excess = match.excess
        plan.finalize = _finalizable(match.replaced)
        plan.conditions = replacement_conditions(workload, match.absent, now)
        _with_workload(group.with_pods(match.kept), group, workload, known, flavors, plan)
        return plan
    _without_workload(group, known, plan)
    return plan


def _without_workload(group: PodGroup, known: GroupKnown, plan: GroupPlan) -> None:
    total = group.total
    outcome = None if total is None else group_finished(group.pods, total)
    if outcome is not None:
        plan.finalize = _finalizable(group.pods)  # nothing to finish: the pods are let go
        return
    if known.creating or any(p.status.phase == "Running" for p in group.pods):
        return  # Kueue waits for no pod to run before it makes a Workload
    _compose(group, plan)


def _with_workload(
    kept: PodGroup,
    group: PodGroup,
    workload: Workload,
    known: GroupKnown,
    flavors: Mapping[str, ResourceFlavor],
    plan: GroupPlan,
) -> None:
    if _is_true(workload, "Finished"):
        plan.finalize = _finalizable(group.pods)
        return
    if workload.metadata.deletion_timestamp:
        stoppable = tuple(p for p in group.pods if not p.metadata.deletion_timestamp)
        plan.stop = Stop(stoppable, "WorkloadDeleted", "Workload is deleted")
        plan.finalize = _finalizable(group.pods)
        return
    total = kept.total
    outcome = None if total is None else group_finished(kept.pods, total)
    if outcome is not None:
        if not known.finishing:
            plan.finish = outcome
        return
    evicted = condition(workload.status.conditions, "Evicted")
    if evicted is not None and evicted.status == "True":
        reason = f"WorkloadEvictedDueTo{evicted.reason}"
        plan.stop = Stop(_running(kept.pods), reason, evicted.message)
        return
    if known.admitting:
        return
    if any(suspended(p) for p in kept.pods):
        admission = workload.status.admission
        if known.admitted and admission is not None:
            pod_sets = workload.spec.pod_sets
            labels = queue_pod_labels(workload)
            starts = {s.name: s for s in pod_set_starts(admission, flavors, pod_sets, labels)}
            for pod in kept.pods:
                start = starts.get(role_of(pod))
                if start is not None and is_gated(pod):
                    plan.start.append((pod, start))
        return
    if not known.admitted:
        plan.stop = Stop(_running(kept.pods), "NotAdmitted", NOT_ADMITTED)
