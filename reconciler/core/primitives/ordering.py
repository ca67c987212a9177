"""The timestamp a pending workload is queued by (Kueue's queue-order timestamp).

With `waitForPodsReady.requeuingStrategy.timestamp: Eviction` (the default) a
workload evicted for a PodsReady timeout is ordered by when it was evicted, so
it goes behind the workloads that waited meanwhile; with `Creation` it keeps
its creation time. A workload evicted by an admission check is always ordered
by its eviction. Preemption's "newer equal priority" test uses the same time.
"""

from __future__ import annotations

from reconciler.api import Workload

__all__ = ["CREATION_TIMESTAMP", "EVICTION_TIMESTAMP", "queue_order_timestamp"]

EVICTION_TIMESTAMP = "Eviction"
CREATION_TIMESTAMP = "Creation"
_PODS_READY_TIMEOUT = "PodsReadyTimeout"
_ADMISSION_CHECK = "AdmissionCheck"


def queue_order_timestamp(workload: Workload, requeuing_timestamp: str = EVICTION_TIMESTAMP) -> str:
    """RFC 3339 time the workload is ordered by in its queue ("" when unknown)."""
    evicted = next((c for c in workload.status.conditions if c.type == "Evicted"), None)
    if evicted is not None and evicted.status == "True" and evicted.last_transition_time:
        by_timeout = evicted.reason == _PODS_READY_TIMEOUT and requeuing_timestamp == EVICTION_TIMESTAMP
        if by_timeout or evicted.reason == _ADMISSION_CHECK:
            return evicted.last_transition_time
    return workload.metadata.creation_timestamp or ""
