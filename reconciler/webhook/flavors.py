"""ResourceFlavors at the door: node labels, taints and tolerations as Kubernetes allows them.

Kueue's rules: node labels are labels; taints have label-key keys and label values, are unique by
key and effect, and have a supported effect; tolerations have label-key keys, an ``Exists``
operator when the key is empty, no value with ``Exists``, and ``tolerationSeconds`` only with
``NoExecute``. ``spec.topologyName`` (topology-aware scheduling) is a DNS subdomain of at most
253 characters and needs at least one node label (the rules of Kueue's CRD).
"""

from __future__ import annotations

from reconciler.admission.fielderrors import FieldError, Path, duplicate, invalid, not_supported, required
from reconciler.admission.names import dns1123_subdomain, label_value, qualified_name
from reconciler.api import ResourceFlavor

__all__ = ["validate_resource_flavor"]

_SPEC = Path("spec")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
OPERATORS = ("Equal", "Exists")
NODE_LABELS_FOR_TOPOLOGY = "at least one nodeLabel is required when topology is set"


def validate_resource_flavor(flavor: ResourceFlavor) -> list[FieldError]:
    spec = flavor.spec
    errors: list[FieldError] = []
    if spec.topology_name is not None:
        errors += dns1123_subdomain(_SPEC.child("topologyName"), spec.topology_name)
        if not spec.node_labels:
            errors.append(required(_SPEC.child("nodeLabels"), NODE_LABELS_FOR_TOPOLOGY))
    labels = _SPEC.child("nodeLabels")
    for key, value in spec.node_labels.items():
        errors += qualified_name(labels, key)
        errors += label_value(labels, value)
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(spec.node_taints):
        path = _SPEC.child("nodeTaints").item(i)
        errors += qualified_name(path.child("key"), taint.key)
        errors += label_value(path.child("value"), taint.value)
        if taint.effect not in TAINT_EFFECTS:
            errors.append(not_supported(path.child("effect"), taint.effect, TAINT_EFFECTS))
        if (taint.key, taint.effect) in seen:
            shown = {"key": taint.key, "value": taint.value, "effect": taint.effect}
            errors.append(duplicate(path, shown, "taints must be unique by key and effect pair"))
        seen.add((taint.key, taint.effect))
    for i, toleration in enumerate(spec.tolerations):
        path = _SPEC.child("tolerations").item(i)
        if toleration.key:
            errors += qualified_name(path.child("key"), toleration.key)
        elif toleration.operator != "Exists":
            errors.append(
                invalid(
                    path.child("operator"),
                    toleration.operator,
                    "operator must be Exists when 'key' is empty, which means "
                    "'match all values and all keys'",
                )
            )
        if toleration.operator and toleration.operator not in OPERATORS:
            errors.append(not_supported(path.child("operator"), toleration.operator, OPERATORS))
        if toleration.operator == "Exists" and toleration.value:
            errors.append(
                invalid(
                    path.child("value"), toleration.value, "a value must be empty when 'operator' is 'Exists'"
                )
            )
        if toleration.effect and toleration.effect not in TAINT_EFFECTS:
            errors.append(not_supported(path.child("effect"), toleration.effect, TAINT_EFFECTS))
        if toleration.toleration_seconds is not None and toleration.effect != "NoExecute":
            errors.append(
                invalid(
                    path.child("effect"),
                    toleration.effect,
                    "effect must be 'NoExecute' when 'tolerationSeconds' is set",
                )
            )
    return errors
