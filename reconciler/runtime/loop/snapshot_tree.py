"""The parts of a scrape's snapshot about the cohort tree and what is pending: each ClusterQueue's
place in its tree and its pending requests, and each cohort's subtree figures. Quantities in base
units (cpu in cores), as in snapshot.py."""

from __future__ import annotations

from reconciler.core.engine import Engine
from reconciler.core.primitives.quantity import CPU
from reconciler.core.quota.capacity import CohortTree
from reconciler.observability.metrics import CohortTreeSample

__all__ = ["cohort_tree_samples", "pending_requests", "tree_place"]

FlavorResource = tuple[str, str]


def _units(resource: str, amount: int) -> float:
    return amount / 1000 if resource == CPU else float(amount)


def _cohort_in_cycle(tree: CohortTree, cohort: str) -> bool:
    path = tree.ancestors(("cohort", cohort))
    return tree.parent(("cohort", path[-1] if path else cohort)) is not None


def tree_place(engine: Engine, cluster_queue: str) -> tuple[str, str]:
    """(parent cohort, root cohort) of a ClusterQueue; both "" without a cohort or in a cycle."""
    tree = engine.cache.capacity
    path = tree.ancestors(("cq", cluster_queue))
    if not path or tree.in_cycle(cluster_queue):
        return "", ""
    return path[0], path[-1]


def pending_requests(engine: Engine) -> dict[str, dict[str, float]]:
    """ClusterQueue -> resource -> what its queued Workloads request in total, seeded with 0 for
    each resource it has quota for. Workloads in no queue (a problem with their requests, a
    missing or stopped LocalQueue) are not counted, as Kueue keeps them out of its queues."""
    out: dict[str, dict[str, float]] = {}
    for name, model in engine.cache.cluster_queues.items():
        out[name] = {resource: 0.0 for group in model.groups for resource in group.covered}
    queues = engine.queues
    for info in queues.workloads.values():
        local_queue = (info.namespace, info.queue_name)
        cq = queues.local_queues.get(local_queue)
        if info.problem is not None or cq is None or local_queue in queues.stopped_local_queues:
            continue
        row = out.get(cq)
        if row is None or cq not in queues.queues:
            continue
        for _name, amounts in info.total_requests():
            for resource, amount in amounts.items():
                row[resource] = row.get(resource, 0.0) + _units(resource, amount)
    return out


def _flavor_resources(engine: Engine) -> set[FlavorResource]:
    cache = engine.cache
    groups = [
        *(g for model in cache.cluster_queues.values() for g in model.groups),
        *(g for cohort in cache.cohort_models.values() for g in cohort.groups),
    ]
    return {
        (quota.name, resource) for group in groups for quota in group.flavors for resource in group.covered
    }


def cohort_tree_samples(engine: Engine) -> list[CohortTreeSample]:
    tree = engine.cache.capacity
    ledger = engine.ledger
    frs = _flavor_resources(engine)
    out = []
    # Cohorts named as a parent only are in the tree too (implicit, as in Kueue).
    parents = {m.parent for m in engine.cache.cohort_models.values() if m.parent is not None}
    for name in sorted(parents | set(engine.cohort_names())):
        if _cohort_in_cycle(tree, name):
            continue
        path = tree.ancestors(("cohort", name))
        members = tree.subtree_cluster_queues(name)
        reserved: dict[FlavorResource, float] = {}
        for cq in members:
            for (flavor, resource), amount in ledger.usage(cq).items():
                reserved[(flavor, resource)] = reserved.get((flavor, resource), 0.0) + _units(
                    resource, amount
                )
        quota = {fr: _units(fr[1], tree.stats(("cohort", name), fr)[0]) for fr in sorted(frs)}
        out.append(
            CohortTreeSample(
                name,
                parent=path[0] if path else "",
                root=path[-1] if path else name,
                subtree_quota=quota,
                subtree_reserved=reserved,
                admitted_active=sum(ledger.holder_count(cq) for cq in members),
            )
        )
    return out
