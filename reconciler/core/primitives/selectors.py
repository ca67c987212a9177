"""Label selectors, node affinity against a flavor's labels, and taints."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from reconciler.api import (
    Affinity,
    LabelSelector,
    NodeSelectorRequirement,
    PodSpecView,
    Taint,
    Toleration,
)

__all__ = [
    "PodPlacement",
    "first_untolerated_taint",
    "flavor_matches_pod_spec",
    "label_selector_matches",
    "requirement_matches",
    "taint_text",
]


def requirement_matches(key: str, operator: str, values: Sequence[str], labels: Mapping[str, str]) -> bool:
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(values) == 1:
        try:
            have, want = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > want if operator == "Gt" else have < want
    return False


def label_selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics; a nil selector matches nothing, `{}` everything."""
    if selector is None:
        return False
    for key, value in selector.match_labels.items():
        if labels.get(key) != value:
            return False
    return all(requirement_matches(e.key, e.operator, e.values, labels) for e in selector.match_expressions)


def _term_matches(terms: Sequence[NodeSelectorRequirement], labels: Mapping[str, str]) -> bool:
    return all(requirement_matches(e.key, e.operator, e.values, labels) for e in terms)


@dataclass(frozen=True, slots=True)
class PodPlacement:
    """The node constraints of a pod template: all flavor matching looks at."""

    node_selector: tuple[tuple[str, str], ...] = ()
    affinity: Affinity | None = None
    tolerations: tuple[Toleration, ...] = ()

    @classmethod
    def of(cls, spec: PodSpecView) -> PodPlacement:
        if not spec.node_selector and spec.affinity is None and not spec.tolerations:
            return _UNCONSTRAINED
        return cls(tuple(sorted(spec.node_selector.items())), spec.affinity, tuple(spec.tolerations))


_UNCONSTRAINED = PodPlacement()


def flavor_matches_pod_spec(spec: PodPlacement, flavor_labels: Mapping[str, str]) -> bool:
    """Whether a node carrying only the flavor's labels satisfies the pod's node constraints.

    Only constraints on keys the flavor defines are considered, as Kueue does:
    the flavor says nothing about other keys.
    """
    keys = flavor_labels.keys()
    for key, value in spec.node_selector:
        if key in keys and flavor_labels[key] != value:
            return False
    affinity = spec.affinity
    required = (
        affinity.node_affinity.required_during_scheduling_ignored_during_execution
        if affinity is not None and affinity.node_affinity is not None
        else None
    )
    if required is None or not required.node_selector_terms:
        return True
    filtered_terms: list[list[NodeSelectorRequirement]] = []
    for term in required.node_selector_terms:
        relevant = [e for e in term.match_expressions if e.key in keys]
        if not relevant:
            # Terms are ORed: one that says nothing about the flavor's keys matches it.
            return True
        filtered_terms.append(relevant)
    return any(_term_matches(term, flavor_labels) for term in filtered_terms)


def _tolerates(toleration: Toleration, taint: Taint) -> bool:
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    if not toleration.key and toleration.operator != "Exists":
        return False
    return toleration.value == taint.value


def taint_text(taint: Taint) -> str:
    """corev1.Taint.ToString: `key=value:effect`, or `key:effect` without a value."""
    if taint.value:
        return f"{taint.key}={taint.value}:{taint.effect}"
    return f"{taint.key}:{taint.effect}"


def first_untolerated_taint(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    for taint in taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(_tolerates(t, taint) for t in tolerations):
            return taint
    return None
