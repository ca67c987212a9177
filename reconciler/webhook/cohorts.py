"""Cohorts at the door: Kueue's validation of a Cohort's quotas, limits and fair-sharing weight.

A Cohort is held to the ClusterQueue's resource-group rules (:mod:`.clusterqueues`), with two
differences Kueue makes: a limit needs a parent Cohort (``spec.parentName``; the words are "must be
nil when parent is empty"), and a lending limit may exceed the Cohort's own nominal quota (it
lends what its subtree holds). Its fair-sharing weight is checked as a ClusterQueue's. An update
is judged as a creation: nothing of a Cohort is immutable.
"""

from __future__ import annotations

from reconciler.admission.fielderrors import FieldError, Path
from reconciler.api import Cohort

from .clusterqueues import LimitRules, validate_fair_sharing, validate_resource_groups

__all__ = ["validate_cohort"]

_SPEC = Path("spec")


def validate_cohort(cohort: Cohort) -> list[FieldError]:
    spec = cohort.spec
    config = LimitRules(has_parent=bool(spec.parent_name), parent_word="parent", lending_within_nominal=False)
    errors = validate_fair_sharing(spec.fair_sharing, _SPEC.child("fairSharing"))
    errors += validate_resource_groups(spec.resource_groups, config, _SPEC.child("resourceGroups"))
    return errors
