"""``managedJobsNamespaceSelector``: the namespaces whose Jobs are managed, a metav1 LabelSelector.

Checked here and returned as plain values (``reconciler.config`` makes the API's LabelSelector of
them); absent, it stays None and the runtime applies Kueue's default (every namespace but
kube-system and the controller's own)."""

from __future__ import annotations

import re

from .fields import QUALIFIED_NAME, ConfigError, check_unknown, expect

__all__ = [
    "SELECTOR_OPERATORS",
    "Requirement",
    "Selector",
    "label_key",
    "parse_label_selector",
]

SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
# (key, operator, values) of one matchExpressions entry; (matchLabels, matchExpressions).
Requirement = tuple[str, str, list[str]]
Selector = tuple[dict[str, str], list[Requirement]]
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def label_key(value: object, path: str) -> str:
    """`value` when it is a label key, else a ConfigError naming `path`."""
    return _key(value, path)


def _key(value: object, path: str) -> str:
    if not isinstance(value, str) or len(value.rpartition("/")[2]) > 63 or not QUALIFIED_NAME.match(value):
        raise ConfigError(
            f"{path}: Invalid value: {value!r}: must be a label key such as kubernetes.io/metadata.name "
            "(optional DNS prefix, '/', then at most 63 alphanumerics, '-', '_', '.')"
        )
    return value


def _value(value: object, path: str) -> str:
    if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
        raise ConfigError(
            f"{path}: Invalid value: {value!r}: must be a label value (at most 63 alphanumerics, '-', "
            "'_', '.', starting and ending with an alphanumeric), e.g. team-a"
        )
    return value


def _requirement(raw: object, path: str) -> Requirement:
    obj = expect(raw, dict, path, "an object with key, operator and values")
    check_unknown(obj, {"key", "operator", "values"}, path)
    key = _key(obj.get("key"), f"{path}.key")
    operator = obj.get("operator")
    if operator not in SELECTOR_OPERATORS:
        raise ConfigError(
            f"{path}.operator: Unsupported value: {operator!r}: supported values: "
            + ", ".join(f'"{o}"' for o in SELECTOR_OPERATORS)
        )
    values = expect(obj.get("values") or [], list, f"{path}.values", "a list of label values")
    if operator in ("In", "NotIn") and not values:
        raise ConfigError(f"{path}.values: Required value: must be specified when operator is {operator}")
    if operator in ("Exists", "DoesNotExist") and values:
        raise ConfigError(
            f"{path}.values: Forbidden: may not be specified when operator is {operator}; remove values"
        )
    checked = [_value(v, f"{path}.values[{i}]") for i, v in enumerate(values)]
    return key, str(operator), checked


def parse_label_selector(raw: object, path: str) -> Selector | None:
    """A LabelSelector ({matchLabels, matchExpressions}); None when the field is absent."""
    if raw is None:
        return None
    obj = expect(raw, dict, path, "a label selector like {matchLabels: {team: a}}")
    check_unknown(obj, {"matchLabels", "matchExpressions"}, path)
    labels = expect(obj.get("matchLabels") or {}, dict, f"{path}.matchLabels", "a map of labels to values")
    match_labels = {
        _key(k, f"{path}.matchLabels"): _value(v, f"{path}.matchLabels[{k}]") for k, v in labels.items()
    }
    exprs = expect(
        obj.get("matchExpressions") or [], list, f"{path}.matchExpressions", "a list of requirements"
    )
    requirements = [_requirement(e, f"{path}.matchExpressions[{i}]") for i, e in enumerate(exprs)]
    return match_labels, requirements
