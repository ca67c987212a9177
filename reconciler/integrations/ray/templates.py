"""What RayCluster and RayJob share: the pod sets of a cluster spec, and starting and restoring
the pod templates in it.

Pod sets, as Kueue v0.18.1 builds them: ``head`` (one pod, the head group's template), then one
per worker group, named after its ``groupName``, counting ``replicas`` (1 when unset) times
``numOfHosts`` when that is above 1. Starting merges each pod set's node labels, tolerations,
labels and annotations into its template; restoring gives each template back the labels,
annotations, node selector, tolerations and scheduling gates its Workload recorded.

The writes are merge patches computed as the difference between the object as read and as it
should be (`merge_diff`): a key that goes is sent as null, a changed list (the worker groups)
whole, as read, with only its templates changed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from reconciler.api import PodSet
from reconciler.api.ray import RayClusterSpec, worker_group

from ..base import PodSetStart

__all__ = [
    "HEAD",
    "cluster_pod_sets",
    "inject",
    "merge_diff",
    "restore",
    "rewrite_cluster_spec",
    "worker_count",
]

HEAD = "head"
# What restoring gives back, per section of a pod template (Kueue's RestorePodSpec).
_RESTORED = (
    ("metadata", ("labels", "annotations")),
    ("spec", ("nodeSelector", "tolerations", "schedulingGates")),
)

Change = Callable[[str, dict[str, Any]], None]


def worker_count(replicas: int | None, num_of_hosts: int) -> int:
    count = 1 if replicas is None else replicas
    return count * num_of_hosts if num_of_hosts > 1 else count


def cluster_pod_sets(spec: RayClusterSpec) -> list[PodSet]:
    """The head's pod set, then one per worker group."""
    sets = [PodSet(name=HEAD, template=spec.head_template, count=1)]
    for raw in spec.worker_group_specs:
        group = worker_group(raw)
        count = worker_count(group.replicas, group.num_of_hosts)
        sets.append(PodSet(name=group.group_name, template=group.template, count=count))
    return sets


def inject(start: PodSetStart | None) -> Callable[[dict[str, Any]], None]:
    """A change that merges one pod set's start into a pod template (a dict, in place)."""

    def change(template: dict[str, Any]) -> None:
        if start is None:
            return
        spec = template.setdefault("spec", {})
        if start.node_selector:
            spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **start.node_selector}
        current: list[Any] = spec.get("tolerations") or []
        added = [t for t in msgspec.to_builtins(list(start.tolerations)) if t not in current]
        if added:
            spec["tolerations"] = [*current, *added]
        for section, extra in (("labels", start.labels), ("annotations", start.annotations)):
            if extra:
                meta = template.setdefault("metadata", {})
                meta[section] = {**(meta.get(section) or {}), **extra}

    return change


def restore(recorded: msgspec.Raw | None) -> Callable[[dict[str, Any]], None]:
    """A change that gives a pod template back what its Workload recorded (None: leave it)."""
    wanted_template: dict[str, Any] = {} if recorded is None else msgspec.json.decode(recorded)

    def change(template: dict[str, Any]) -> None:
        if recorded is None:
            return
        for section, fields in _RESTORED:
            wanted = wanted_template.get(section) or {}
            current = template.setdefault(section, {})
            for name in fields:
                if wanted.get(name):
                    current[name] = wanted[name]
                else:
                    current.pop(name, None)
            if not current and section not in wanted_template:
                del template[section]  # (as recorded: no such section)

    return change


def rewrite_cluster_spec(spec: dict[str, Any], change: Callable[[str, dict[str, Any]], None]) -> None:
    """Pass each pod template of a decoded cluster spec, with its pod set's name, to `change`."""
    head = spec.get("headGroupSpec")
    if isinstance(head, dict):
        change(HEAD, head.setdefault("template", {}))
    for group in spec.get("workerGroupSpecs") or []:
        if isinstance(group, dict):
            change(str(group.get("groupName", "")), group.setdefault("template", {}))


def by_name_injecting(starts: Sequence[PodSetStart]) -> Change:
    found = {s.name: s for s in starts}
    return lambda name, template: inject(found.get(name))(template)


def by_name_restoring(recorded: Sequence[PodSet]) -> Change:
    found: Mapping[str, msgspec.Raw] = {ps.name: ps.template for ps in recorded}
    return lambda name, template: restore(found.get(name))(template)


def merge_diff(old: Any, new: Any) -> Any:
    """The JSON merge patch (RFC 7386) that turns `old` into `new` (None when they are equal)."""
    if isinstance(old, dict) and isinstance(new, dict):
        patch: dict[str, Any] = {}
        for key, value in new.items():
            if key not in old:
                patch[key] = value
            elif old[key] != value:
                patch[key] = merge_diff(old[key], value)
        for key in old:
            if key not in new:
                patch[key] = None
        return patch or None
    return None if old == new else new
