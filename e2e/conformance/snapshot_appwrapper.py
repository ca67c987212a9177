"""The part of a checkpoint for scenarios with the AppWrapper framework (no AppWrapper controller
running: what is compared is what Kueue, or the controller, writes on an AppWrapper).

On top of snapshot.py's state (unchanged, so the other recordings keep their inputs hash): each
AppWrapper's `spec.suspend` and, per pod set of each component, the `podSetInfos` entry it was
started with (node selector, tolerations, labels, annotations, scheduling gates), with the
Workload's name in `kueue.x-k8s.io/workload` (its hash made `<hash>`) as a field of its own,
`workloadAnnotation`, as snapshot_kubeflow.py does; and the Events Kueue writes on an AppWrapper
(CreatedWorkload, Started, Suspended, Stopped, ...).
"""

from __future__ import annotations

from typing import Any

from e2e.conformance.snapshot import take_snapshot
from e2e.conformance.snapshot_kubeflow import _WORKLOAD_HASH, JOB_EVENT_REASONS, WORKLOAD_ANNOTATION
from e2e.support.appwrapper import APPWRAPPER_API, APPWRAPPER_FRAMEWORK
from e2e.support.upstream import enables
from e2e.testbed import KubeClient, api_path

__all__ = ["enables_appwrapper", "take_appwrapper_snapshot"]


def enables_appwrapper(configuration: Any) -> bool:
    return enables(configuration, APPWRAPPER_FRAMEWORK)


def _info(info: dict[str, Any]) -> dict[str, Any]:
    annotations = dict(info.get("annotations") or {})
    workload = annotations.pop(WORKLOAD_ANNOTATION, None)
    return {
        "nodeSelector": info.get("nodeSelector") or {},
        "tolerations": info.get("tolerations") or [],
        "labels": info.get("labels") or {},
        "annotations": annotations,
        "schedulingGates": info.get("schedulingGates") or [],
        "workloadAnnotation": None if workload is None else _WORKLOAD_HASH.sub("-<hash>", workload),
    }


async def take_appwrapper_snapshot(kube: KubeClient, namespaces: tuple[str, ...]) -> dict[str, Any]:
    """snapshot.py's state with the AppWrappers and Kueue's Events on them."""
    flat = await take_snapshot(kube, namespaces)
    events: set[str] = set()
    for ns in namespaces:
        for aw in (await kube.get(api_path(APPWRAPPER_API, "appwrappers", ns)))["items"]:
            name = f"AppWrapper[{ns}/{aw['metadata']['name']}]"
            spec = aw.get("spec") or {}
            flat[f"{name}.suspend"] = spec.get("suspend", False)
            for i, component in enumerate(spec.get("components") or []):
                infos = component.get("podSetInfos") or []
                flat[f"{name}.components[{i}].podSetInfos"] = len(infos)
                for j, info in enumerate(infos):
                    flat.update(
                        {f"{name}.components[{i}].podSetInfos[{j}].{k}": v for k, v in _info(info).items()}
                    )
        for ev in (await kube.get(api_path("v1", "events", ns)))["items"]:
            involved = ev.get("involvedObject") or {}
            if involved.get("kind") == "AppWrapper" and ev.get("reason") in JOB_EVENT_REASONS:
                events.add(f"AppWrapper[{involved.get('name', '')}] {ev.get('type')} {ev.get('reason')}")
    flat["Events"] = sorted({*flat.get("Events", []), *events})
    return flat
