"""Serving frameworks' part of a checkpoint: for scenarios whose Configuration enables
`deployment` or `statefulset` (Kueue turns the pod integration on with them).

The pod snapshot (snapshot_pods.py), with the pods a ReplicaSet made renamed: their names end in
random characters and their pod-template hash, and which of two like pods is admitted first is
neither manager's promise. Each such pod becomes `<prefix>hash-#<i>`, `i` its place among the
pods of its `generateName` sorted by what the snapshot shows of them (gates, managed label,
finalizers, node selector, phase), then by creation time; the new name replaces the old one in
every field name, message and Event. A StatefulSet's pods keep their own (stable) names; its
Workload's name (hashed from the set's UID) becomes `statefulset-<set>`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from e2e.conformance.snapshot_pods import pod_fields, take_pod_snapshot
from e2e.testbed import KubeClient, api_path

Obj = dict[str, Any]
SERVING_FRAMEWORKS = frozenset({"deployment", "statefulset"})
TEMPLATE_HASH_LABEL = "pod-template-hash"
OWNER_GVK_ANNOTATION = "kueue.x-k8s.io/job-owner-gvk"
OWNER_NAME_ANNOTATION = "kueue.x-k8s.io/job-owner-name"
STATEFULSET_GVK = "apps/v1, Kind=StatefulSet"


def enables_serving(configuration: Path) -> bool:
    """Whether a Configuration file names `deployment` or `statefulset` in integrations.frameworks."""
    doc = yaml.safe_load(configuration.read_text()) or {}
    frameworks = (doc.get("integrations") or {}).get("frameworks") or []
    return bool(SERVING_FRAMEWORKS & set(frameworks))


def stable_names(pods: list[Obj]) -> dict[str, str]:
    """Each generated pod's name -> its stable name (see the module's docstring)."""
    by_prefix: dict[str, list[Obj]] = {}
    for pod in pods:
        meta = pod["metadata"]
        prefix = meta.get("generateName")
        if prefix:
            template_hash = (meta.get("labels") or {}).get(TEMPLATE_HASH_LABEL)
            if template_hash:
                prefix = prefix.replace(template_hash, "hash")
            by_prefix.setdefault(prefix, []).append(pod)
    renames: dict[str, str] = {}
    for prefix, members in by_prefix.items():
        members.sort(
            key=lambda p: (
                json.dumps(pod_fields(p), sort_keys=True),
                p["metadata"].get("creationTimestamp", ""),
                p["metadata"]["name"],
            )
        )
        for i, pod in enumerate(members):
            renames[pod["metadata"]["name"]] = f"{prefix}#{i}"
    return renames


def set_workload_names(workloads: list[Obj]) -> dict[str, str]:
    """A StatefulSet's Workload's name -> `statefulset-<set>` (its hash left out)."""
    out: dict[str, str] = {}
    for wl in workloads:
        annotations = wl["metadata"].get("annotations") or {}
        if annotations.get(OWNER_GVK_ANNOTATION) == STATEFULSET_GVK:
            out[wl["metadata"]["name"]] = f"statefulset-{annotations.get(OWNER_NAME_ANNOTATION, '')}"
    return out


def _renamed(value: Any, renames: dict[str, str]) -> Any:
    """`value` with each name replaced, the longest names first: a pod's name (`web-0`) may be
    part of a Workload's (`statefulset-web-05e46`), which must be replaced whole."""
    if isinstance(value, str):
        for old in sorted(renames, key=len, reverse=True):
            value = value.replace(old, renames[old])
        return value
    if isinstance(value, list):
        return [_renamed(v, renames) for v in value]
    if isinstance(value, dict):
        return {_renamed(k, renames): _renamed(v, renames) for k, v in value.items()}
    return value


async def take_serving_snapshot(kube: KubeClient, namespaces: tuple[str, ...]) -> dict[str, Any]:
    """The pod snapshot, with generated pod names made stable."""
    flat = await take_pod_snapshot(kube, namespaces)
    pods: list[Obj] = []
    workloads: list[Obj] = []
    for ns in namespaces:
        pods += (await kube.get(api_path("v1", "pods", ns)))["items"]
        workloads += (await kube.get(api_path("kueue.x-k8s.io/v1beta2", "workloads", ns)))["items"]
    renamed: dict[str, Any] = _renamed(flat, {**stable_names(pods), **set_workload_names(workloads)})
    if "Events" in renamed:
        renamed["Events"] = sorted(renamed["Events"])
    return dict(sorted(renamed.items()))
