"""What waits: the queue manager (pending workloads by LocalQueue and ClusterQueue) and requeue backoff.

Kueue's split: the cache knows what is admitted, the queue manager knows what
waits and where. A waiting workload is in one of three places:

- *queued* in its ClusterQueue's `PendingQueue`, to be tried by the scheduler;
- *unqueueable*: it cannot enter any queue (its LocalQueue or ClusterQueue is
  missing, or its spec cannot be charged), with the reason to report;
- *held*: waiting out a requeue backoff; it counts as pending (inadmissible)
  in its queues but is never tried until it is added again.

Every waiting workload is also a member of its LocalQueue, for that queue's
counts. Admitted workloads are not here (see `cache.QuotaCache`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from ..model.workloads import WorkloadInfo
from .admission_fair_sharing import AdmissionFairSharing, order_key, to_milli
from .pending_queue import PendingQueue, QueueEntry
from .stops import local_queue_inactive

__all__ = ["QueueManager", "backoff_seconds", "pending_in_order"]

WorkloadKey = tuple[str, str]
LocalQueueKey = tuple[str, str]
FlavorResource = tuple[str, str]


@dataclass
class QueueManager:
    # LocalQueue (namespace, name) -> its ClusterQueue.
    local_queues: dict[LocalQueueKey, str] = field(default_factory=dict)
    # LocalQueues whose stopPolicy stops them: their members wait, unqueueable.
    stopped_local_queues: set[LocalQueueKey] = field(default_factory=set)
    # ClusterQueues that can take workloads, with their pending queues.
    queues: dict[str, PendingQueue] = field(default_factory=dict)
    # Every waiting workload (queued, unqueueable or held).
    workloads: dict[WorkloadKey, WorkloadInfo] = field(default_factory=dict)
    # The ClusterQueue whose queue holds each queued workload; None when unqueueable.
    _placement: dict[WorkloadKey, str | None] = field(default_factory=dict)
    _unqueueable: dict[WorkloadKey, str] = field(default_factory=dict)
    # Reasons not yet handed to the scheduler.
    _unreported: dict[WorkloadKey, str] = field(default_factory=dict)
    _held: set[WorkloadKey] = field(default_factory=set)
    _by_local_queue: dict[LocalQueueKey, set[WorkloadKey]] = field(default_factory=dict)
    # ClusterQueues whose queue changed since the scheduler last looked.
    _dirty: set[str] = field(default_factory=set)
    # Moves on every `retry` (configuration changed): verdicts from before no longer hold.
    epoch: int = 0
    # Kueue's batch period for retrying parked workloads once quota moves (its inadmissible
    # requeuer waits 1 s, coalescing the moves meanwhile); 0: at once. StrictFIFO is not parked.
    retry_period: float = 0.0
    # BestEffortFIFO ClusterQueues whose parked workloads wait for their retry, with since when
    # (None until `release_retries` first sees them).
    _deferred: dict[str, float | None] = field(default_factory=dict)
    # Admission fair sharing (the Configuration's admissionFairSharing); None: off.
    afs: AdmissionFairSharing | None = None
    # ClusterQueues with admissionMode UsageBasedAdmissionFairSharing (ordered by usage when on).
    afs_queues: set[str] = field(default_factory=set)

    # --- queue objects ------------------------------------------------------------------

    def set_cluster_queue(self, name: str, strict_fifo: bool, fair_admission: bool = False) -> None:
        queue = self.queues.setdefault(name, PendingQueue())
        queue.strict_fifo = strict_fifo
        if fair_admission:
            self.afs_queues.add(name)
        else:
            self.afs_queues.discard(name)
        afs = self.afs if fair_admission else None
        if (afs is None) != (queue.score_of is None):
            queue.set_scores(None if afs is None else _score_key(afs), self._local_queue_of)
        self._retry_unqueueable()
        self.retry([name])

    # --- admission fair sharing -----------------------------------------------------------

    def _local_queue_of(self, key: WorkloadKey) -> LocalQueueKey | None:
        info = self.workloads.get(key)
        return None if info is None else (info.namespace, info.queue_name)

    def uses_afs(self, cluster_queue: str) -> bool:
        """Workloads of this ClusterQueue are ordered by their LocalQueues' usage."""
        return self.afs is not None and cluster_queue in self.afs_queues

    def afs_score(self, local_queue: LocalQueueKey) -> float | None:
        """The LocalQueue's score when its ClusterQueue uses admission fair sharing."""
        cq_name = self.local_queues.get(local_queue)
        if self.afs is None or cq_name is None or cq_name not in self.afs_queues:
            return None
        return self.afs.score(local_queue)

    def entry_penalty(
        self, info: WorkloadInfo, cluster_queue: str, usage: Mapping[FlavorResource, int]
    ) -> None:
        """The scheduler admitted `info` with `usage`: its LocalQueue pays the entry penalty now
        (the ClusterQueue's order reads the new score when its next head is taken)."""
        if self.afs is None or cluster_queue not in self.afs_queues:
            return
        self.afs.admitted(info.key, (info.namespace, info.queue_name), to_milli(usage))

    def delete_cluster_queue(self, name: str) -> None:
        """The ClusterQueue is gone or unusable: its members become unqueueable."""
        queue = self.queues.pop(name, None)
        if queue is None:
            return
        for key in queue.ordered_keys():
            info = self.workloads.get(key)
            if info is not None:
                self._unplace(key)
                self._place(info)

    def set_local_queue(
        self, namespace: str, name: str, cluster_queue: str, weight: float = 1.0, stopped: bool = False
    ) -> None:
        lq = (namespace, name)  # stopped: its stopPolicy holds it (its members wait, untried)
        if self.afs is not None:
            self.afs.set_weight(lq, weight)
        if self.local_queues.get(lq) == cluster_queue and (lq in self.stopped_local_queues) == stopped:
            return  # a status write (often our own): its members stay where they are, parked or not
        self.local_queues[lq] = cluster_queue
        (self.stopped_local_queues.add if stopped else self.stopped_local_queues.discard)(lq)
        self._replace_members(lq)

    def delete_local_queue(self, namespace: str, name: str) -> None:
        self.local_queues.pop((namespace, name), None)
        self.stopped_local_queues.discard((namespace, name))
        if self.afs is not None:
            self.afs.forget((namespace, name))
        self._replace_members((namespace, name))

    # --- workloads ----------------------------------------------------------------------

    def add(self, info: WorkloadInfo) -> None:
        """Queue a waiting workload (new, changed, or back from an admission)."""
        self.remove(info.key)
        self.workloads[info.key] = info
        self._place(info)

    def hold(self, info: WorkloadInfo) -> None:
        """A workload waiting out its requeue backoff."""
        key = info.key
        self.remove(key)
        self.workloads[key] = info
        self._held.add(key)
        self._by_local_queue.setdefault((info.namespace, info.queue_name), set()).add(key)

    def remove(self, key: WorkloadKey) -> WorkloadInfo | None:
        """Forget a workload (admitted, finished or deleted); returns what was known of it."""
        self._unplace(key)
        if key in self._held:
            self._held.discard(key)
            self._leave_local_queue(key)
        self._unreported.pop(key, None)
        return self.workloads.pop(key, None)

    def leave(self, key: WorkloadKey) -> WorkloadInfo | None:
        """A waiting workload leaves the queues for good (finished, deleted, held): a StrictFIFO
        queue it was blocking as its head is looked at again."""
        cq_name = self._placement.get(key)
        queue = self.queues.get(cq_name) if cq_name is not None else None
        if cq_name is not None and queue is not None and queue.strict_fifo and queue.is_active(key):
            self._dirty.add(cq_name)
        return self.remove(key)

    def is_held(self, key: WorkloadKey) -> bool:
        return key in self._held

    def quota_freed(self, cluster_queue: str) -> None:
        """Quota came back: every parked workload of that ClusterQueue may fit now."""
        self._wake(cluster_queue)

    def retry(self, names: Iterable[str] | None = None) -> None:
        """Quota, flavors or selectors changed: set-aside workloads get another chance."""
        self.epoch += 1
        for name in self.queues if names is None else names:
            if name in self.queues:
                self._wake(name)

    def _wake(self, name: str) -> None:
        queue = self.queues.get(name)
        if queue is not None and self.retry_period > 0 and not queue.strict_fifo:
            self._deferred.setdefault(name, None)  # stamped by the next `release_retries`
        else:
            self._wake_now(name)

    def _wake_now(self, name: str) -> None:
        queue = self.queues.get(name)
        if queue is not None:
            queue.wake_parked()
        self._dirty.add(name)

    def release_retries(self, now: float) -> float | None:
        """Wake the parked workloads whose retry has waited `retry_period` seconds (retries asked
        for since the last call are stamped `now`); returns when the next one is due."""
        due: float | None = None
        for name, since in list(self._deferred.items()):
            if since is None:
                since = self._deferred[name] = now
            if now - since >= self.retry_period:
                del self._deferred[name]
                if name in self.queues:
                    self._wake_now(name)
            elif due is None or since + self.retry_period < due:
                due = since + self.retry_period
        return due

    # --- for the scheduler --------------------------------------------------------------

    def take_unreported(self) -> list[tuple[WorkloadKey, str]]:
        """Unqueueable workloads whose reason the scheduler has not reported yet."""
        out = list(self._unreported.items())
        self._unreported.clear()
        return out

    def take_dirty(self) -> list[str]:
        """ClusterQueues to schedule, in name order."""
        names = sorted(self._dirty)
        self._dirty.clear()
        return names

    # --- reporting ----------------------------------------------------------------------

    def waiting_in_local_queue(self, namespace: str, name: str) -> int:
        return sum(self.local_queue_pending_counts(namespace, name))

    def local_queue_pending_counts(self, namespace: str, name: str) -> tuple[int, int]:
        """(active, inadmissible) waiting workloads of one LocalQueue: active ones are queued for a
        decision; the others were set aside (did not fit) or wait for their LocalQueue or
        ClusterQueue. One whose requests cannot be charged at all (an unmapped DeviceClass, a
        bad request) is in no queue and not counted, as in Kueue; nor is any of a stopped
        LocalQueue (Kueue takes it out of the queue manager)."""
        active = inadmissible = 0
        if (namespace, name) in self.stopped_local_queues:
            return active, inadmissible
        for key in self._by_local_queue.get((namespace, name), ()):
            info = self.workloads.get(key)
            if info is not None and info.problem is not None:
                continue
            cq_name = self._placement.get(key)
            queue = self.queues.get(cq_name) if cq_name is not None else None
            if queue is not None and queue.is_active(key):
                active += 1
            else:
                inadmissible += 1
        return active, inadmissible

    def pending_counts(self, cluster_queue: str) -> tuple[int, int]:
        """(active, inadmissible) pending workloads of a ClusterQueue."""
        held = 0
        for key in self._held:
            info = self.workloads.get(key)
            if info is not None and self.local_queues.get((info.namespace, info.queue_name)) == cluster_queue:
                held += 1
        queue = self.queues.get(cluster_queue)
        if queue is None:
            return (0, held)
        return (queue.active_count(), queue.inadmissible_count() + held)

    def held(self) -> Iterator[WorkloadKey]:
        return iter(self._held)

    # --- placement ----------------------------------------------------------------------

    def _place(self, info: WorkloadInfo) -> None:
        key = info.key
        self._placement[key] = None
        self._by_local_queue.setdefault((info.namespace, info.queue_name), set()).add(key)
        reason = self._unqueueable_reason(info)
        if reason is not None:
            self._unqueueable[key] = self._unreported[key] = reason
            return
        cq_name = self.local_queues[(info.namespace, info.queue_name)]
        self._unreported.pop(key, None)
        self._placement[key] = cq_name
        self.queues[cq_name].push(
            key, info.priority, info.created, info.uid, (info.namespace, info.queue_name)
        )
        self._dirty.add(cq_name)

    def _unqueueable_reason(self, info: WorkloadInfo) -> str | None:
        if info.problem is not None:
            return info.problem.message
        cq_name = self.local_queues.get((info.namespace, info.queue_name))
        if cq_name is None:
            return f"LocalQueue {info.queue_name} doesn't exist"
        if (info.namespace, info.queue_name) in self.stopped_local_queues:
            return local_queue_inactive(info.queue_name)
        if cq_name not in self.queues:
            return f"ClusterQueue {cq_name} doesn't exist"
        return None

    def _unplace(self, key: WorkloadKey) -> None:
        if key not in self._placement:
            return
        cq_name = self._placement.pop(key)
        self._unqueueable.pop(key, None)
        self._leave_local_queue(key)
        if cq_name is not None:
            queue = self.queues.get(cq_name)
            if queue is not None:
                queue.remove(key)

    def _leave_local_queue(self, key: WorkloadKey) -> None:
        info = self.workloads.get(key)
        if info is None:
            return
        members = self._by_local_queue.get((info.namespace, info.queue_name))
        if members is not None:
            members.discard(key)
            if not members:
                del self._by_local_queue[(info.namespace, info.queue_name)]

    def _retry_unqueueable(self) -> None:
        for key in list(self._unqueueable):
            info = self.workloads.get(key)
            if info is not None and info.problem is None:
                self._unplace(key)
                self._place(info)

    def _replace_members(self, local_queue: LocalQueueKey) -> None:
        for key in list(self._by_local_queue.get(local_queue, ())):
            info = self.workloads.get(key)
            if info is not None and key not in self._held:
                self._unplace(key)
                self._place(info)


