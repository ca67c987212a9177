"""Names, label keys and values, and quantities, checked with Kubernetes' own wording."""

from __future__ import annotations

import re

from reconciler.api import LabelSelector
from reconciler.core.primitives.quantity import QuantityError, parse_quantity

from .fielderrors import NEGATIVE, FieldError, Path, forbidden, invalid, not_supported, required

__all__ = [
    "dns1123_label",
    "dns1123_subdomain",
    "label_selector",
    "label_value",
    "non_negative_quantity",
    "qualified_name",
]

_QNAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QNAME = re.compile(f"^{_QNAME_FMT}$")
_QNAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)
_LABEL_FMT = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_LABEL = re.compile(f"^{_LABEL_FMT}$")
_SUBDOMAIN_FMT = _LABEL_FMT + r"(\." + _LABEL_FMT + ")*"
_SUBDOMAIN = re.compile(f"^{_SUBDOMAIN_FMT}$")
_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
QUANTITY_MSG = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


def _regex_error(message: str, fmt: str, *examples: str) -> str:
    """As apimachinery words it: each example followed by ", " and joined by " or ", so two
    spaces stand before each "or" (Kueue's answers carry them)."""
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


def _max_len(limit: int) -> str:
    return f"must be no more than {limit} characters"


def dns1123_subdomain_problems(value: str) -> list[str]:
    problems = []
    if len(value) > 253:
        problems.append(_max_len(253))
    if not _SUBDOMAIN.match(value):
        problems.append(
            _regex_error(
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
                "or '.', and must start and end with an alphanumeric character",
                _SUBDOMAIN_FMT,
                "example.com",
            )
        )
    return problems


def dns1123_subdomain(path: str, value: str) -> list[FieldError]:
    return [invalid(path, value, p) for p in dns1123_subdomain_problems(value)]


def dns1123_label(path: str, value: str) -> list[FieldError]:
    problems = []
    if len(value) > 63:
        problems.append(_max_len(63))
    if not _LABEL.match(value):
        problems.append(
            _regex_error(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
                "and must start and end with an alphanumeric character",
                _LABEL_FMT,
                "my-name",
                "123-abc",
            )
        )
    return [invalid(path, value, p) for p in problems]


def qualified_name(path: str, value: str) -> list[FieldError]:
    """A label key or resource name: an optional DNS subdomain prefix and '/', then a name part."""
    problems: list[str] = []
    prefix, slash, name = value.rpartition("/")
    if slash and "/" in prefix:
        problems.append(
            "a qualified name "
            + _regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        )
        return [invalid(path, value, p) for p in problems]
    if slash:
        if not prefix:
            problems.append("prefix part must be non-empty")
        else:
            problems += ["prefix part " + p for p in dns1123_subdomain_problems(prefix)]
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > 63:
        problems.append("name part " + _max_len(63))
    elif not _QNAME.match(name):
        problems.append("name part " + _regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name", "123-abc"))
    return [invalid(path, value, p) for p in problems]


def label_value(path: str, value: str) -> list[FieldError]:
    problems = []
    if len(value) > 63:
        problems.append(_max_len(63))
    if value and not _QNAME.match(value):
        problems.append(_regex_error(_VALUE_MSG, f"({_QNAME_FMT})?", "MyValue", "my_value", "12345"))
    return [invalid(path, value, p) for p in problems]


def non_negative_quantity(path: str, value: object) -> list[FieldError]:
    """A quantity that parses and is not below zero."""
    try:
        if not isinstance(value, str | int) or isinstance(value, bool):
            raise QuantityError(str(value))
        quantity = parse_quantity(value)
    except QuantityError:
        return [invalid(path, value, QUANTITY_MSG)]
    if quantity < 0:
        return [invalid(path, str(value), NEGATIVE)]
    return []


_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def label_selector(path: Path, selector: LabelSelector | None) -> list[FieldError]:
    """A metav1 LabelSelector: keys and values as labels, values only with In and NotIn."""
    if selector is None:
        return []
    errors: list[FieldError] = []
    for i, requirement in enumerate(selector.match_expressions):
        where = path.child("matchExpressions").item(i)
        errors += qualified_name(where.child("key"), requirement.key)
        if requirement.operator in ("In", "NotIn") and not requirement.values:
            errors.append(
                required(where.child("values"), "must be specified when `operator` is 'In' or 'NotIn'")
            )
        elif requirement.operator in ("Exists", "DoesNotExist") and requirement.values:
            errors.append(
                forbidden(
                    where.child("values"),
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                )
            )
        elif requirement.operator not in _SELECTOR_OPERATORS:
            errors.append(not_supported(where.child("operator"), requirement.operator, _SELECTOR_OPERATORS))
    for key, value in selector.match_labels.items():
        errors += qualified_name(path.child("matchLabels"), key)
        errors += label_value(path.child("matchLabels"), value)
    return errors
