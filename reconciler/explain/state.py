"""What `reconciler explain` reads: the asked-for object and the live objects around it, as data.

`fetch.py` fills a `ClusterState` from the API server; `analyze.explain` reads
nothing else, so the tests build one from plain objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from reconciler.api import (
    ClusterQueue,
    Cohort,
    DeviceClass,
    Job,
    LocalQueue,
    Namespace,
    ObjectMeta,
    Pod,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceFlavor,
    Workload,
)
from reconciler.api.meta import ApiStruct
from reconciler.api.slices import Node, ResourceSlice
from reconciler.core.queueing.admission_fair_sharing import AfsSettings
from reconciler.integrations import REGISTRATIONS, Integration

__all__ = [
    "ClusterState",
    "Event",
    "ObjectReference",
    "OtherJob",
    "PodsReadyClock",
    "Target",
    "TargetError",
    "explainable",
]

# The two kinds explain always takes; every registered kind is taken by its lowercase Kind too.
JOB, WORKLOAD = "job", "workload"


class TargetError(ValueError):
    """A target that cannot be explained as given; the message says what to give instead."""


def explainable() -> dict[str, Integration]:
    """Registered kinds explain takes by name (lowercase Kind), besides `job` and `workload`."""
    integrations = [r.integration for r in REGISTRATIONS.values() if r.integration is not None]
    return {i.kind.lower(): i for i in integrations if i.kind.lower() not in (JOB, WORKLOAD)}


@dataclass(frozen=True, slots=True)
class Target:
    kind: str  # "job", "workload" or a registered kind's lowercase Kind ("rayjob")
    namespace: str
    name: str
    display: str = ""  # the Kind as the API spells it ("RayJob")

    @classmethod
    def parse(cls, kind: str, ref: str) -> Target:
        """`job`, `workload` or a registered kind, and `NAMESPACE/NAME`."""
        others = explainable()
        kind = kind.lower()
        if kind not in (JOB, WORKLOAD) and kind not in others:
            names = ", ".join([JOB, WORKLOAD, *sorted(others)])
            raise TargetError(f"{kind!r}: explain one of {names}")
        integration = others.get(kind)
        if integration is not None and integration.jobs_from_pods:
            raise TargetError(
                f"{kind!r}: a {integration.kind}'s pods are grouped into Workloads of their own: explain "
                "one of them with `reconciler explain workload NAMESPACE/NAME` (`kubectl get workloads -n "
                "NAMESPACE` lists them)"
            )
        namespace, slash, name = ref.partition("/")
        if not (slash and namespace and name) or "/" in name:
            raise TargetError(f"{ref!r}: give NAMESPACE/NAME, e.g. p3-dra-demo/kueue-dra-pending-b")
        display = {JOB: "Job", WORKLOAD: "Workload"}.get(kind) or (integration.kind if integration else kind)
        return cls(kind, namespace, name, display)

    def __str__(self) -> str:
        display = self.display or {JOB: "Job", WORKLOAD: "Workload"}.get(self.kind, self.kind)
        return f"{display} {self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class OtherJob:
    """The asked-for job (or the asked-for Workload's owner) of a registered kind other than
    batch/v1 Job: its metadata, its decoded object and the integration that reads it."""

    integration: Integration
    meta: ObjectMeta
    obj: Any

    def __str__(self) -> str:
        return f"{self.integration.kind} {self.meta.namespace}/{self.meta.name}"


class ObjectReference(ApiStruct):
    kind: str = ""
    name: str = ""
    namespace: str = ""


class Event(ApiStruct, kw_only=True):
    """core/v1 Event, the fields a user reads in `kubectl describe`."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    involved_object: ObjectReference = msgspec.field(default_factory=ObjectReference)
    type: str = ""
    reason: str = ""
    message: str = ""
    count: int | None = None
    last_timestamp: str | None = None
    event_time: str | None = None

    def when(self) -> str:
        return self.last_timestamp or self.event_time or self.metadata.creation_timestamp or ""


@dataclass(frozen=True, slots=True)
class PodsReadyClock:
    """waitForPodsReady's timeouts, from the controller's Configuration (--config)."""

    timeout_seconds: float
    recovery_timeout_seconds: float | None = None


@dataclass
class ClusterState:
    """The live objects an explanation is made of (all namespaces unless noted)."""

    target: Target
    now: str  # RFC 3339
    job: Job | None = None  # the Job asked for, or the asked-for Workload's owner
    other: OtherJob | None = None  # the same for a job of another registered kind
    workload: Workload | None = None  # the asked-for Workload, or the Job's
    workloads: list[Workload] = field(default_factory=list)
    cluster_queues: list[ClusterQueue] = field(default_factory=list)
    cohorts: list[Cohort] = field(default_factory=list)  # Cohort objects (hierarchical cohorts)
    local_queues: list[LocalQueue] = field(default_factory=list)
    flavors: list[ResourceFlavor] = field(default_factory=list)
    namespaces: list[Namespace] = field(default_factory=list)
    templates: list[ResourceClaimTemplate] = field(default_factory=list)
    device_classes: list[DeviceClass] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)  # the job's pods
    claims: list[ResourceClaim] = field(default_factory=list)  # the target's namespace
    # What the DRA drivers publish (sizes allocationMode All and device capacities per flavor).
    resource_slices: list[ResourceSlice] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)  # Warnings in the target's namespace
    # Kinds that could not be read, with why ("ResourceFlavors: forbidden").
    unreadable: list[str] = field(default_factory=list)
    # From the controller's Configuration when given (--config); otherwise learned from what the
    # controller charged (see mappings.py).
    mappings: Mapping[str, str] | None = None
    # From the Configuration too: the device capacities mappings charge, and whether the device
    # inventory is on (None: not known; then charges the flavor decides are sized when they can be).
    capacities: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    inventory_on: bool | None = None
    # featureGates.KueueDRAIntegrationExtendedResource: extended resources a DeviceClass serves are
    # charged through it (from the DeviceClasses read).
    extended_resources: bool = False
    pods_ready: PodsReadyClock | None = None
    # admissionFairSharing from the Configuration: the queue order then reads the LocalQueues'
    # consumedResources as the controller does after a restart.
    afs: AfsSettings | None = None
    # fairSharing's preemption strategies (None: cohort fair sharing off), for the tournament and
    # preemption as the controller runs them.
    fair_sharing: tuple[str, ...] | None = None
