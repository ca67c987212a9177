"""What Kueue v0.18.1 does alike for every replica-spec job of Kubeflow (its kubeflowjob package,
and its mpijob package, which repeats the same rules for MPIJob).

A pod set per replica type the job has, in the kind's fixed order (a PyTorchJob's Master before
its Worker, a TFJob's Chief, Master, PS, Worker, Evaluator, an MPIJob's Launcher before its
Worker), named as the replica type in lower case, counting its `replicas` (1 when unset), its
template as written. Replica types outside the kind's order are not pod sets (as in Kueue).

Suspended is `spec.runPolicy.suspend`. Starting unsuspends it and merges each pod set's node
labels, tolerations, labels and annotations into its replica type's template in one merge patch
(the replica specs are a map, so the patch touches only what it names; a toleration list goes
whole). Restoring gives each template back the labels, annotations, node selector, tolerations
and scheduling gates its Workload recorded (Kueue's RestorePodSpec). Active is any replica
type with active pods; PodsReady is the job's `Running` condition and finished its `Succeeded`
or `Failed` condition, as Kueue reads them; no pods are reclaimable (Kueue's kubeflow and MPI
jobs report none).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from reconciler.api import PodSet
from reconciler.api.kubeflow import ReplicaJob, ReplicaSpec
from reconciler.api.resources import Resource
from reconciler.core.model.jobs import PODSET_LABEL

from ..base import Outcome, Patch, PodSetStart, SuspendableJob

__all__ = ["RUNNING", "ReplicaJobIntegration", "ordered_replicas"]

_PODSET_LABEL_BYTES = PODSET_LABEL.encode()
RUNNING = "Running"
_EMPTY: Mapping[str, Any] = {}


def ordered_replicas(obj: ReplicaJob, order: Sequence[str]) -> list[tuple[str, ReplicaSpec]]:
    """The job's replica types in the kind's order, those it has only."""
    specs = obj.spec.replica_specs
    return [(rt, specs[rt]) for rt in order if rt in specs]


def _map_patch(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> dict[str, Any] | None:
    """The merge patch that turns map `current` into `wanted` (null removes a key; the whole
    map when `wanted` is empty)."""
    if not wanted:
        return None
    out: dict[str, Any] = {k: None for k in current if k not in wanted}
    out.update({k: v for k, v in wanted.items() if current.get(k) != v})
    return out


def _restore_section(
    current: Mapping[str, Any], recorded: Mapping[str, Any], maps: tuple[str, ...], lists: tuple[str, ...]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in maps:
        now, was = current.get(name) or {}, recorded.get(name) or {}
        if now != was:
            out[name] = _map_patch(now, was)
    for name in lists:
        if (current.get(name) or []) != (recorded.get(name) or []):
            out[name] = recorded.get(name) or None
    return out


def _restore_template(current: dict[str, Any], recorded: dict[str, Any]) -> dict[str, Any]:
    """The merge patch giving one pod template back what its Workload recorded (an emptied
    section goes when the recorded template has none)."""
    out: dict[str, Any] = {}
    for section, maps, lists in (
        ("metadata", ("labels", "annotations"), ()),
        ("spec", ("nodeSelector",), ("tolerations", "schedulingGates")),
    ):
        now, was = current.get(section) or {}, recorded.get(section) or {}
        change = _restore_section(now, was, maps, lists)
        if not change:
            continue
        left = {k: v for k, v in now.items() if change.get(k, v) is not None or k not in change}
        out[section] = None if not left and section not in recorded else change
    return out


def _start_template(template: dict[str, Any], start: PodSetStart) -> dict[str, Any]:
    """The merge patch that injects one pod set's start into its template."""
    spec: dict[str, Any] = {}
    if start.node_selector:
        spec["nodeSelector"] = dict(start.node_selector)
    current: list[Any] = (template.get("spec") or {}).get("tolerations") or []
    added = [t for t in msgspec.to_builtins(list(start.tolerations)) if t not in current]
    if added:
        spec["tolerations"] = [*current, *added]
    meta: dict[str, Any] = {}
    if start.labels:
        meta["labels"] = dict(start.labels)
    if start.annotations:
        meta["annotations"] = dict(start.annotations)
    out: dict[str, Any] = {}
    if spec:
        out["spec"] = spec
    if meta:
        out["metadata"] = meta
    return out


