"""The leader's pending queues as the visibility API reads them (``reconciler.visibility``).

Read on the event loop when a request comes (never while the reconciler mutates state: it does
not await then), from the queue manager and the latest Workload objects: no API read. Each entry
carries its wait estimate (estimates.py). Until the
ledger is rebuilt after start the queues are partial, so nothing is published before.
"""

from __future__ import annotations

from reconciler.api.times import rfc3339
from reconciler.core.queueing.queues import pending_in_order
from reconciler.core.status import QUOTA_RESERVED, condition
from reconciler.runtime.loop.estimates import Estimator
from reconciler.runtime.loop.reconciler import Reconciler
from reconciler.visibility.summary import OwnerRef, PendingEntry

__all__ = ["ReconcilerPending"]


class ReconcilerPending:
    def __init__(self, reconciler: Reconciler) -> None:
        self._reconciler = reconciler

    @property
    def ready(self) -> bool:
        return self._reconciler.ready

    def pending(self, cluster_queue: str) -> list[PendingEntry] | None:
        ctx = self._reconciler.ctx
        infos = pending_in_order(ctx.engine.queues, cluster_queue)
        if infos is None:
            return None
        estimates = Estimator(ctx).estimates(cluster_queue)
        entries = []
        for info in infos:
            workload = ctx.store.workloads.get(info.key)
            owners: tuple[OwnerRef, ...] = ()
            created, reason = None, ""
            if workload is not None:
                meta = workload.metadata
                owners = tuple(OwnerRef(r.api_version, r.kind, r.name, r.uid) for r in meta.owner_references)
                created = meta.creation_timestamp
                reserved = condition(workload.status.conditions, QUOTA_RESERVED)
                reason = reserved.message if reserved is not None and reserved.status == "False" else ""
            estimate = estimates.get(info.key)
            start = None if estimate is None or estimate.start is None else rfc3339(estimate.start)
            entries.append(
                PendingEntry(
                    info.namespace,
                    info.name,
                    info.queue_name,
                    info.priority,
                    created,
                    owners,
                    reason,
                    start,
                    "" if estimate is None else estimate.why_unknown,
                )
            )
        return entries

    def cluster_queue_of(self, namespace: str, local_queue: str) -> str | None:
        return self._reconciler.ctx.engine.queues.local_queues.get((namespace, local_queue))
