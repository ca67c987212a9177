"""Field errors worded as Kubernetes (and so Kueue) words them, and their aggregate message.

``spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: Invalid value: "-1": must be greater
than or equal to 0``: the path, the kind of error, the value when there is one, and the detail.
Several errors read ``[first, second]``, as apimachinery's aggregate does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "IMMUTABLE",
    "NEGATIVE",
    "FieldError",
    "Path",
    "aggregate",
    "duplicate",
    "forbidden",
    "invalid",
    "invalid_omitted",
    "not_found",
    "not_supported",
    "required",
    "shape_changes",
    "too_many",
]

IMMUTABLE = "field is immutable"
NEGATIVE = "must be greater than or equal to 0"

ErrorType = Literal[
    "Invalid value",
    "Required value",
    "Duplicate value",
    "Unsupported value",
    "Not found",
    "Forbidden",
    "Too many",
]
_WITHOUT_VALUE = frozenset({"Required value", "Forbidden"})
_REASONS: dict[str, str] = {
    "Invalid value": "FieldValueInvalid",
    "Required value": "FieldValueRequired",
    "Duplicate value": "FieldValueDuplicate",
    "Unsupported value": "FieldValueNotSupported",
    "Not found": "FieldValueNotFound",
    "Forbidden": "FieldValueForbidden",
    "Too many": "FieldValueTooMany",
}


class Path(str):
    """A field path grown as apimachinery grows it: ``.child(name)``, ``.item(i)`` → ``[i]``, ``.key(k)``."""

    __slots__ = ()

    def child(self, *names: str) -> Path:
        return Path(".".join([self, *names]) if self else ".".join(names))

    def item(self, i: int) -> Path:
        return Path(f"{self}[{i}]")

    def key(self, key: str) -> Path:
        return Path(f"{self}[{key}]")


def _render(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


@dataclass(frozen=True, slots=True)
class FieldError:
    field: str
    type: ErrorType
    detail: str = ""
    value: object = None
    has_value: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "field", str(self.field))  # a Path is a str, but a plain one travels

    def body(self) -> str:
        text: str = self.type
        if self.has_value and self.type not in _WITHOUT_VALUE:
            text += f": {_render(self.value)}"
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"

    @property
    def reason(self) -> str:
        """The cause's reason in a Status, as apimachinery names it (FieldValueInvalid, ...)."""
        return _REASONS[self.type]


def invalid(path: str, value: object, detail: str) -> FieldError:
    """`path: Invalid value: <the value given>: detail`; give the value as decoded (int, str, list...)."""
    return FieldError(path, "Invalid value", detail, value, True)


def invalid_omitted(path: str, detail: str) -> FieldError:
    """`path: Invalid value: detail`, for a value that cannot be shown (apimachinery's omitted value)."""
    return FieldError(path, "Invalid value", detail)


def required(path: str, detail: str = "") -> FieldError:
    return FieldError(path, "Required value", detail)


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError(path, "Forbidden", detail)


def duplicate(path: str, value: object, detail: str = "") -> FieldError:
    return FieldError(path, "Duplicate value", detail, value, True)


def not_found(path: str, value: object) -> FieldError:
    return FieldError(path, "Not found", "", value, True)


def too_many(path: str, count: int, limit: int) -> FieldError:
    return FieldError(path, "Too many", f"must have at most {limit} items", count, True)


def not_supported(path: str, value: object, supported: Sequence[str]) -> FieldError:
    detail = "supported values: " + ", ".join(json.dumps(s) for s in supported)
    return FieldError(path, "Unsupported value", detail, value, True)


def aggregate(errors: Iterable[FieldError]) -> str:
    """One error as itself, several as ``[a, b]`` (duplicates dropped, first order kept)."""
    messages = list(dict.fromkeys(str(e) for e in errors))
    if len(messages) == 1:
        return messages[0]
    return "[" + ", ".join(messages) + "]"


def shape_changes(new: Any, old: Any, path: Path) -> list[FieldError]:
    """Each part of a pod spec's shape (what decides its pods' quota) that changed, with its new
    value, as Kueue names them: a container list of another length as a whole, a container's
    requests and ports on their own."""
    errors: list[FieldError] = []
    for name in sorted(set(new) | set(old)):
        a, b, where = new.get(name), old.get(name), path.child(name)
        if name == "resources" and isinstance(a, dict) and isinstance(b, dict):  # a container's
            errors += shape_changes(a, b, where)
        elif isinstance(a, list) and isinstance(b, list) and name in ("containers", "initContainers"):
            if len(a) != len(b):
                errors.append(invalid(where, a, IMMUTABLE))
                continue
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                errors += shape_changes(x, y, where.item(i))
        elif a != b:
            errors.append(invalid(where, a, IMMUTABLE))
    return errors
