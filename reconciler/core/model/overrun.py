"""Whether an admitted Workload's job runs more pods than the Workload was charged for.

Beyond Kueue v0.18.1: a managed parent's children (the jobs its controller makes) can be
edited, or given pods, past what the parent's Workload reserved, and Kueue does not look. Here a
Workload's running pods (its job's, and those of the jobs its job controls, up the chain) are
counted against its pod sets: per pod set for pods that carry Kueue's pod set label, and in all.
A pod counts while it may hold devices and will not go by itself: not Succeeded or Failed, and
not being deleted (a replaced pod's successor is not an excess).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from reconciler.api import Pod, Workload

from .jobs import PODSET_LABEL

__all__ = ["Overrun", "overrun"]

_ENDED = ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class Overrun:
    """More pods run than charged: in `pod_set` ("" for all pod sets together), `running`
    against `charged`, and the controllers of the pods counted there (kind/name, sorted)."""

    pod_set: str
    running: int
    charged: int
    controllers: tuple[str, ...]

    def message(self, workload: str) -> str:
        where = f"pod set {self.pod_set}" if self.pod_set else "its pod sets"
        return (
            f"{self.running} pods run for {where} of Workload {workload}, which is admitted for "
            f"{self.charged} (by {', '.join(self.controllers)}): stopped and requeued; a managed job's "
            "children may not run more than its Workload was charged for"
        )


def charged_counts(workload: Workload) -> dict[str, int]:
    """Pods charged per pod set: the admission's counts, else the pod sets' own."""
    counts = {ps.name: 1 if ps.count is None else ps.count for ps in workload.spec.pod_sets}
    admission = workload.status.admission
    if admission is not None:
        for assignment in admission.pod_set_assignments:
            if assignment.count is not None:
                counts[assignment.name] = assignment.count
    return counts


def _controller(pod: Pod) -> str:
    for ref in pod.metadata.owner_references:
        if ref.controller:
            return f"{ref.kind}/{ref.name}"
    return f"Pod/{pod.metadata.name}"


def overrun(workload: Workload, pods: Iterable[Pod]) -> Overrun | None:
    """The first pod set (or the whole) whose running pods exceed the charge, else None."""
    running = [p for p in pods if p.status.phase not in _ENDED and not p.metadata.deletion_timestamp]
    charged = charged_counts(workload)
    by_set: dict[str, list[Pod]] = {}
    for pod in running:
        name = pod.metadata.labels.get(PODSET_LABEL)
        if name is not None and name in charged:
            by_set.setdefault(name, []).append(pod)
    for name in sorted(by_set):
        counted = by_set[name]
        if len(counted) > charged[name]:
            return Overrun(name, len(counted), charged[name], _controllers(counted))
    total = sum(charged.values())
    if len(running) > total:
        return Overrun("", len(running), total, _controllers(running))
    return None


def _controllers(pods: list[Pod]) -> tuple[str, ...]:
    return tuple(sorted({_controller(p) for p in pods}))
