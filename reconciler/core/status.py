"""Workload and ClusterQueue status as the Kueue API shows it."""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.api import (
    Admission as AdmissionStatus,
)
from reconciler.api import (
    AdmissionFairSharingStatus,
    ClusterQueueStatus,
    CohortStatus,
    Condition,
    FairSharingStatus,
    FlavorUsage,
    LocalQueueFairSharingStatus,
    LocalQueueFlavorUsage,
    LocalQueueResourceUsage,
    LocalQueueStatus,
    PodSetAssignment,
    PodSetRequest,
    RequeueState,
    ResourceUsage,
    WorkloadStatus,
)
from reconciler.api.times import rfc3339

from .engine import Engine
from .model.workloads import WorkloadInfo
from .primitives.quantity import format_amount, format_milli
from .queueing.admission_fair_sharing import order_key
from .queueing.stops import LQ_STOPPED_ACTIVE
from .quota.ledger import FlavorResource
from .scheduling.max_execution import accumulated_after
from .scheduling.scheduler import Admit, Pending

__all__ = [
    "AFS_CONDITION",
    "admitted_workload_status",
    "backoff_finished_status",
    "cluster_queue_status",
    "cohort_status",
    "condition",
    "local_queue_status",
    "pending_workload_status",
    "resource_requests",
    "set_condition",
    "waiting_for_start",
]

QUOTA_RESERVED = "QuotaReserved"
ADMITTED = "Admitted"
REQUEUED = "Requeued"
EVICTED = "Evicted"
PREEMPTED = "Preempted"  # the condition, and the Evicted reason of a preemption
PODS_READY = "PodsReady"
MAX_CONDITION_MESSAGE = 32 * 1024
# This controller's own LocalQueue condition (not Kueue's): the admission fair sharing score and
# the LocalQueue's place in its ClusterQueue's order.
AFS_CONDITION = "dra-quota-reconciler/AdmissionFairSharing"


def _truncate(message: str) -> str:
    if len(message) <= MAX_CONDITION_MESSAGE:
        return message
    return message[: MAX_CONDITION_MESSAGE - 4] + " ..."


def condition(conditions: Sequence[Condition], kind: str) -> Condition | None:
    for c in conditions:
        if c.type == kind:
            return c
    return None


def set_condition(
    conditions: Sequence[Condition],
    kind: str,
    status: str,
    reason: str,
    message: str,
    now: str,
    generation: int | None = None,
) -> list[Condition]:
    """meta.SetStatusCondition: the transition time moves only when the status changes."""
    out: list[Condition] = []
    found = False
    for c in conditions:
        if c.type != kind:
            out.append(c)
            continue
        found = True
        moved = c.status != status
        out.append(
            Condition(
                type=kind,
                status=status,
                reason=reason,
                message=_truncate(message),
                last_transition_time=now if moved else c.last_transition_time,
                observed_generation=generation,
            )
        )
    if not found:
        out.append(Condition(kind, status, reason, _truncate(message), now, generation))
    return out


def resource_requests(info: WorkloadInfo) -> list[PodSetRequest]:
    return [
        PodSetRequest(name, {r: format_amount(r, v) for r, v in sorted(amounts.items())})
        for name, amounts in info.total_requests()
    ]


def waiting_for_start(conditions: list[Condition], now: str, generation: int | None) -> list[Condition]:
    """PodsReady as it stands whenever a workload (re)starts its wait for pods."""
    return set_condition(
        conditions,
        PODS_READY,
        "False",
        "WaitForStart",
        "Not all pods are ready or succeeded",
        now,
        generation,
    )


