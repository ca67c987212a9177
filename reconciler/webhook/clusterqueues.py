"""ClusterQueues at the door: Kueue's validation of quotas, limits and resource groups.

Kueue's rules and words: resource names are label keys, each resource is covered by one
group, a flavor appears once, each flavor's resources follow ``coveredResources`` in order,
quantities are not negative, ``borrowingLimit`` and ``lendingLimit`` need a cohort and the lending
limit stays within the nominal quota, and there are at most 256 flavors, 256 covered resources and
512 flavor-resource pairs per group. A spec that passes is also compiled as the controller compiles
it (:func:`reconciler.core.model.clusterqueues.compile_cluster_queue`), so nothing the webhook lets in
turns the ClusterQueue inactive later.
"""

from __future__ import annotations

from reconciler.admission.fielderrors import FieldError, Path, duplicate, invalid, not_supported
from reconciler.admission.names import label_selector, non_negative_quantity, qualified_name
from reconciler.api import ClusterQueue, ResourceGroup, ResourceQuota
from reconciler.core.model.clusterqueues import InvalidClusterQueueError, compile_cluster_queue
from reconciler.core.primitives.quantity import QuantityError, parse_quantity

__all__ = ["validate_cluster_queue", "validate_cluster_queue_update"]

MAX_FLAVORS = 256
MAX_COVERED_RESOURCES = 256
MAX_FLAVOR_RESOURCES_PER_GROUP = 512
LENDING_ABOVE_NOMINAL = "must be less than or equal to the nominalQuota"
# spec.admissionScope.admissionMode, Kueue's CRD enum.
ADMISSION_MODES = ("UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing")
_SPEC = Path("spec")


def _limits(quota: ResourceQuota, has_cohort: bool, path: Path) -> list[FieldError]:
    errors: list[FieldError] = []
    for name, limit in (("borrowingLimit", quota.borrowing_limit), ("lendingLimit", quota.lending_limit)):
        if limit is None:
            continue
        where = path.child(name)
        errors += non_negative_quantity(where, limit)
        if not has_cohort:
            errors.append(invalid(where, str(limit), "must be nil when cohort is empty"))
    if quota.lending_limit is not None:
        try:
            above = parse_quantity(quota.lending_limit) > parse_quantity(quota.nominal_quota)
        except QuantityError:
            above = False  # reported on its own field
        if above:
            errors.append(
                invalid(path.child("lendingLimit"), str(quota.lending_limit), LENDING_ABOVE_NOMINAL)
            )
    return errors


def _group(group: ResourceGroup, path: Path, has_cohort: bool, seen: set[str]) -> list[FieldError]:
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
            errors += _limits(quota, has_cohort, rpath)
    return errors


def validate_cluster_queue(cq: ClusterQueue) -> list[FieldError]:
    spec = cq.spec
    groups_path = _SPEC.child("resourceGroups")
    has_cohort = bool(spec.cohort_name)
    errors: list[FieldError] = []
    covered: set[str] = set()
    flavors: set[str] = set()
    for i, group in enumerate(spec.resource_groups):
        errors += _group(group, groups_path.item(i), has_cohort, covered)
        for j, flavor in enumerate(group.flavors):
            if flavor.name in flavors:
                errors.append(
                    duplicate(groups_path.item(i).child("flavors").item(j).child("name"), flavor.name)
                )
            flavors.add(flavor.name)
    errors += label_selector(_SPEC.child("namespaceSelector"), spec.namespace_selector)
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
