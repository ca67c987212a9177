"""Stopping queues (`spec.stopPolicy` of a LocalQueue or a ClusterQueue), as decisions.

Kueue v0.18.1's rules, read from its workload and LocalQueue controllers:

- `Hold` and `HoldAndDrain` stop the queue: nothing waiting in it is admitted. A Workload
  waiting in a stopped LocalQueue shows QuotaReserved=False Inadmissible "LocalQueue NAME is
  inactive", and the LocalQueue itself Active=False reason Stopped, "LocalQueue is stopped",
  with no pending workloads counted.
- `HoldAndDrain` also evicts what is admitted through the queue. The LocalQueue is looked at
  first: LocalQueueStopped, "The LocalQueue is stopped"; then the ClusterQueue:
  ClusterQueueStopped, "The ClusterQueue is stopped". Requeued=False takes the same reason.
- Once the queue runs again (`None`), a Workload so evicted gets Requeued=True
  (LocalQueueRestarted or ClusterQueueRestarted) before it is queued again.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CLUSTER_QUEUE_STOPPED",
    "HOLD_AND_DRAIN",
    "LOCAL_QUEUE_STOPPED",
    "LQ_STOPPED_ACTIVE",
    "StopCause",
    "drain_cause",
    "is_stopped",
    "local_queue_inactive",
    "restart_for",
]

HOLD_AND_DRAIN = "HoldAndDrain"
LOCAL_QUEUE_STOPPED = "LocalQueueStopped"
CLUSTER_QUEUE_STOPPED = "ClusterQueueStopped"
# The Active condition of a stopped LocalQueue (status, reason, message).
LQ_STOPPED_ACTIVE = ("False", "Stopped", "LocalQueue is stopped")


@dataclass(frozen=True, slots=True)
class StopCause:
    """A reason and message for a Workload's Evicted or Requeued condition."""

    reason: str
    message: str


_LQ_DRAINED = StopCause(LOCAL_QUEUE_STOPPED, "The LocalQueue is stopped")
_CQ_DRAINED = StopCause(CLUSTER_QUEUE_STOPPED, "The ClusterQueue is stopped")
_RESTARTS = {
    LOCAL_QUEUE_STOPPED: StopCause("LocalQueueRestarted", "The LocalQueue was restarted after being stopped"),
    CLUSTER_QUEUE_STOPPED: StopCause(
        "ClusterQueueRestarted", "The ClusterQueue was restarted after being stopped"
    ),
}


def is_stopped(policy: str | None) -> bool:
    """Whether a stopPolicy stops its queue (absent and `None` do not)."""
    return policy not in (None, "None")


def local_queue_inactive(name: str) -> str:
    """The QuotaReserved message of a Workload waiting in a stopped LocalQueue."""
    return f"LocalQueue {name} is inactive"


def drain_cause(local_queue_policy: str | None, cluster_queue_policy: str | None) -> StopCause | None:
    """Why an admitted Workload is evicted by a stop, or None: its LocalQueue first, then its
    ClusterQueue, each only when `HoldAndDrain`."""
    if local_queue_policy == HOLD_AND_DRAIN:
        return _LQ_DRAINED
    if cluster_queue_policy == HOLD_AND_DRAIN:
        return _CQ_DRAINED
    return None


def restart_for(requeued_reason: str, queue_exists: bool, queue_policy: str | None) -> StopCause | None:
    """For a Workload with Requeued=False `requeued_reason`: the Requeued=True cause to write now
    that the queue that stopped it runs again, or None (not evicted by a stop, or still stopped,
    or the queue is gone). `queue_*` describe the queue that reason names."""
    cause = _RESTARTS.get(requeued_reason)
    if cause is None or not queue_exists or is_stopped(queue_policy):
        return None
    return cause
