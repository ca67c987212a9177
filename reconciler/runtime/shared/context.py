"""What the reconciler's concerns share: state, clocks, the write path and the dirty marks.

Concerns (workloads, jobs, PodsReady, queue status) never call each other:
each marks keys dirty here, and the reconciler's loop processes the marks in
a fixed order. Every write goes through `Context.write`, which records it in
the own-write tracker of its kind and calls the action's completion handler
when the result comes back.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import structlog

from reconciler.api import Workload
from reconciler.api.resources import WORKLOADS
from reconciler.api.times import now_rfc3339
from reconciler.config import Configuration
from reconciler.core.devices.dra_extended import ExtendedResources
from reconciler.core.devices.inventory import DeviceInventory
from reconciler.core.engine import Engine
from reconciler.core.eviction_status import released_after_eviction
from reconciler.core.queueing.admission_fair_sharing import AfsSettings
from reconciler.integrations import Integration
from reconciler.kube import Conflict, NamespaceTerminating, NotFound
from reconciler.observability.metrics import Metrics
from reconciler.runtime.shared.actions import Action, PostEvent, WriteDone
from reconciler.runtime.shared.events import EventRecorder
from reconciler.runtime.shared.own_writes import OwnWrites
from reconciler.runtime.shared.podindex import PodIndex
from reconciler.runtime.shared.store import JobRef, Key, Store
from reconciler.runtime.shared.timers import Timers

__all__ = ["Context", "Dirty", "ReconcilerStats"]

log = structlog.get_logger(__name__)

# How long events older than our own write are ignored; past it, the watch is the truth.
AWAIT_OWN_WRITE_SECONDS = 5.0


@dataclass
class ReconcilerStats:
    admitted: int = 0
    admission_conflicts: int = 0
    write_errors: int = 0


@dataclass
class Dirty:
    """Keys to process on the next pass, by concern."""

    # Workload key -> whether the cache holds our own write's response (decide on it at once).
    workloads: dict[Key, bool] = field(default_factory=dict)
    # Jobs (of any integration) to reconcile.
    jobs: set[JobRef] = field(default_factory=set)
    # Workloads whose PodsReady tracking (deadline, blockAdmission) must be looked at again.
    pods_ready: set[Key] = field(default_factory=set)
    # Jobs whose pods or claims changed.
    pods: set[JobRef] = field(default_factory=set)
    queue_status: bool = True

    def workload(self, key: Key, *, own_write: bool = False) -> None:
        self.workloads[key] = self.workloads.get(key, False) or own_write

    def pending(self) -> bool:
        return bool(self.workloads or self.jobs or self.pods_ready or self.pods)


@dataclass
class Context:
    config: Configuration
    submit: Callable[[Action], None]
    events: EventRecorder
    clock: Callable[[], str] = now_rfc3339
    monotonic: Callable[[], float] = time.monotonic
    # Seconds since the epoch, for deadlines read from condition timestamps.
    wall: Callable[[], float] = time.time
    engine: Engine = field(default_factory=Engine)
    store: Store = field(default_factory=Store)
    dirty: Dirty = field(default_factory=Dirty)
    timers: Timers[Key] = field(default_factory=Timers)
    pod_index: PodIndex = field(default_factory=PodIndex)
    metrics: Metrics = field(default_factory=Metrics)
    stats: ReconcilerStats = field(default_factory=ReconcilerStats)
    # The latest device inventory (deviceInventory.mode Report or Enforce), None before the first count.
    device_inventory: DeviceInventory | None = None
    # With featureGates.KueueDRAIntegrationExtendedResource: which DeviceClass serves each extended
    # resource (spec.extendedResourceName and the implicit names), from the DeviceClasses watched.
    extended_resources: ExtendedResources = field(default_factory=ExtendedResources)
    # The integrations integrations.frameworks enables (the kinds of jobs managed).
    integrations: Sequence[Integration] = ()
    workload_writes: OwnWrites[Key] = field(init=False)
    # Our own writes to jobs, one tracker per kind.
    kind_writes: dict[str, OwnWrites[Key]] = field(init=False)
    _by_plural: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        afs = self.config.admission_fair_sharing
        if afs is not None:
            settings = AfsSettings(
                afs.usage_half_life_seconds, afs.usage_sampling_seconds, afs.resource_weights
            )
            self.engine.enable_admission_fair_sharing(settings)
        self.workload_writes = OwnWrites(self.monotonic)
        self.kind_writes = {i.kind: OwnWrites(self.monotonic) for i in self.integrations}
        self._by_plural = {i.resource.plural: i.kind for i in self.integrations}
        self.store.integrations = {i.kind: i for i in self.integrations}
        self.pod_index.kinds = frozenset(i.kind for i in self.integrations)
        self.events.kinds.update({i.projection: (i.api_version, i.kind) for i in self.integrations})
        self.store.on_workload = self._workload_stored

    def _workload_stored(self, previous: Workload | None, current: Workload) -> None:
        released = released_after_eviction(previous, current)
        if released is not None:
            self.metrics.eviction_released(*released)

    # --- the write path -----------------------------------------------------------------

    def write(self, action: Action) -> None:
        """Submit a write; it is tracked as in flight until `completed` has run its handler."""
        tracker = self._tracker(action)
        if tracker is not None:
            tracker.begin((action.namespace or "", getattr(action, "name", "")), action.purpose)
        self.submit(action)

    def completed(self, done: WriteDone) -> None:
        """A write came back: its action's handler runs, then it no longer counts as in flight."""
        action = done.action
        try:
            if action.on_done is not None:
                action.on_done(done)
        finally:
            tracker = self._tracker(action)
            if tracker is not None:
                tracker.end(done.key, action.purpose)

    def _tracker(self, action: Action) -> OwnWrites[Key] | None:
        if isinstance(action, PostEvent):
            return None
        plural = action.resource.plural
        if plural == WORKLOADS.plural:
            return self.workload_writes
        kind = self._by_plural.get(plural)
        return None if kind is None else self.kind_writes[kind]

    def tracks_pods_ready(self, key: Key) -> bool:
        """waitForPodsReady applies to this Workload: it is on, and a job owns the Workload
        (as in Kueue, whose job reconciler writes PodsReady; a bare Workload has no pods)."""
        return self.config.wait_for_pods_ready is not None and self.store.owner(key) is not None

    def apply_workload_write(self, key: Key, body: bytes, *, until_seen: bool = False) -> Workload | None:
        """Our write's response is the newest state: apply it now (None when the watch got there first)."""
        workload = msgspec.json.decode(body, type=Workload)
        rv = workload.metadata.resource_version
        if self.workload_writes.response_is_stale(key, rv):
            return None
        previous = self.store.put_workload(key, workload)
        # An admission or eviction is awaited until its own event: an older event must never
        # make it look as if the quota were held by nobody (or by two).
        self.workload_writes.applied(
            key,
            rv,
            changed=previous is None or previous.metadata.resource_version != rv,
            for_seconds=math.inf if until_seen else AWAIT_OWN_WRITE_SECONDS,
        )
        return workload

    def apply_job_write(self, key: Key, body: bytes, integration: Integration) -> Any | None:
        """Our write's response is the job's newest state: apply it (None when it is stale)."""
        job = msgspec.json.decode(body, type=integration.projection)
        rv = job.metadata.resource_version
        writes = self.kind_writes[integration.kind]
        if writes.response_is_stale(key, rv):
            return None
        previous = self.store.put_job(key, job, integration.kind)
        writes.applied(key, rv, changed=previous is None or previous.metadata.resource_version != rv)
        return job

    def write_failed(self, done: WriteDone, *, expected: tuple[type[Exception], ...] = ()) -> None:
        """Count and log a failed write, unless its error is one the caller expects (e.g. 404, 409)."""
        if done.error is None or isinstance(done.error, expected):
            return
        action = done.action
        if isinstance(done.error, NamespaceTerminating):
            # The namespace's objects (the job too) are being deleted: nothing to create or fix.
            log.debug(
                "write skipped: namespace is being deleted",
                purpose=action.purpose,
                namespace=getattr(action, "namespace", ""),
            )
            return
        self.stats.write_errors += 1
        log.warning(
            "write failed",
            purpose=action.purpose,
            object=f"{getattr(action, 'namespace', '')}/{getattr(action, 'name', '')}",
            error=str(done.error),
        )


EXPECTED_MISSES: tuple[type[Exception], ...] = (NotFound, Conflict)
