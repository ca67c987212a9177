"""The one feed from API objects to the core's engine.

The controller (`runtime`), `reconciler simulate`, `reconciler explain` and the
benchmarks all turn the same API objects into the same engine state through these
functions: queue objects (ResourceFlavors, ClusterQueues including broken ones,
Cohorts, LocalQueues, Namespaces), compiled Workloads and the device inventory.
Pure like the core (no I/O): it sits right above it, beside the webhooks.
"""

from __future__ import annotations

from .inventory import inventory_index
from .queues import (
    QueueObjects,
    consumed_resources,
    feed_cluster_queue,
    feed_cohort,
    feed_flavor,
    feed_local_queue,
    feed_namespace,
    feed_queue_objects,
    namespace_labels,
)
from .workloads import WorkloadSources, compile_for

__all__ = [
    "QueueObjects",
    "WorkloadSources",
    "compile_for",
    "consumed_resources",
    "feed_cluster_queue",
    "feed_cohort",
    "feed_flavor",
    "feed_local_queue",
    "feed_namespace",
    "feed_queue_objects",
    "inventory_index",
    "namespace_labels",
]
