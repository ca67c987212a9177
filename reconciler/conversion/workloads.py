"""Workload between v1beta1 and v1beta2, field by field as Kueue v0.18.1 converts it.

- v1beta1 ``spec.priorityClassName`` with ``spec.priorityClassSource`` is v1beta2's
  ``spec.priorityClassRef`` (``kueue.x-k8s.io/workloadpriorityclass``: group ``kueue.x-k8s.io``,
  kind ``WorkloadPriorityClass``; ``scheduling.k8s.io/priorityclass``: group
  ``scheduling.k8s.io``, kind ``PriorityClass``); a name with another source (or none) is
  dropped going up, a reference of another group and kind going down, as Kueue does.
- ``status.accumulatedPastExexcutionTimeSeconds`` (v1beta1's spelling) is v1beta2's
  ``status.accumulatedPastExecutionTimeSeconds``.
- each admitted pod set's ``topologyAssignment``: ``domains`` (v1beta1) and ``slices`` (v1beta2).
- dropped going down, as Kueue drops them: ``spec.preemptionGates``, ``status.preemptionGates``
  and each pod set's ``topologyRequest.podsetSliceRequiredTopologyConstraints``.
"""

from __future__ import annotations

from collections.abc import Callable

from .fields import ConversionError, Obj, items_of, mapping_at, rename
from .topology import assignment_down, assignment_up

__all__ = ["workload_down", "workload_up"]

# v1beta1's priorityClassSource -> v1beta2's priorityClassRef group and kind
PRIORITY_SOURCES = {
    "kueue.x-k8s.io/workloadpriorityclass": ("kueue.x-k8s.io", "WorkloadPriorityClass"),
    "scheduling.k8s.io/priorityclass": ("scheduling.k8s.io", "PriorityClass"),
}
_SOURCE_OF: dict[tuple[object, object], str] = {ref: source for source, ref in PRIORITY_SOURCES.items()}
_OLD_TIME, _NEW_TIME = "accumulatedPastExexcutionTimeSeconds", "accumulatedPastExecutionTimeSeconds"


def workload_up(obj: Obj) -> None:
    spec = mapping_at(obj, "spec", "")
    if spec is not None:
        source = spec.pop("priorityClassSource", None)
        name = spec.pop("priorityClassName", None)
        ref = PRIORITY_SOURCES.get(source) if isinstance(source, str) else None
        if ref is not None:
            if name is not None and not isinstance(name, str):
                raise ConversionError(
                    "spec.priorityClassName", "must be the name of a priority class (a string)"
                )
            spec["priorityClassRef"] = {"group": ref[0], "kind": ref[1], "name": name or ""}
    status = mapping_at(obj, "status", "")
    if status is not None:
        rename(status, _OLD_TIME, _NEW_TIME)
        _assignments(status, assignment_up)


def workload_down(obj: Obj) -> None:
    spec = mapping_at(obj, "spec", "")
    if spec is not None:
        spec.pop("preemptionGates", None)
        ref = mapping_at(spec, "priorityClassRef", "spec")
        spec.pop("priorityClassRef", None)
        source = _SOURCE_OF.get((ref.get("group"), ref.get("kind"))) if ref is not None else None
        if ref is not None and source is not None:
            spec["priorityClassSource"] = source
            spec["priorityClassName"] = ref.get("name", "")
        for where, pod_set in items_of(spec, "podSets", "spec"):
            request = mapping_at(pod_set, "topologyRequest", where)
            if request is not None:
                request.pop("podsetSliceRequiredTopologyConstraints", None)
    status = mapping_at(obj, "status", "")
    if status is not None:
        status.pop("preemptionGates", None)
        rename(status, _NEW_TIME, _OLD_TIME)
        _assignments(status, assignment_down)


def _assignments(status: Obj, step: Callable[[Obj, str], None]) -> None:
    admission = mapping_at(status, "admission", "status")
    if admission is None:
        return
    for where, assignment in items_of(admission, "podSetAssignments", "status.admission"):
        topology = mapping_at(assignment, "topologyAssignment", where)
        if topology is not None:
            step(topology, f"{where}.topologyAssignment")
