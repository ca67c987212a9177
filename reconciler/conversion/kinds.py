"""The kinds of ``kueue.x-k8s.io`` served in v1beta1 and v1beta2, each with its step up (v1beta1
to v1beta2, the stored version) and down; ``convert`` takes one object to the version asked for.
ResourceFlavor, WorkloadPriorityClass and Topology read the same in both versions."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from .fields import ConversionError, Obj
from .queues import cluster_queue_down, cluster_queue_up, cohort_up, local_queue_down, local_queue_up
from .workloads import workload_down, workload_up

__all__ = ["GROUP", "HUB", "KINDS", "SPOKE", "VERSIONS", "convert"]

GROUP = "kueue.x-k8s.io"
HUB, SPOKE = f"{GROUP}/v1beta2", f"{GROUP}/v1beta1"
VERSIONS = (SPOKE, HUB)

Step = Callable[[Obj], None]


def _same(obj: Obj) -> None:
    """Nothing differs between the versions but the apiVersion."""


KINDS: Mapping[str, tuple[Step, Step]] = {
    "ClusterQueue": (cluster_queue_up, cluster_queue_down),
    "Cohort": (cohort_up, _same),
    "LocalQueue": (local_queue_up, local_queue_down),
    "Workload": (workload_up, workload_down),
    "ResourceFlavor": (_same, _same),
    "WorkloadPriorityClass": (_same, _same),
    "Topology": (_same, _same),
}


def convert(obj: Any, desired: str) -> dict[str, Any]:
    """A copy of ``obj`` in ``desired`` (one of ``VERSIONS``); ``ConversionError`` names the field
    at fault (relative to the object)."""
    if not isinstance(obj, dict):
        raise ConversionError("", "must be an object (a Kubernetes object with apiVersion and kind)")
    kind = obj.get("kind")
    if not isinstance(kind, str) or kind not in KINDS:
        known = ", ".join(sorted(KINDS))
        raise ConversionError("kind", f"{kind!r} is not a kind served in two versions here (known: {known})")
    current = obj.get("apiVersion")
    if current not in VERSIONS:
        raise ConversionError("apiVersion", f"{current!r} is not one of {', '.join(VERSIONS)}")
    converted: dict[str, Any] = copy.deepcopy(obj)
    if current != desired:
        up, down = KINDS[kind]
        (up if desired == HUB else down)(converted)
    converted["apiVersion"] = desired
    return converted
