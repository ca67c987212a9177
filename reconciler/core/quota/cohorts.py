"""Cohort objects (kueue.x-k8s.io/v1beta2 Cohort) compiled into nodes of a cohort tree,
and the cycles their parents can form."""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.api import Cohort

from ..model.clusterqueues import compile_resource_groups, fair_weight
from .capacity import CohortModel, CohortTree

__all__ = ["HAS_CYCLE", "cohort_cycle", "compile_cohort", "cycle_message"]

# The reason of a ClusterQueue's Active=False under a cohort cycle: the name Kueue's cache
# gives such a ClusterQueue when it leaves it out of a scheduling snapshot.
HAS_CYCLE = "HasCycle"


def compile_cohort(cohort: Cohort) -> CohortModel:
    """Raises InvalidClusterQueueError (naming the field) for a spec that cannot be used."""
    parent = cohort.spec.parent_name or None
    groups = compile_resource_groups(
        cohort.spec.resource_groups, "parentName", parent is not None, is_cohort=True
    )
    return CohortModel(cohort.metadata.name, parent, groups, fair_weight(cohort.spec.fair_sharing))


def cohort_cycle(tree: CohortTree, cluster_queue: str) -> list[str] | None:
    """The cycle above a ClusterQueue as a closed walk (`["a", "b", "a"]`), else None.

    The walk starts at the first cohort of the cycle met going up from the ClusterQueue,
    so every ClusterQueue under one cycle from the same side names it the same way.
    """
    path = tree.ancestors(("cq", cluster_queue))
    if not path:
        return None
    closing = tree.parent(("cohort", path[-1]))
    if closing is None:
        return None
    return [*path[path.index(closing) :], closing]


def cycle_message(cycle: Sequence[str]) -> str:
    """`cohort has a cycle: a -> b -> a` (Kueue's error text, with the cohorts named)."""
    return "cohort has a cycle: " + " -> ".join(cycle)
