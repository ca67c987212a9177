"""ClusterQueues at the door: Kueue's validation of quotas, limits and resource groups.

Kueue's rules and words: resource names are label keys, each resource is covered by one
group, a flavor appears once, each flavor's resources follow ``coveredResources`` in order,
quantities are not negative, ``borrowingLimit`` and ``lendingLimit`` need a cohort and the lending
limit stays within the nominal quota, and there are at most 256 flavors, 256 covered resources and
512 flavor-resource pairs per group; a fair-sharing weight is not negative, and when not 0 above
10e-9. The resource-group and weight checks are shared with Cohorts (:mod:`.cohorts`). A spec that
passes is also compiled as the controller compiles it
(:func:`reconciler.core.model.clusterqueues.compile_cluster_queue`), so nothing the webhook lets in
turns the ClusterQueue inactive later.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from reconciler.admission.fielderrors import FieldError, Path, duplicate, invalid, not_supported
from reconciler.admission.names import label_selector, non_negative_quantity, qualified_name
from reconciler.api import ClusterQueue, FairSharing, ResourceGroup, ResourceQuota
from reconciler.core.model.clusterqueues import InvalidClusterQueueError, compile_cluster_queue
from reconciler.core.primitives.quantity import QuantityError, parse_quantity

__all__ = [
    "LimitRules",
    "validate_cluster_queue",
    "validate_cluster_queue_update",
    "validate_fair_sharing",
    "validate_resource_groups",
]

MAX_FLAVORS = 256
MAX_COVERED_RESOURCES = 256
MAX_FLAVOR_RESOURCES_PER_GROUP = 512
LENDING_ABOVE_NOMINAL = "must be less than or equal to the nominalQuota"
# spec.admissionScope.admissionMode, Kueue's CRD enum.
ADMISSION_MODES = ("UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing")
WEIGHT_TOO_SMALL = "When not 0, weight must be > 10e-9"
TINY_WEIGHT = Fraction(1, 10**9)
_SPEC = Path("spec")


@dataclass(frozen=True)
class LimitRules:
    """How limits are judged: a ClusterQueue's parent is its cohort and its lending limit stays
    within its nominal quota; a Cohort's parent is its parentName, with no such bound."""

    has_parent: bool
    parent_word: str
    lending_within_nominal: bool


def _limits(quota: ResourceQuota, config: LimitRules, path: Path) -> list[FieldError]:
    """Kueue's order: a borrowing limit's missing parent before its quantity, a lending limit's
    quantity first, then its missing parent, then whether it stays within the nominal quota."""
    errors: list[FieldError] = []
    missing = f"must be nil when {config.parent_word} is empty"
    if quota.borrowing_limit is not None:
        where = path.child("borrowingLimit")
        if not config.has_parent:
            errors.append(invalid(where, str(quota.borrowing_limit), missing))
        errors += non_negative_quantity(where, quota.borrowing_limit)
    if quota.lending_limit is None:
        return errors
    where = path.child("lendingLimit")
    errors += non_negative_quantity(where, quota.lending_limit)
    if not config.has_parent:
        errors.append(invalid(where, str(quota.lending_limit), missing))
    if config.lending_within_nominal:
        try:
            above = parse_quantity(quota.lending_limit) > parse_quantity(quota.nominal_quota)
        except QuantityError:
            above = False  # reported on its own field
        if above:
            errors.append(invalid(where, str(quota.lending_limit), LENDING_ABOVE_NOMINAL))
    return errors


def _group(group: ResourceGroup, path: Path, config: LimitRules, seen: set[str]) -> list[FieldError]:
    errors: list[FieldError] = []
    for j, name in enumerate(group.covered_resources):
        where = path.child("coveredResources").item(j)
        errors += qualified_name(where, name)
        if name in seen:
            errors.append(duplicate(where, name))
        seen.add(name)
    for j, flavor in enumerate(group.flavors):
        fpath = path.child("flavors").item(j)
        for k, quota in enumerate(flavor.resources[: len(group.covered_resources)]):
            rpath = fpath.child("resources").item(k)
            if quota.name != group.covered_resources[k]:
                errors.append(
                    invalid(rpath.child("name"), quota.name, "must match the name in coveredResources")
                )
            errors += non_negative_quantity(rpath.child("nominalQuota"), quota.nominal_quota)
            errors += _limits(quota, config, rpath)
    return errors


