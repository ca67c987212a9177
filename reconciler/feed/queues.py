"""Queue objects into the engine, one object at a time or all at once.

A ClusterQueue or Cohort whose spec the core cannot use does not stop the feed: the
ClusterQueue is set aside as broken with its reason (its workloads wait, Kueue's
"inactive"), the Cohort keeps its place in the tree and lends nothing of its own. The
reason is returned, so each caller decides what to do with it (the controller logs it,
`simulate` refuses the input, `explain` tells it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reconciler.api import ClusterQueue, Cohort, LocalQueue, Namespace, ResourceFlavor
from reconciler.core.engine import Engine
from reconciler.core.model.clusterqueues import InvalidClusterQueueError, compile_cluster_queue
from reconciler.core.primitives.quantity import QuantityError, parse_quantity
from reconciler.core.queueing.stops import is_stopped
from reconciler.core.quota.capacity import CohortModel
from reconciler.core.quota.cohorts import compile_cohort

__all__ = [
    "METADATA_NAME_LABEL",
    "QueueObjects",
    "consumed_resources",
    "feed_cluster_queue",
    "feed_cohort",
    "feed_flavor",
    "feed_local_queue",
    "feed_namespace",
    "feed_queue_objects",
    "local_queue_weight",
    "namespace_labels",
]

# The label the API server sets on every Namespace; selectors may name it.
METADATA_NAME_LABEL = "kubernetes.io/metadata.name"


def namespace_labels(namespace: Namespace) -> dict[str, str]:
    """A Namespace's labels as the namespace selectors see them."""
    return {**namespace.metadata.labels, METADATA_NAME_LABEL: namespace.metadata.name}


def feed_flavor(engine: Engine, name: str, flavor: ResourceFlavor | None) -> None:
    if flavor is None:
        engine.delete_flavor(name)
    else:
        engine.set_flavor(flavor)


def feed_cluster_queue(engine: Engine, name: str, cq: ClusterQueue | None) -> str | None:
    """Set, replace or delete a ClusterQueue; a broken one is set aside: its reason is returned."""
    if cq is None:
        engine.delete_cluster_queue(name)
        return None
    try:
        engine.set_cluster_queue(compile_cluster_queue(cq))
    except (InvalidClusterQueueError, QuantityError) as err:
        engine.set_broken_cluster_queue(name, str(err))
        return str(err)
    return None


def feed_cohort(engine: Engine, name: str, cohort: Cohort | None) -> str | None:
    """Set, replace or delete a Cohort object; one whose quota is unusable keeps only its parent
    (its ClusterQueues keep serving, it lends nothing of its own): the reason is returned."""
    if cohort is None:
        engine.delete_cohort(name)
        return None
    try:
        engine.set_cohort(compile_cohort(cohort))
    except (InvalidClusterQueueError, QuantityError) as err:
        engine.set_cohort(CohortModel(name, cohort.spec.parent_name or None))
        return str(err)
    return None


def local_queue_weight(lq: LocalQueue) -> float:
    """spec.fairSharing.weight of a LocalQueue (admission fair sharing): 1 when absent or not a
    quantity."""
    fair = lq.spec.fair_sharing
    if fair is None or fair.weight is None:
        return 1.0
    try:
        return float(parse_quantity(fair.weight if isinstance(fair.weight, (str, int)) else str(fair.weight)))
    except QuantityError:
        return 1.0


def consumed_resources(lq: LocalQueue) -> dict[str, int] | None:
    """status.fairSharing.admissionFairSharingStatus.consumedResources in milli-units (None when
    the status has none): what admission fair sharing starts from after a restart."""
    fair = lq.status.fair_sharing
    status = fair.admission_fair_sharing_status if fair is not None else None
    if status is None:
        return None
    out: dict[str, int] = {}
    for resource, quantity in status.consumed_resources.items():
        try:
            out[resource] = int(parse_quantity(quantity) * 1000)
        except QuantityError:
            continue
    return out


def feed_local_queue(
    engine: Engine, namespace: str, name: str, lq: LocalQueue | None, now: float = 0.0
) -> None:
    """Set, replace or delete a LocalQueue. With admission fair sharing on, the usage its status
    shows is read back the first time it is seen (a restart), as last updated `now`."""
    if lq is None:
        engine.delete_local_queue(namespace, name)
        return
    stopped = is_stopped(lq.spec.stop_policy)
    engine.set_local_queue(namespace, name, lq.spec.cluster_queue, local_queue_weight(lq), stopped)
    consumed = consumed_resources(lq)
    if consumed is not None:
        engine.afs_seed(namespace, name, consumed, now)


def feed_namespace(engine: Engine, namespace: Namespace | None) -> None:
    """A Namespace's labels for the selectors; a deleted one changes nothing (its workloads go)."""
    if namespace is not None:
        engine.set_namespace(namespace.metadata.name, namespace_labels(namespace))


@dataclass
class QueueObjects:
    """Every queue object of a cluster (or of a set of manifests) at one moment."""

    flavors: Sequence[ResourceFlavor] = ()
    cluster_queues: Sequence[ClusterQueue] = ()
    cohorts: Sequence[Cohort] = ()
    local_queues: Sequence[LocalQueue] = ()
    namespaces: Sequence[Namespace] = ()


def feed_queue_objects(engine: Engine, objects: QueueObjects) -> dict[str, str]:
    """Every queue object into the engine; returns what could not be used ("ClusterQueue NAME" or
    "Cohort NAME") with why."""
    broken: dict[str, str] = {}
    for flavor in objects.flavors:
        feed_flavor(engine, flavor.metadata.name, flavor)
    for cq in objects.cluster_queues:
        reason = feed_cluster_queue(engine, cq.metadata.name, cq)
        if reason is not None:
            broken[f"ClusterQueue {cq.metadata.name}"] = reason
    for cohort in objects.cohorts:
        reason = feed_cohort(engine, cohort.metadata.name, cohort)
        if reason is not None:
            broken[f"Cohort {cohort.metadata.name}"] = reason
    for lq in objects.local_queues:
        feed_local_queue(engine, lq.metadata.namespace, lq.metadata.name, lq)
    for ns in objects.namespaces:
        feed_namespace(engine, ns)
    return broken