@dataclass(frozen=True)
class ReplicaJobIntegration(SuspendableJob):
    """One replica-spec kind: its framework, where it is served, its projection, the wire name of
    its replica-spec map and its replica types in Kueue's order."""

    framework: str
    resource: Resource
    projection: type[Any]
    replica_field: str  # e.g. "pytorchReplicaSpecs"
    order: tuple[str, ...]

    @property
    def kind(self) -> str:
        return self.resource.kind

    @property
    def api_version(self) -> str:
        return self.resource.api_version

    def pod_sets(self, obj: ReplicaJob) -> list[PodSet]:
        return [
            PodSet(name=rt.lower(), template=spec.template, count=spec.count)
            for rt, spec in ordered_replicas(obj, self.order)
        ]

    def is_suspended(self, obj: ReplicaJob) -> bool:
        return bool(obj.spec.suspend)

    def _patch(self, replicas: dict[str, Any], suspend: bool | None) -> bytes:
        spec: dict[str, Any] = {}
        if suspend is not None:
            spec["runPolicy"] = {"suspend": suspend}
        if replicas:
            spec[self.replica_field] = replicas
        return msgspec.json.encode({"spec": spec})

    def start_patch(self, obj: ReplicaJob, starts: Sequence[PodSetStart]) -> bytes:
        by_name = {s.name: s for s in starts}
        replicas: dict[str, Any] = {}
        for rt, spec in ordered_replicas(obj, self.order):
            start = by_name.get(rt.lower())
            if start is None:
                continue
            change = _start_template(msgspec.json.decode(spec.template), start)
            if change:
                replicas[rt] = {"template": change}
        return self._patch(replicas, suspend=False)

    def suspend_patch(self, obj: ReplicaJob) -> bytes:
        return self._patch({}, suspend=True)

    def restore_pending(self, obj: ReplicaJob) -> bool:
        return any(bytes(s.template).find(_PODSET_LABEL_BYTES) >= 0 for s in obj.spec.replica_specs.values())

    def restore_patch(self, obj: ReplicaJob, recorded: Sequence[PodSet]) -> Patch | None:
        templates = {ps.name: ps.template for ps in recorded}
        replicas: dict[str, Any] = {}
        for rt, spec in ordered_replicas(obj, self.order):
            was = templates.get(rt.lower())
            if was is None:
                return None  # not the Workload's pod sets: nothing to restore from
            change = _restore_template(msgspec.json.decode(spec.template), msgspec.json.decode(was))
            if change:
                replicas[rt] = {"template": change}
        return Patch(self._patch(replicas, suspend=None)) if replicas else None

    def is_active(self, obj: ReplicaJob) -> bool:
        return any(s.active != 0 for s in obj.status.replica_statuses.values())

    def _running(self, obj: ReplicaJob) -> bool:
        return any(c.type == RUNNING and c.status == "True" for c in obj.status.conditions)

    def pods_ready(self, obj: ReplicaJob) -> bool:
        return self._running(obj)

    def pods_ready_count(self, obj: ReplicaJob) -> int:
        """All of the job's pods while its `Running` condition is true (Kueue's PodsReady for
        these kinds is that condition alone), else none."""
        if not self._running(obj):
            return 0
        return sum(spec.count for _, spec in ordered_replicas(obj, self.order))

    def finished(self, obj: ReplicaJob) -> Outcome | None:
        for c in obj.status.conditions:
            if c.type in ("Succeeded", "Failed") and c.status == "True":
                return Outcome(c.type != "Failed", c.message)
        return None

    def reclaimable_pods(self, obj: ReplicaJob) -> Mapping[str, int]:
        return _EMPTY

    def owns(self, obj: ReplicaJob, owner_kind: str, owner_api_version: str, owner_name: str) -> bool:
        return (owner_kind, owner_api_version, owner_name) == (self.kind, self.api_version, obj.metadata.name)
