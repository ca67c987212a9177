"""Workloads at the door: well-formed pod sets, and what cannot change while quota is reserved.

Pod sets (Kueue's CRD and webhook rules): 1 to 18, names are unique RFC 1123 labels, ``count`` is
not negative, ``minCount`` is at most ``count`` and used by one pod set at most, each template has
containers, and every request, limit and overhead is a quantity that is not negative (``pods`` is
Kueue's own). The template must also compile to per-pod requests as the controller computes them
(:func:`reconciler.core.primitives.podrequests.pod_requests`), so a Workload let in never sits without a
condition. While ``QuotaReserved`` is true: the admission names the spec's pod sets, one
assignment each; pod sets, ``queueName`` and the priority class reference cannot change; an
admission can be set or cleared but not changed.
"""

from __future__ import annotations

from typing import Any

import msgspec

from reconciler.admission.fielderrors import (
    IMMUTABLE,
    FieldError,
    Path,
    duplicate,
    invalid,
    invalid_omitted,
    not_found,
    required,
    too_many,
)
from reconciler.admission.names import dns1123_label, non_negative_quantity
from reconciler.admission.review import decode_object
from reconciler.api import PodSet, PodTemplateView, Workload
from reconciler.core.primitives.podrequests import pod_requests
from reconciler.core.primitives.quantity import QuantityError, parse_quantity, to_amount

__all__ = ["MAX_POD_SETS", "validate_workload", "validate_workload_update"]

MAX_POD_SETS = 18
_SPEC = Path("spec")
_STATUS = Path("status")
_RESERVED_PODS = "pods"


def quota_reserved(workload: Workload) -> bool:
    return any(c.type == "QuotaReserved" and c.status == "True" for c in workload.status.conditions)


def _resources(path: Path, resources: dict[str, Any] | None) -> list[FieldError]:
    errors: list[FieldError] = []
    for kind in ("requests", "limits"):
        for name, value in ((resources or {}).get(kind) or {}).items():
            errors += non_negative_quantity(path.child(kind).key(name), value)
            if kind == "requests" and name == _RESERVED_PODS:
                errors.append(
                    invalid(path.child(kind).key(name), name, "the key is reserved for internal kueue use")
                )
    return errors


def _template(path: Path, pod_set: PodSet) -> list[FieldError]:
    try:
        template = msgspec.json.decode(pod_set.template)
    except msgspec.DecodeError as err:
        return [invalid_omitted(path, f"not JSON: {err}")]
    spec = template.get("spec") if isinstance(template, dict) else None
    if not isinstance(spec, dict):
        return [required(path.child("spec"), "a pod template needs a spec with containers")]
    spec_path = path.child("spec")
    errors: list[FieldError] = []
    if not spec.get("containers"):
        errors.append(required(spec_path.child("containers"), "a pod template needs at least one container"))
    for kind in ("initContainers", "containers"):
        containers = spec.get(kind) or []
        if not isinstance(containers, list):
            errors.append(invalid(spec_path.child(kind), containers, "must be a list of containers"))
            continue
        for i, container in enumerate(containers):
            where = spec_path.child(kind).item(i)
            if not isinstance(container, dict):
                errors.append(invalid(where, container, "must be a container object"))
                continue
            if not container.get("name"):
                errors.append(required(where.child("name")))
            errors += _resources(where.child("resources"), container.get("resources"))
    if isinstance(spec.get("resources"), dict):
        errors += _resources(spec_path.child("resources"), spec["resources"])
    for name, value in (spec.get("overhead") or {}).items():
        errors += non_negative_quantity(spec_path.child("overhead").key(name), value)
    if not errors:
        errors += _compiles(path, pod_set)
    return errors


def _compiles(path: Path, pod_set: PodSet) -> list[FieldError]:
    """The per-pod requests the controller would compute from this template, or why it cannot."""
    view, problems = decode_object(pod_set.template, PodTemplateView)
    errors = [FieldError(f"{path}.{e.field}", e.type, e.detail, e.value, e.has_value) for e in problems]
    if view is not None:
        try:
            pod_requests(view.spec)
        except QuantityError as err:
            errors.append(invalid_omitted(path.child("spec"), str(err)))
    return errors


