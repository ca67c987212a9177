"""A Workload's priority, as Kueue derives it from its job.

In order: the WorkloadPriorityClass named by the job's `kueue.x-k8s.io/priority-class`
label; else the PriorityClass named by a pod template's `priorityClassName`;
else the cluster's default PriorityClass (`globalDefault: true`, the lowest value
if several claim it); else priority 0 with no class. A class that is named but
does not exist leaves the job without a Workload until it appears.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import msgspec

from reconciler.api import (
    ObjectMeta,
    PriorityClass,
    PriorityClassRef,
    Workload,
    WorkloadPriorityClass,
    pod_template_view,
)

__all__ = [
    "PRIORITY_CLASS_LABEL",
    "MissingPriorityClass",
    "ResolvedPriority",
    "priority_update",
    "resolve_priority",
    "resolve_priority_of",
]

PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
WORKLOAD_PRIORITY_GROUP, WORKLOAD_PRIORITY_KIND = "kueue.x-k8s.io", "WorkloadPriorityClass"
POD_PRIORITY_GROUP, POD_PRIORITY_KIND = "scheduling.k8s.io", "PriorityClass"
DEFAULT_PRIORITY = 0


@dataclass(frozen=True, slots=True)
class ResolvedPriority:
    value: int
    ref: PriorityClassRef | None


@dataclass(frozen=True, slots=True)
class MissingPriorityClass:
    """The Job names a class that does not exist: what to tell the user."""

    field: str
    name: str
    kind: str

    @property
    def message(self) -> str:
        return (
            f"{self.field} names {self.kind} {self.name!r}, which does not exist: create it, or change "
            f"{self.field}; the Workload is created once it resolves"
        )


class _Labelled(Protocol):
    @property
    def metadata(self) -> ObjectMeta: ...


class _TemplateSpec(Protocol):
    @property
    def template(self) -> msgspec.Raw: ...


class _OneTemplate(Protocol):
    """A job with one pod template (`spec.template`)."""

    @property
    def metadata(self) -> ObjectMeta: ...

    @property
    def spec(self) -> _TemplateSpec: ...


def resolve_priority(
    job: _OneTemplate,
    workload_classes: Mapping[str, WorkloadPriorityClass],
    pod_classes: Mapping[str, PriorityClass],
) -> ResolvedPriority | MissingPriorityClass:
    return resolve_priority_of(job.metadata.labels, [job.spec.template], workload_classes, pod_classes)


def resolve_priority_of(
    labels: Mapping[str, str],
    templates: Sequence[msgspec.Raw],
    workload_classes: Mapping[str, WorkloadPriorityClass],
    pod_classes: Mapping[str, PriorityClass],
) -> ResolvedPriority | MissingPriorityClass:
    """A job's priority from its labels and its pod sets' templates (the first that names a
    priorityClassName, as Kueue's extractPriorityFromPodSets), for any kind of job."""
    wanted = labels.get(PRIORITY_CLASS_LABEL, "")
    if wanted:
        wpc = workload_classes.get(wanted)
        if wpc is None:
            return MissingPriorityClass(f"label {PRIORITY_CLASS_LABEL}", wanted, WORKLOAD_PRIORITY_KIND)
        return ResolvedPriority(
            wpc.value, PriorityClassRef(WORKLOAD_PRIORITY_GROUP, WORKLOAD_PRIORITY_KIND, wanted)
        )
    pod_class = ""
    for template in templates:
        if bytes(template).find(b"priorityClassName") >= 0:  # most have none: skip the decode (find: no `in`)
            pod_class = pod_template_view(template).spec.priority_class_name or ""
        if pod_class:
            break
    if pod_class:
        pc = pod_classes.get(pod_class)
        if pc is None:
            return MissingPriorityClass("spec.template.spec.priorityClassName", pod_class, POD_PRIORITY_KIND)
        return ResolvedPriority(pc.value, PriorityClassRef(POD_PRIORITY_GROUP, POD_PRIORITY_KIND, pod_class))
    defaults = [pc for pc in pod_classes.values() if pc.global_default]
    if defaults:
        chosen = min(defaults, key=lambda pc: pc.value)
        ref = PriorityClassRef(POD_PRIORITY_GROUP, POD_PRIORITY_KIND, chosen.metadata.name)
        return ResolvedPriority(chosen.value, ref)
    return ResolvedPriority(DEFAULT_PRIORITY, None)


def priority_update(
    job: _Labelled, workload: Workload, workload_classes: Mapping[str, WorkloadPriorityClass]
) -> ResolvedPriority | None:
    """The job's priority-class label changed (or was added): the Workload's new priority.

    As in Kueue, only a Workload whose priority has no class or comes from a
    WorkloadPriorityClass follows the label; a missing class changes nothing.
    """
    ref = workload.spec.priority_class_ref
    if ref is not None and ref.kind != WORKLOAD_PRIORITY_KIND:
        return None
    wanted = job.metadata.labels.get(PRIORITY_CLASS_LABEL, "")
    current = ref.name if ref is not None else ""
    if wanted == current or not wanted:
        return None
    wpc = workload_classes.get(wanted)
    if wpc is None:
        return None
    return ResolvedPriority(
        wpc.value, PriorityClassRef(WORKLOAD_PRIORITY_GROUP, WORKLOAD_PRIORITY_KIND, wanted)
    )


def priority_class_name(workload: Workload | None) -> str:
    """The `priority_class` label of Kueue's metrics: the Workload's class name, "" without one."""
    ref = workload.spec.priority_class_ref if workload is not None else None
    return ref.name if ref is not None else ""