def validate_resource_groups(groups: list[ResourceGroup], config: LimitRules, path: Path) -> list[FieldError]:
    """Kueue's resource-group checks, shared by ClusterQueues and Cohorts: resource names, each
    resource and flavor once, non-negative quantities, and limits only under a parent."""
    errors: list[FieldError] = []
    covered: set[str] = set()
    flavors: set[str] = set()
    for i, group in enumerate(groups):
        errors += _group(group, path.item(i), config, covered)
        for j, flavor in enumerate(group.flavors):
            if flavor.name in flavors:
                errors.append(duplicate(path.item(i).child("flavors").item(j).child("name"), flavor.name))
            flavors.add(flavor.name)
    return errors


def validate_fair_sharing(fair_sharing: FairSharing | None, path: Path) -> list[FieldError]:
    """A fair-sharing weight is not negative, and when not 0 above 1n (smaller collapses to 0)."""
    if fair_sharing is None or fair_sharing.weight is None:
        return []
    weight = fair_sharing.weight
    if isinstance(weight, float) and not isinstance(weight, bool):
        weight = repr(weight)
    errors = non_negative_quantity(path, weight)
    if errors:
        return errors
    if 0 < parse_quantity(weight) <= TINY_WEIGHT:
        errors.append(invalid(path, str(weight), WEIGHT_TOO_SMALL))
    return errors


def validate_cluster_queue(cq: ClusterQueue) -> list[FieldError]:
    spec = cq.spec
    groups_path = _SPEC.child("resourceGroups")
    config = LimitRules(has_parent=bool(spec.cohort_name), parent_word="cohort", lending_within_nominal=True)
    errors = validate_resource_groups(spec.resource_groups, config, groups_path)
    errors += label_selector(_SPEC.child("namespaceSelector"), spec.namespace_selector)
    errors += validate_fair_sharing(spec.fair_sharing, _SPEC.child("fairSharing"))
    scope = spec.admission_scope
    if scope is not None and scope.admission_mode not in ADMISSION_MODES:
        where = str(_SPEC.child("admissionScope").child("admissionMode"))
        errors.append(not_supported(where, scope.admission_mode, ADMISSION_MODES))
    total_flavors = sum(len(g.flavors) for g in spec.resource_groups)
    if total_flavors > MAX_FLAVORS:
        errors.append(
            invalid(
                groups_path,
                total_flavors,
                f"total number of flavors across all resourceGroups must be ≤ {MAX_FLAVORS}, "
                f"got {total_flavors}",
            )
        )
    total_covered = sum(len(g.covered_resources) for g in spec.resource_groups)
    if total_covered > MAX_COVERED_RESOURCES:
        errors.append(
            invalid(
                groups_path,
                total_covered,
                "total number of covered resources across all resourceGroups must be "
                f"≤ {MAX_COVERED_RESOURCES}, got {total_covered}",
            )
        )
    for i, group in enumerate(spec.resource_groups):
        pairs = sum(len(f.resources) for f in group.flavors)
        if pairs > MAX_FLAVOR_RESOURCES_PER_GROUP:
            errors.append(
                invalid(
                    groups_path.item(i),
                    pairs,
                    "number of flavor-resource combinations in a resourceGroup must be "
                    f"≤ {MAX_FLAVOR_RESOURCES_PER_GROUP}, got {pairs}",
                )
            )
    if not errors:
        errors += _compiles(cq)
    return errors


def _compiles(cq: ClusterQueue) -> list[FieldError]:
    """What the controller itself would refuse (its message names the field and the fix)."""
    try:
        compile_cluster_queue(cq)
    except (InvalidClusterQueueError, QuantityError) as err:
        where, _, detail = str(err).partition(": ")
        if not detail:
            where, detail = "spec", where
        return [FieldError(where, "Invalid value", detail.removeprefix("Invalid value: "))]
    return []


def validate_cluster_queue_update(new: ClusterQueue, old: ClusterQueue) -> list[FieldError]:
    """Kueue validates an update as it validates a new ClusterQueue (no field modelled here is immutable)."""
    return validate_cluster_queue(new)
