"""Request bodies for the reconciler's writes, and "is the API already showing this?" checks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from reconciler.api import (
    ClusterQueueStatus,
    Condition,
    LocalQueueStatus,
    Workload,
    WorkloadStatus,
)
from reconciler.api.resources import WORKLOADS
from reconciler.core.quota.cache import after_reclaim  # how an admitted Workload is charged
from reconciler.core.status import condition
from reconciler.runtime.shared.actions import MergePatch, OnDone, Purpose

__all__ = [
    "after_reclaim",
    "api_body",
    "cluster_queue_status_patch",
    "evicting",
    "holds_quota",
    "is_true",
    "same_cluster_queue_status",
    "same_local_queue_status",
    "same_workload_status",
    "status_patch",
    "workload_status_write",
]


def is_true(conditions: list[Condition], kind: str) -> bool:
    found = condition(conditions, kind)
    return found is not None and found.status == "True"


def holds_quota(workload: Workload) -> bool:
    """Admitted in the API and not finished: its quota is in use (QuotaReserved and not Finished,
    each read from its first condition as `is_true` reads it; one pass, as it is asked often)."""
    if workload.status.admission is None:
        return False
    reserved: bool | None = None
    finished: bool | None = None
    for c in workload.status.conditions:
        if c.type == "QuotaReserved":
            if reserved is None:
                reserved = c.status == "True"
        elif c.type == "Finished" and finished is None:
            finished = c.status == "True"
    return bool(reserved) and not finished


def evicting(workload: Workload) -> bool:
    """Evicted while its quota is still reserved: its job is being stopped (Kueue's first step)."""
    return holds_quota(workload) and evicted(workload)


def evicted(workload: Workload) -> bool:
    """Its first Evicted condition is True (with `holds_quota` known: whether it is `evicting`)."""
    for c in workload.status.conditions:
        if c.type == "Evicted":
            return c.status == "True"
    return False


def _same_conditions(a: list[Condition], b: list[Condition]) -> bool:
    def essence(conds: list[Condition]) -> set[tuple[str, str, str, str]]:
        return {(c.type, c.status, c.reason, c.message) for c in conds}

    return essence(a) == essence(b)


def same_workload_status(a: WorkloadStatus, b: WorkloadStatus) -> bool:
    return (
        _same_conditions(a.conditions, b.conditions)
        and a.admission == b.admission
        and a.resource_requests == b.resource_requests
    )


def same_cluster_queue_status(a: ClusterQueueStatus, b: ClusterQueueStatus) -> bool:
    return (
        _same_conditions(a.conditions, b.conditions)
        and a.flavors_usage == b.flavors_usage
        and a.flavors_reservation == b.flavors_reservation
        and (a.pending_workloads, a.reserving_workloads, a.admitted_workloads)
        == (b.pending_workloads, b.reserving_workloads, b.admitted_workloads)
        and a.fair_sharing == b.fair_sharing
    )


def same_local_queue_status(a: LocalQueueStatus, b: LocalQueueStatus) -> bool:
    return (
        _same_conditions(a.conditions, b.conditions)
        and a.flavors_usage == b.flavors_usage
        and (a.pending_workloads, a.reserving_workloads, a.admitted_workloads)
        == (b.pending_workloads, b.reserving_workloads, b.admitted_workloads)
        and (a.fair_sharing is None or a.fair_sharing == b.fair_sharing)
    )


def api_body(obj: msgspec.Struct, api_version: str, kind: str) -> bytes:
    """JSON of a projection with apiVersion and kind set (they are omitted as defaults)."""
    body: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(obj))
    body["apiVersion"], body["kind"] = api_version, kind
    body.get("metadata", {}).pop("creationTimestamp", None)
    return msgspec.json.encode(body)


def status_patch(status: msgspec.Struct, resource_version: str | None = None) -> bytes:
    """A merge patch of `status`, with a resourceVersion precondition when one is given."""
    rendered: dict[str, Any] = msgspec.to_builtins(status)
    if isinstance(status, WorkloadStatus):
        # A merge patch only removes what it names as null.
        rendered.setdefault("admission", None)
        rendered.setdefault("resourceRequests", None)
        if status.requeue_state is not None and status.requeue_state.requeue_at is None:
            rendered["requeueState"]["requeueAt"] = None
    if isinstance(status, LocalQueueStatus):
        # Kueue omits empty usage lists (a ClusterQueue gone): removed, never written as [].
        for key in ("flavorsReservation", "flavorsUsage"):
            if not rendered.get(key):
                rendered[key] = None
    if isinstance(status, (ClusterQueueStatus, LocalQueueStatus)) and rendered.get("fairSharing") is None:
        rendered.pop("fairSharing", None)  # fair sharing off: left out (see cluster_queue_status_patch)
    body: dict[str, Any] = {"status": rendered}
    if resource_version:
        body["metadata"] = {"resourceVersion": resource_version}
    return msgspec.json.encode(body)


def cluster_queue_status_patch(desired: ClusterQueueStatus, shown: ClusterQueueStatus) -> bytes:
    """A ClusterQueue's status patch; a fairSharing the API still shows with fair sharing now off is
    removed (Kueue clears it)."""
    patch = status_patch(desired)
    if desired.fair_sharing is None and shown.fair_sharing is not None:
        body: dict[str, Any] = msgspec.json.decode(patch)
        body["status"]["fairSharing"] = None
        patch = msgspec.json.encode(body)
    return patch


def workload_status_write(
    purpose: Purpose,
    key: tuple[str, str],
    patch: bytes,
    on_done: OnDone,
    prepare: Callable[[bytes], bytes] | None = None,
) -> MergePatch:
    """A merge patch of a Workload's status subresource. Every such write of one Workload shares
    the slot "workload-status", so they land in the order they were asked for and a newer one
    replaces the one still waiting."""
    namespace, name = key
    return MergePatch(
        purpose,
        WORKLOADS,
        namespace,
        name,
        patch,
        subresource="status",
        slot_name="workload-status",
        on_done=on_done,
        prepare=prepare,
    )
