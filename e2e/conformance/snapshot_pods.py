"""The pod framework's part of a checkpoint: for scenarios whose Configuration enables `pod`.

On top of snapshot.py's state (unchanged, so the recordings of the scenarios without pods keep
their inputs hash), per pod of the scenario's namespaces: its scheduling gates, Kueue's managed
label, its finalizers, `nodeSelector` and phase; and the Events the managers wrote on pods
(the kube-scheduler's and the node simulator's kubelet Events are left out: the test-bed's,
not the managers').

A pod group's Workload has every pod of the group as an owner, in an order neither manager
promises, so snapshot.py's name for it (its first owner, `Pod/NAME`) is replaced by
`PodGroup/GROUP` (Kueue names the Workload after the group and marks it
`kueue.x-k8s.io/is-group-workload: "true"`) in field names, messages and Events. A single pod's
Workload keeps snapshot.py's stable name, `Pod/NAME`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from e2e.conformance.snapshot import KUEUE, Normalizer, _owner, take_snapshot
from e2e.testbed import KubeClient, api_path

Obj = dict[str, Any]
POD_FRAMEWORK = "pod"
GROUP_WORKLOAD_ANNOTATION = "kueue.x-k8s.io/is-group-workload"
MANAGED_LABEL = "kueue.x-k8s.io/managed"
# Who writes Events on pods on the test-bed besides the managers.
TESTBED_COMPONENTS = frozenset({"default-scheduler", "kubelet"})


def enables_pods(configuration: Path) -> bool:
    """Whether a Configuration file names the pod framework in integrations.frameworks."""
    doc = yaml.safe_load(configuration.read_text()) or {}
    return POD_FRAMEWORK in ((doc.get("integrations") or {}).get("frameworks") or [])


def group_names(workloads: list[Obj]) -> dict[str, str]:
    """snapshot.py's name of each pod group's Workload (`Pod/FIRST OWNER`) -> `PodGroup/NAME`."""
    out: dict[str, str] = {}
    for wl in workloads:
        annotations = wl["metadata"].get("annotations") or {}
        if annotations.get(GROUP_WORKLOAD_ANNOTATION) == "true":
            out[_owner(wl)] = f"PodGroup/{wl['metadata']['name']}"
    return out


def _renamed_text(value: str, renames: dict[str, str]) -> str:
    for old, new in renames.items():
        value = value.replace(f"<workload of {old}>", f"<workload of {new}>")
        value = value.replace(f"Workload[{old}]", f"Workload[{new}]")
    return value


def _renamed(value: Any, renames: dict[str, str]) -> Any:
    if isinstance(value, str):
        return _renamed_text(value, renames)
    if isinstance(value, list):
        return [_renamed(v, renames) for v in value]
    if isinstance(value, dict):
        return {k: _renamed(v, renames) for k, v in value.items()}
    return value


def rename_groups(flat: dict[str, Any], renames: dict[str, str]) -> dict[str, Any]:
    """`flat` with each group Workload's name replaced, in field names (`Workload[NS/OLD]...`)
    and in every message and Event."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        for old, new in renames.items():
            if key.startswith("Workload[") and key.split("]", 1)[0].endswith(f"/{old}"):
                key = key.replace(f"/{old}]", f"/{new}]", 1)
        out[key] = _renamed(value, renames)
    if "Events" in out:
        out["Events"] = sorted(out["Events"])
    return out


def pod_fields(pod: Obj) -> dict[str, Any]:
    spec, meta = pod.get("spec") or {}, pod["metadata"]
    return {
        "schedulingGates": [g["name"] for g in spec.get("schedulingGates") or []],
        "managed": (meta.get("labels") or {}).get(MANAGED_LABEL),
        "finalizers": list(meta.get("finalizers") or []),
        "nodeSelector": spec.get("nodeSelector") or {},
        "phase": (pod.get("status") or {}).get("phase"),
    }


def pod_events(events: list[Obj], norm: Normalizer) -> set[str]:
    """`Pod[NAME] TYPE REASON: MESSAGE` of each Event a manager wrote on a pod."""
    out: set[str] = set()
    for ev in events:
        involved = ev.get("involvedObject") or {}
        component = ev.get("reportingComponent") or (ev.get("source") or {}).get("component", "")
        if involved.get("kind") != "Pod" or component in TESTBED_COMPONENTS:
            continue
        message = norm.text(ev.get("message", ""))
        out.add(f"Pod[{involved.get('name', '')}] {ev.get('type')} {ev.get('reason')}: {message}")
    return out


async def take_pod_snapshot(kube: KubeClient, namespaces: tuple[str, ...]) -> dict[str, Any]:
    """snapshot.py's state, group Workloads renamed, plus the pods and the managers' Events on them."""
    flat = await take_snapshot(kube, namespaces)
    workloads: list[Obj] = []
    pods: list[Obj] = []
    events: list[Obj] = []
    for ns in namespaces:
        workloads += (await kube.get(api_path(KUEUE, "workloads", ns)))["items"]
        pods += (await kube.get(api_path("v1", "pods", ns)))["items"]
        events += (await kube.get(api_path("v1", "events", ns)))["items"]
    for pod in pods:
        prefix = f"Pod[{pod['metadata']['namespace']}/{pod['metadata']['name']}]"
        for key, value in pod_fields(pod).items():
            flat[f"{prefix}.{key}"] = value
    flat["Events"] = sorted({*flat.get("Events", []), *pod_events(events, Normalizer(workloads, [], events))})
    return rename_groups(flat, group_names(workloads))
