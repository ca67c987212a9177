"""AppWrapper (workload.codeflare.dev/v1beta2) behind the integration protocol, as Kueue v0.18.1's
``workload.codeflare.dev/appwrapper`` framework treats it.

Pod sets: one per pod set of each component (`podsets`). Starting sets ``spec.suspend: false`` and
gives each component's pod sets their start as ``podSetInfos`` (node selector, tolerations,
labels, annotations, scheduling gates), which the AppWrapper controller merges into the pod
templates of the objects it creates; stopping sets ``spec.suspend: true`` (the AppWrapper
controller then deletes its components); restoring clears every component's ``podSetInfos``
(Kueue's RestorePodSetsInfo for an AppWrapper). As Kueue reads an AppWrapper's status: it is
active while its ``QuotaReserved`` condition is true, its pods ready when its ``PodsReady``
condition is, finished when its phase is ``Succeeded``, or ``Failed`` once its resources are no
longer deployed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from reconciler.api import PodSet
from reconciler.api.appwrapper import APPWRAPPERS, AppWrapper, component
from reconciler.api.resources import Resource

from ..base import Outcome, Patch, PodSetStart, SuspendableJob
from .podsets import aw_pod_sets, component_pod_sets

__all__ = ["APPWRAPPER", "AppWrapperIntegration", "pod_set_infos"]

SUCCEEDED = "Succeeded"
FAILED = "Failed"


def _info(start: PodSetStart | None) -> dict[str, Any]:
    if start is None:
        return {}
    info: dict[str, Any] = {
        "annotations": dict(start.annotations),
        "labels": dict(start.labels),
        "nodeSelector": dict(start.node_selector),
        "tolerations": msgspec.to_builtins(list(start.tolerations)),
        "schedulingGates": [{"name": g} for g in start.scheduling_gates],
    }
    return {k: v for k, v in info.items() if v}


def pod_set_infos(obj: AppWrapper, starts: Sequence[PodSetStart]) -> list[list[dict[str, Any]]]:
    """Per component, the ``podSetInfos`` of its pod sets, the starts taken in pod-set order
    (as AppWrapper's SetPodSetInfos hands them out)."""
    by_name = {s.name: s for s in starts}
    names = iter(ps.name for ps in aw_pod_sets(obj))
    out: list[list[dict[str, Any]]] = [[] for _ in obj.spec.components]
    for i, pod_sets in component_pod_sets(obj):
        out[i] = [_info(by_name.get(next(names, ""))) for _ in pod_sets]
    return out


def _components(obj: AppWrapper) -> list[dict[str, Any]]:
    return [msgspec.json.decode(raw) for raw in obj.spec.components]


class AppWrapperIntegration(SuspendableJob):
    """Kueue's `workload.codeflare.dev/appwrapper` framework."""

    framework: str = "workload.codeflare.dev/appwrapper"
    kind: str = "AppWrapper"
    api_version: str = "workload.codeflare.dev/v1beta2"
    resource: Resource = APPWRAPPERS
    projection: type[Any] = AppWrapper

    def pod_sets(self, obj: AppWrapper) -> list[PodSet]:
        return aw_pod_sets(obj)

    def is_suspended(self, obj: AppWrapper) -> bool:
        return obj.spec.suspend

    def start_patch(self, obj: AppWrapper, starts: Sequence[PodSetStart]) -> bytes:
        components = _components(obj)
        for comp, infos in zip(components, pod_set_infos(obj, starts), strict=True):
            comp["podSetInfos"] = infos
        return msgspec.json.encode({"spec": {"suspend": False, "components": components}})

    def suspend_patch(self, obj: AppWrapper) -> bytes:
        return b'{"spec":{"suspend":true}}'

    def restore_pending(self, obj: AppWrapper) -> bool:
        return any(component(raw).pod_set_infos for raw in obj.spec.components)

    def restore_patch(self, obj: AppWrapper, recorded: Sequence[PodSet]) -> Patch | None:
        if not self.restore_pending(obj):
            return None
        components = _components(obj)
        for comp in components:
            comp.pop("podSetInfos", None)
        return Patch(msgspec.json.encode({"spec": {"components": components}}))

    def is_active(self, obj: AppWrapper) -> bool:
        return obj.status.condition_true("QuotaReserved")

    def pods_ready(self, obj: AppWrapper) -> bool:
        return obj.status.condition_true("PodsReady")

    def pods_ready_count(self, obj: AppWrapper) -> int:
        """Every pod of the AppWrapper once its PodsReady condition is true (Kueue's PodsReady), else 0."""
        return sum(ps.count or 0 for ps in self.pod_sets(obj)) if self.pods_ready(obj) else 0

    def finished(self, obj: AppWrapper) -> Outcome | None:
        if obj.status.phase == SUCCEEDED:
            return Outcome(True, "AppWrapper finished successfully")
        if obj.status.phase == FAILED and not obj.status.condition_true("ResourcesDeployed"):
            return Outcome(False, "AppWrapper failed")
        return None

    def reclaimable_pods(self, obj: AppWrapper) -> Mapping[str, int]:
        return {}

    def owns(self, obj: AppWrapper, owner_kind: str, owner_api_version: str, owner_name: str) -> bool:
        return (owner_kind, owner_api_version, owner_name) == (self.kind, self.api_version, obj.metadata.name)


APPWRAPPER = AppWrapperIntegration()
