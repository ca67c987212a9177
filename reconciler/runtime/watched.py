"""The one table of watched kinds: what the controller lists and watches, decoded how, handled where.

The informers (controller.py), the reconciler's event dispatch (reconciler.py) and the RBAC
check (tests/test_rbac.py: list and watch for each row) are all derived from `WATCHED_KINDS`;
a kind added here is watched, dispatched and granted, or a test says which part is missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reconciler.api import (
    ClusterQueue,
    Cohort,
    DeviceClass,
    Job,
    LocalQueue,
    Namespace,
    Pod,
    PriorityClass,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceFlavor,
    Workload,
    WorkloadPriorityClass,
)
from reconciler.api.resources import (
    CLUSTER_QUEUES,
    COHORTS,
    DEVICE_CLASSES,
    JOBS,
    LOCAL_QUEUES,
    NAMESPACES,
    NODES,
    PODS,
    PRIORITY_CLASSES,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_FLAVORS,
    RESOURCE_SLICES,
    WORKLOAD_PRIORITY_CLASSES,
    WORKLOADS,
    Resource,
)
from reconciler.api.slices import Node, ResourceSlice
from reconciler.core.jobs import PODSET_LABEL

__all__ = ["WATCHED_KINDS", "Watched", "watched_kinds"]


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


WATCHED_KINDS: tuple[Watched, ...] = (
    Watched(JOBS, Job, "_on_job"),
    Watched(WORKLOADS, Workload, "_on_workload"),
    Watched(RESOURCE_CLAIM_TEMPLATES, ResourceClaimTemplate, "_on_template"),
    Watched(CLUSTER_QUEUES, ClusterQueue, "_on_cluster_queue"),
    Watched(COHORTS, Cohort, "_on_cohort"),
    Watched(LOCAL_QUEUES, LocalQueue, "_on_local_queue"),
    Watched(RESOURCE_FLAVORS, ResourceFlavor, "_on_flavor"),
    Watched(NAMESPACES, Namespace, "_on_namespace"),
    # Only the pods of Jobs this controller started carry the pod set label.
    Watched(PODS, Pod, "_on_pod", label_selector=PODSET_LABEL),
    Watched(RESOURCE_CLAIMS, ResourceClaim, "_on_claim"),
    Watched(WORKLOAD_PRIORITY_CLASSES, WorkloadPriorityClass, "_on_workload_priority_class"),
    Watched(PRIORITY_CLASSES, PriorityClass, "_on_priority_class"),
    # Watched too with deviceInventory.mode Report or Enforce.
    Watched(DEVICE_CLASSES, DeviceClass, "inventory.device_class", inventory=True),
    Watched(RESOURCE_SLICES, ResourceSlice, "inventory.resource_slice", inventory=True),
    Watched(NODES, Node, "inventory.node", inventory=True),
)


def watched_kinds(inventory_on: bool) -> tuple[Watched, ...]:
    """The rows a controller watches: all of them with the device inventory on."""
    return tuple(row for row in WATCHED_KINDS if inventory_on or not row.inventory)
