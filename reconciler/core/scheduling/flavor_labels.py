"""The node labels and tolerations a workload's assigned flavors give its pods."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from reconciler.api import Admission, ResourceFlavor, Toleration

from .flavors import PodSetFlavors

__all__ = ["admission_node_labels", "admission_tolerations", "node_labels_for"]


def _flavor_labels(flavor_names: Iterable[str], flavors: Mapping[str, ResourceFlavor]) -> dict[str, str]:
    labels: dict[str, str] = {}
    for name in dict.fromkeys(flavor_names):
        flavor = flavors.get(name)
        if flavor is not None:
            labels.update(flavor.spec.node_labels)
    return labels


def node_labels_for(
    pod_sets: Iterable[PodSetFlavors], flavors: Mapping[str, ResourceFlavor]
) -> dict[str, dict[str, str]]:
    """Per pod set, the nodeLabels of its assigned flavors, to merge into the Job's nodeSelector.

    As Kueue does, each distinct flavor assigned to a pod set contributes its labels.
    """
    return {ps.name: _flavor_labels(ps.flavors.values(), flavors) for ps in pod_sets}


def admission_node_labels(
    admission: Admission, flavors: Mapping[str, ResourceFlavor]
) -> dict[str, dict[str, str]]:
    """The same, read back from a Workload's status.admission."""
    return {a.name: _flavor_labels(a.flavors.values(), flavors) for a in admission.pod_set_assignments}


def admission_tolerations(
    admission: Admission, flavors: Mapping[str, ResourceFlavor]
) -> dict[str, list[Toleration]]:
    """Per pod set, the tolerations of its assigned flavors (each distinct one once), for its pods."""
    out: dict[str, list[Toleration]] = {}
    for assignment in admission.pod_set_assignments:
        tolerations: list[Toleration] = []
        for name in dict.fromkeys(assignment.flavors.values()):
            flavor = flavors.get(name)
            if flavor is not None:
                tolerations.extend(t for t in flavor.spec.tolerations if t not in tolerations)
        out[assignment.name] = tolerations
    return out
