"""The topology request of a pod set, read from its pod template's annotations as Kueue reads them.

Kueue v0.18.1 (``apis/kueue/v1beta2/topology_types.go``): ``kueue.x-k8s.io/podset-required-topology``
(all pods in one domain of that level), ``-preferred-topology`` (as compact as possible, from that
level up), ``-unconstrained-topology: "true"`` (anywhere there is room), and the slice annotations
(``-slice-required-topology`` with ``-slice-size``; the multi-layer ``-slice-required-topology-constraints``)
and ``kueue.x-k8s.io/podset-group-name`` (pod sets placed together).
The Workload carries the same request as ``spec.podSets[].topologyRequest``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from reconciler.api import PodSet

__all__ = [
    "GROUP_NAME",
    "PREFERRED",
    "REQUIRED",
    "SLICE_CONSTRAINTS",
    "SLICE_REQUIRED",
    "SLICE_SIZE",
    "TOPOLOGY_ANNOTATIONS",
    "TOPOLOGY_UNSUPPORTED",
    "UNCONSTRAINED",
    "TopologyRequest",
    "topology_annotations",
    "topology_request",
]

REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
SLICE_CONSTRAINTS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
# The group of pod sets placed together (a leader and its workers).
GROUP_NAME = "kueue.x-k8s.io/podset-group-name"
# What the core's topology placement does not do: refused by name on a Workload that asks for it.
TOPOLOGY_UNSUPPORTED = "not supported by this controller's topology-aware scheduling"
TOPOLOGY_ANNOTATIONS = (
    REQUIRED,
    PREFERRED,
    UNCONSTRAINED,
    SLICE_REQUIRED,
    SLICE_SIZE,
    SLICE_CONSTRAINTS,
    GROUP_NAME,
)


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    """What a pod set asks of the topology: a level it must fit in (`required`), a level it
    prefers (`preferred`), or no constraint (`unconstrained`); slices: groups of `slice_size`
    pods each within one domain of `slice_level`."""

    required: str | None = None
    preferred: str | None = None
    unconstrained: bool = False
    slice_level: str | None = None
    slice_size: int | None = None

    @property
    def level(self) -> str | None:
        return self.required or self.preferred


def topology_annotations(annotations: Mapping[str, str]) -> list[str]:
    """The topology annotations a pod template carries, in Kueue's order."""
    return [key for key in TOPOLOGY_ANNOTATIONS if key in annotations]


def topology_request(
    index: int, pod_set: PodSet, annotations: Mapping[str, str]
) -> TopologyRequest | str | None:
    """The pod set's request: ``spec.podSets[].topologyRequest`` when the Workload has it, else the
    pod template's annotations; slices and pod-set groups refused by name (the message)."""
    path = f"spec.podSets[{index}]"
    asked = pod_set.topology_request
    if asked is not None:
        unsupported = [
            name
            for name, value in (
                ("podSetSliceRequiredTopology", asked.pod_set_slice_required_topology),
                ("podSetSliceSize", asked.pod_set_slice_size),
                ("podSetGroupName", asked.pod_set_group_name),
            )
            if value is not None
        ]
        if unsupported:
            return f"{path}.topologyRequest.{unsupported[0]}: Forbidden: {TOPOLOGY_UNSUPPORTED}"
        if asked.required is None and asked.preferred is None and not asked.unconstrained:
            return None
        return TopologyRequest(asked.required, asked.preferred, bool(asked.unconstrained))
    for name in (SLICE_REQUIRED, SLICE_SIZE, SLICE_CONSTRAINTS, GROUP_NAME):
        if name in annotations:
            return f"{path}.template.metadata.annotations[{name}]: Forbidden: {TOPOLOGY_UNSUPPORTED}"
    required, preferred = annotations.get(REQUIRED), annotations.get(PREFERRED)
    unconstrained = annotations.get(UNCONSTRAINED) == "true"
    if required is None and preferred is None and not unconstrained:
        return None
    return TopologyRequest(required, preferred, unconstrained)