def pending_in_order(manager: QueueManager, cluster_queue: str) -> list[WorkloadInfo] | None:
    """A ClusterQueue's pending workloads in queue order, as Kueue's queue snapshot lists them:
    the queued, those set aside (did not fit) and those waiting out a backoff (at their rank);
    not those of a stopped LocalQueue nor those in no queue. None when there is no such queue."""
    queue = manager.queues.get(cluster_queue)
    if queue is None:
        return None
    extra = []
    for key in manager.held():
        info = manager.workloads.get(key)
        if info is None or (info.namespace, info.queue_name) in manager.stopped_local_queues:
            continue
        if manager.local_queues.get((info.namespace, info.queue_name)) == cluster_queue:
            extra.append(QueueEntry(-info.priority, info.created, info.uid, key))
    return [manager.workloads[key] for key in queue.ordered_keys(extra) if key in manager.workloads]


def _score_key(afs: AdmissionFairSharing) -> Callable[[LocalQueueKey], float]:
    """A LocalQueue's score as a pending queue sorts by it."""
    return lambda local_queue: order_key(afs.score(local_queue))


def backoff_seconds(
    requeue_count: int,
    base_seconds: int = 60,
    max_seconds: int = 3600,
    *,
    jitter: float = 0.0001,
    rng: random.Random | None = None,
) -> float:
    """Kueue's requeue backoff: min(base * 2^(n-1), max) * (1 + U * jitter).

    `max_seconds` 0 means no cap, as in Kueue. `requeue_count` < 1 waits 0.
    """
    if requeue_count < 1 or base_seconds <= 0:
        return 0.0
    wait = base_seconds * 2 ** (requeue_count - 1)
    if max_seconds > 0:
        wait = min(wait, max_seconds)
    factor = 1.0 + (rng or random).random() * jitter if jitter > 0 else 1.0
    return float(wait) * factor
