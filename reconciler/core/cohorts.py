"""Cohort objects (kueue.x-k8s.io/v1beta2 Cohort) compiled into nodes of a cohort tree."""

from __future__ import annotations

from reconciler.api import Cohort

from .capacity import CohortModel
from .clusterqueues import compile_resource_groups

__all__ = ["compile_cohort"]


def compile_cohort(cohort: Cohort) -> CohortModel:
    """Raises InvalidClusterQueueError (naming the field) for a spec that cannot be used."""
    parent = cohort.spec.parent_name or None
    groups = compile_resource_groups(
        cohort.spec.resource_groups, "parentName", parent is not None, is_cohort=True
    )
    return CohortModel(cohort.metadata.name, parent, groups)