def _pod_sets(workload: Workload) -> list[FieldError]:
    path = _SPEC.child("podSets")
    pod_sets = workload.spec.pod_sets
    errors: list[FieldError] = []
    if not pod_sets:
        return [required(path, "a Workload needs at least one pod set")]
    if len(pod_sets) > MAX_POD_SETS:
        errors.append(too_many(path, len(pod_sets), MAX_POD_SETS))
    names: set[str] = set()
    for i, pod_set in enumerate(pod_sets):
        where = path.item(i)
        errors += dns1123_label(where.child("name"), pod_set.name)
        if pod_set.name in names:
            errors.append(duplicate(where.child("name"), pod_set.name))
        names.add(pod_set.name)
        count = 1 if pod_set.count is None else pod_set.count
        if count < 0:
            errors.append(invalid(where.child("count"), count, "must be greater than or equal to 0"))
        if pod_set.min_count is not None and not 0 < pod_set.min_count <= count:
            errors.append(
                invalid(
                    where.child("minCount"),
                    pod_set.min_count,
                    "minCount should be positive and less or equal to count",
                )
            )
        errors += _template(where.child("template"), pod_set)
    variable = sum(1 for p in pod_sets if p.min_count is not None)
    if variable > 1:
        errors.append(invalid(path, variable, "at most one podSet can use minCount"))
    return errors


def _admission(workload: Workload) -> list[FieldError]:
    admission = workload.status.admission
    if admission is None or not quota_reserved(workload):
        return []
    path = _STATUS.child("admission").child("podSetAssignments")
    errors: list[FieldError] = []
    counts = {p.name: (1 if p.count is None else p.count) for p in workload.spec.pod_sets}
    if len(admission.pod_set_assignments) != len(workload.spec.pod_sets):
        errors.append(
            invalid(
                path,
                len(admission.pod_set_assignments),
                "podSetAssignments must have the same number of podSets as the spec",
            )
        )
    for i, assignment in enumerate(admission.pod_set_assignments):
        where = path.item(i)
        if assignment.name not in counts:
            errors.append(not_found(where.child("name"), assignment.name))
        count = assignment.count or 0
        for resource, value in assignment.resource_usage.items():
            usage = where.child("resourceUsage").key(resource)
            try:
                amount = to_amount(resource, parse_quantity(value))
            except QuantityError:
                errors += non_negative_quantity(usage, value)
                continue
            if count > 0 and amount % count:
                errors.append(invalid(usage, value, f"is not a multiple of {count}"))
    return errors


def validate_workload(workload: Workload) -> list[FieldError]:
    return _pod_sets(workload) + _admission(workload)


def _pod_set_shape(pod_set: PodSet) -> object:
    return [pod_set.name, pod_set.count, pod_set.min_count, msgspec.json.decode(pod_set.template)]


def validate_workload_update(new: Workload, old: Workload) -> list[FieldError]:
    errors = validate_workload(new)
    if not quota_reserved(old):
        return errors
    path = _SPEC.child("podSets")
    if len(new.spec.pod_sets) != len(old.spec.pod_sets):
        errors.append(invalid(path, len(new.spec.pod_sets), IMMUTABLE))
    else:
        for i, (a, b) in enumerate(zip(new.spec.pod_sets, old.spec.pod_sets, strict=True)):
            if _pod_set_shape(a) != _pod_set_shape(b):
                errors.append(invalid(path.item(i), a.name, IMMUTABLE))
    if quota_reserved(new) and new.spec.queue_name != old.spec.queue_name:
        errors.append(
            invalid(
                _SPEC.child("queueName"),
                new.spec.queue_name,
                "queueName is immutable while workload quota reserved",
            )
        )
    errors += _priority_class_ref(new, old)
    before, after = old.status.admission, new.status.admission
    if before is not None and after is not None and before != after:
        errors.append(invalid(_STATUS.child("admission"), after.cluster_queue, IMMUTABLE))
    return errors


def _priority_class_ref(new: Workload, old: Workload) -> list[FieldError]:
    path = _SPEC.child("priorityClassRef")
    a, b = new.spec.priority_class_ref, old.spec.priority_class_ref
    if (a is None) != (b is None):
        return [invalid(path, None, "priorityClassRef is immutable while workload quota reserved")]
    if a is None or b is None:
        return []
    for name, x, y in (("group", a.group, b.group), ("kind", a.kind, b.kind)):
        if x != y:
            return [
                invalid(
                    path.child(name), x, f"priorityClassRef.{name} is immutable while workload quota reserved"
                )
            ]
    if a.group == "scheduling.k8s.io" and a.kind == "PriorityClass" and a.name != b.name:
        return [
            invalid(
                path.child("name"),
                a.name,
                "priorityClassRef.name is immutable for scheduling.k8s.io/priorityclass while workload "
                "quota reserved",
            )
        ]
    return []
