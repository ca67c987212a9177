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

__all__ = [
    "GROUP_NAME",
    "PREFERRED",
    "REQUIRED",
    "SLICE_CONSTRAINTS",
    "SLICE_REQUIRED",
    "SLICE_SIZE",
    "TOPOLOGY_ANNOTATIONS",
    "UNCONSTRAINED",
    "TopologyRequest",
    "topology_annotations",
]

REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
SLICE_CONSTRAINTS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
# The group of pod sets placed together (a leader and its workers).
GROUP_NAME = "kueue.x-k8s.io/podset-group-name"
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
