"""The one table of watched kinds: what the controller lists and watches, decoded how, handled where.

The informers (controller.py), the reconciler's event dispatch (reconciler.py) and the RBAC
check (tests/project/test_rbac.py: list and watch for each row) are all derived from this table;
a kind added here is watched, dispatched and granted, or a test says which part is missing.
The jobs' rows come from the integrations `integrations.frameworks` enables (one row each,
handled by `_on_job` with the row's kind); `WATCHED_KINDS` is the table of the default
Configuration.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.api import (
    ClusterQueue,
    Cohort,
    DeviceClass,
    LocalQueue,
    Namespace,
    Pod,
    PriorityClass,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceFlavor,
    Topology,
    Workload,
    WorkloadPriorityClass,
)
from reconciler.api.pods import ManagedPod
from reconciler.api.resources import (
    CLUSTER_QUEUES,
    COHORTS,
    DEVICE_CLASSES,
    LOCAL_QUEUES,
    NAMESPACES,
    NODES,
    PODS,
    PRIORITY_CLASSES,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_FLAVORS,
    RESOURCE_SLICES,
    TOPOLOGIES,
    WORKLOAD_PRIORITY_CLASSES,
    WORKLOADS,
    Resource,
)
from reconciler.api.slices import Node, ResourceSlice
from reconciler.config import Configuration
from reconciler.integrations import Integration, enabled, references_of

__all__ = [
    "DEFAULT_INTEGRATIONS",
    "JOB_HANDLER",
    "KIND_BOUND_HANDLERS",
    "LWS_HANDLER",
    "POD_JOBS_HANDLER",
    "REFERENCE_HANDLERS",
    "WATCHED_KINDS",
    "Watched",
    "job_rows",
    "watched_kinds",
]

# The handler of every integration's row; it is given the row's kind.
JOB_HANDLER = "_on_job"
# The handlers of the kinds jobs reference (a TrainJob's runtimes), one attribute per plural.
REFERENCE_HANDLERS = "job_kinds.references"
# A kind whose jobs are groups made from its objects and their pods (bound to the row's kind).
LWS_HANDLER = "lws_groups.on_set"
# The handlers given the row's kind.
KIND_BOUND_HANDLERS = (JOB_HANDLER, LWS_HANDLER)


@dataclass(frozen=True, slots=True)
class Watched:
    """One watched kind: its API resource (kind and paths), the type its objects decode into
    (the projection), the Reconciler attribute that handles its events (a dotted path, e.g.
    `inventory.node`), whether it is watched only with the device inventory on, and the label
    selector its list and watch carry."""

    resource: Resource
    projection: type[Any]
    handler: str
    inventory: bool = False
    label_selector: str | None = None
    # A job kind of an integration: its CRD may not be installed (then none are seen, the rest
    # of the controller keeps working, and it is looked for again).
    optional: bool = False


# With the plain-pod or the LeaderWorkerSet integration on, pods are watched once, all of them:
# its pods (labelled managed, or by their set) and the pods of started jobs (labelled with their
# pod set) cannot share a selector.
POD_JOBS_HANDLER = "_on_pod_or_job"


def job_rows(integrations: Sequence[Integration]) -> tuple[Watched, ...]:
    """One row per enabled integration: its resource, its projection, the job handler (the
    plain-pod integration's pods come through the pods row, see `watched_kinds`); then one per
    kind the integrations' jobs reference (a TrainJob's runtimes), kept for their `resolve`."""
    jobs = tuple(
        Watched(i.resource, i.projection, LWS_HANDLER if i.jobs_from_pods else JOB_HANDLER, optional=True)
        for i in integrations
        if i.resource != PODS
    )
    referenced = {r.resource: r for i in integrations for r in references_of(i)}
    return jobs + tuple(
        Watched(r.resource, r.projection, f"{REFERENCE_HANDLERS}.{r.resource.plural}", optional=True)
        for r in referenced.values()
    )


# The integrations of the default Configuration (integrations.frameworks: batch/job).
DEFAULT_INTEGRATIONS: tuple[Integration, ...] = tuple(enabled(Configuration().frameworks))

_OTHER_KINDS: tuple[Watched, ...] = (
    Watched(WORKLOADS, Workload, "_on_workload"),
    Watched(RESOURCE_CLAIM_TEMPLATES, ResourceClaimTemplate, "_on_template"),
    Watched(CLUSTER_QUEUES, ClusterQueue, "_on_cluster_queue"),
    Watched(COHORTS, Cohort, "_on_cohort"),
    Watched(LOCAL_QUEUES, LocalQueue, "_on_local_queue"),
    Watched(RESOURCE_FLAVORS, ResourceFlavor, "_on_flavor"),
    Watched(NAMESPACES, Namespace, "_on_namespace"),
    # Every pod: what those bound to nodes request is taken off the nodes' free capacity
    # (topology-aware scheduling); those of started jobs (the pod set label) are indexed too.
    Watched(PODS, Pod, "_on_any_pod"),
    Watched(RESOURCE_CLAIMS, ResourceClaim, "_on_claim"),
    Watched(WORKLOAD_PRIORITY_CLASSES, WorkloadPriorityClass, "_on_workload_priority_class"),
    Watched(PRIORITY_CLASSES, PriorityClass, "_on_priority_class"),
    # Nodes and Topologies: topology-aware scheduling (the nodes' labels: the inventory's too).
    Watched(NODES, Node, "_on_node"),
    Watched(TOPOLOGIES, Topology, "topology.topology", optional=True),
    # Watched too with deviceInventory.mode Report or Enforce (DeviceClasses also with Kueue's gate
    # KueueDRAIntegrationExtendedResource: they say which class serves an extended resource).
    Watched(DEVICE_CLASSES, DeviceClass, "inventory.device_class", inventory=True),
    Watched(RESOURCE_SLICES, ResourceSlice, "inventory.resource_slice", inventory=True),
)


WATCHED_KINDS: tuple[Watched, ...] = job_rows(DEFAULT_INTEGRATIONS) + _OTHER_KINDS


def watched_kinds(
    inventory_on: bool,
    integrations: Sequence[Integration] = DEFAULT_INTEGRATIONS,
    *,
    device_classes: bool = False,
) -> tuple[Watched, ...]:
    """The rows a controller watches: its integrations' jobs and the other kinds, the device
    inventory's too when it is on, and DeviceClasses when `device_classes` (extended resources
    charged through them)."""
    rows = job_rows(integrations) + _OTHER_KINDS
    # Such a kind's pods are seen from their creation (gated, without a pod set label).
    if any(i.resource == PODS or i.jobs_from_pods for i in integrations):
        combined = Watched(PODS, ManagedPod, POD_JOBS_HANDLER)
        rows = tuple(combined if row.resource == PODS else row for row in rows)
    return tuple(
        row
        for row in rows
        if inventory_on or not row.inventory or (device_classes and row.resource == DEVICE_CLASSES)
    )