def admitted_workload_status(
    previous: WorkloadStatus,
    decision: Admit,
    now: str,
    generation: int | None = None,
    *,
    pods_ready: bool = False,
) -> WorkloadStatus:
    """The status of an admission; with `pods_ready` the PodsReady clock starts now."""
    conditions = list(previous.conditions)
    for kind in (EVICTED, PREEMPTED):
        # Kueue keeps the last eviction and preemption visible, marked as past.
        active = condition(conditions, kind)
        if active is not None and active.status == "True":
            message = f"Previously: {active.message}"
            conditions = set_condition(conditions, kind, "False", "QuotaReserved", message, now, generation)
    if pods_ready:
        conditions = waiting_for_start(conditions, now, generation)
    conditions = set_condition(
        conditions,
        QUOTA_RESERVED,
        "True",
        "QuotaReserved",
        f"Quota reserved in ClusterQueue {decision.cluster_queue}",
        now,
        generation,
    )
    conditions = set_condition(
        conditions, ADMITTED, "True", "Admitted", "The workload is admitted", now, generation
    )
    admission = AdmissionStatus(
        cluster_queue=decision.cluster_queue,
        pod_set_assignments=[
            PodSetAssignment(
                name=ps.name,
                flavors=dict(sorted(ps.flavors.items())),
                resource_usage={r: format_amount(r, v) for r, v in sorted(ps.usage.items())},
                count=ps.count,
                topology_assignment=ps.topology,
            )
            for ps in decision.pod_sets
        ],
    )
    return WorkloadStatus(
        conditions=conditions,
        admission=admission,
        requeue_state=previous.requeue_state,
        resource_requests=[],
    )


def pending_workload_status(
    previous: WorkloadStatus,
    info: WorkloadInfo,
    decision: Pending,
    now: str,
    generation: int | None = None,
) -> WorkloadStatus:
    conditions = set_condition(
        previous.conditions, QUOTA_RESERVED, "False", decision.reason, decision.message, now, generation
    )
    admitted = condition(conditions, ADMITTED)
    if admitted is not None and admitted.status == "True":
        conditions = set_condition(
            conditions, ADMITTED, "False", "NoReservation", "The workload has no reservation", now, generation
        )
    if info.problem is not None:
        conditions = set_condition(
            conditions,
            REQUEUED,
            "False",
            "Inadmissible",
            info.problem.requeue_message or decision.message,
            now,
            generation,
        )
    return WorkloadStatus(
        conditions=conditions,
        admission=None,
        requeue_state=previous.requeue_state,
        resource_requests=resource_requests(info),
        accumulated_past_execution_time_seconds=accumulated_after(
            previous.conditions, previous.accumulated_past_execution_time_seconds, now
        ),
    )


def _flavor_usage(state: Engine, name: str, usage: dict[FlavorResource, int]) -> list[FlavorUsage]:
    model = state.cache.cluster_queues.get(name)
    if model is None:
        return []
    out: list[FlavorUsage] = []
    for group in model.groups:
        for quota in group.flavors:
            out.append(
                FlavorUsage(
                    name=quota.name,
                    resources=[
                        ResourceUsage(
                            r,
                            format_amount(r, usage.get((quota.name, r), 0)),
                            # Above its own nominal quota: borrowed from the cohort.
                            format_amount(r, max(0, usage.get((quota.name, r), 0) - quota.nominal.get(r, 0))),
                        )
                        for r in sorted(group.covered)
                    ],
                )
            )
    return out


def cluster_queue_status(
    state: Engine,
    name: str,
    previous: ClusterQueueStatus,
    now: str,
    generation: int | None = None,
) -> ClusterQueueStatus:
    usage = state.ledger.usage(name)
    admitted = state.ledger.holder_count(name)
    active, inadmissible = state.queues.pending_counts(name)
    status, reason, message = state.cache.cluster_queue_active(name)
    flavors = _flavor_usage(state, name, usage)
    return ClusterQueueStatus(
        conditions=set_condition(previous.conditions, "Active", status, reason, message, now, generation),
        flavors_reservation=flavors,
        flavors_usage=flavors,
        pending_workloads=active + inadmissible,
        reserving_workloads=admitted,
        admitted_workloads=admitted,
        fair_sharing=_fair_sharing(state, "cq", name),
    )


def _fair_sharing(state: Engine, kind: str, name: str) -> FairSharingStatus | None:
    """status.fairSharing: Kueue's rounded weighted share while fair sharing is on, else none."""
    if not state.fair_sharing:
        return None
    return FairSharingStatus(weighted_share=state.share(kind, name).rounded())


def cohort_status(state: Engine, name: str) -> CohortStatus:
    """A Cohort object's status: its weighted share while fair sharing is on."""
    return CohortStatus(fair_sharing=_fair_sharing(state, "cohort", name))


def local_queue_status(
    state: Engine,
    namespace: str,
    name: str,
    previous: LocalQueueStatus,
    now: str,
    generation: int | None = None,
) -> LocalQueueStatus:
    """Kueue's LocalQueue status: counts, usage of its admitted workloads, Active."""
    waiting, admitted = state.local_queue_members(namespace, name)
    cluster_queue = state.queues.local_queues.get((namespace, name), "")
    usage: dict[FlavorResource, int] = {}
    for key in admitted:
        charge = state.ledger.charge_of(key)
        if charge is not None:
            for fr, amount in charge.usage.items():
                usage[fr] = usage.get(fr, 0) + amount
    if (namespace, name) in state.queues.stopped_local_queues:
        active = LQ_STOPPED_ACTIVE
    elif cluster_queue not in state.cache.cluster_queues:
        active = ("False", "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue")
    elif state.cache.cluster_queue_active(cluster_queue)[0] != "True":
        active = ("False", "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue")
    else:
        active = ("True", "Ready", "Can submit new workloads to localQueue")
    flavors = [
        LocalQueueFlavorUsage(
            name=f.name,
            resources=[LocalQueueResourceUsage(r.name, r.total) for r in f.resources],
        )
        for f in _flavor_usage(state, cluster_queue, usage)
    ]
    conditions = set_condition(previous.conditions, "Active", *active, now, generation)
    fair = _afs_status(state, namespace, name)
    if fair is not None:
        conditions = set_condition(
            conditions, AFS_CONDITION, "True", "Ranked", afs_ranking(state, namespace, name), now, generation
        )
    else:
        conditions = [c for c in conditions if c.type != AFS_CONDITION]
    return LocalQueueStatus(
        fair_sharing=fair,
        conditions=conditions,
        flavors_reservation=flavors,
        flavors_usage=flavors,
        pending_workloads=waiting,
        reserving_workloads=len(admitted),
        admitted_workloads=len(admitted),
    )


def _afs_status(state: Engine, namespace: str, name: str) -> LocalQueueFairSharingStatus | None:
    """Kueue's status.fairSharing.admissionFairSharingStatus, once the LocalQueue was sampled."""
    afs = state.afs
    if afs is None or state.queues.afs_score((namespace, name)) is None:
        return None
    entry = afs.usage.get((namespace, name))
    if entry is None:
        return None
    consumed = {resource: format_milli(milli) for resource, milli in sorted(entry.consumed.items())}
    return LocalQueueFairSharingStatus(
        admission_fair_sharing_status=AdmissionFairSharingStatus(consumed, rfc3339(entry.last_update))
    )


def afs_ranking(state: Engine, namespace: str, name: str) -> str:
    """The LocalQueue's admission fair sharing score and its place among its ClusterQueue's
    LocalQueues (this controller's own; Kueue shows neither)."""
    queues = state.queues
    lq = (namespace, name)
    cluster_queue = queues.local_queues.get(lq, "")
    score = queues.afs_score(lq)
    if score is None:
        return ""
    peers = sorted(
        (order_key(s), key)
        for key, cq in queues.local_queues.items()
        if cq == cluster_queue and (s := queues.afs_score(key)) is not None
    )
    place = 1 + next(i for i, (_, key) in enumerate(peers) if key == lq)
    weight = state.afs.weights.get(lq, 1.0) if state.afs is not None else 1.0
    return (
        f"score {score:.6g} (weighted usage over weight {weight:g}); place {place} of {len(peers)} "
        f"LocalQueues in ClusterQueue {cluster_queue}, lowest score admitted first"
    )


def backoff_finished_status(
    previous: WorkloadStatus, now: str, generation: int | None = None
) -> WorkloadStatus:
    """The requeue backoff has run out: Requeued=True, requeueAt cleared, the count kept."""
    conditions = set_condition(
        previous.conditions,
        REQUEUED,
        "True",
        "BackoffFinished",
        "The workload backoff was finished",
        now,
        generation,
    )
    count = previous.requeue_state.count if previous.requeue_state is not None else None
    return WorkloadStatus(
        conditions=conditions,
        admission=previous.admission,
        requeue_state=RequeueState(count=count) if count is not None else None,
        resource_requests=previous.resource_requests,
    )
