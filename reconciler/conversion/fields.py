"""The shared steps of a conversion: reading a nested field of a decoded object (a JSON mapping)
with its path named when it has the wrong type, and moving a field to a new name."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

__all__ = ["ConversionError", "Obj", "items_of", "list_at", "mapping_at", "rename"]

Obj = MutableMapping[str, Any]


class ConversionError(ValueError):
    """An object that cannot be converted; ``field`` is the path of the value at fault."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    return {dict: "object", list: "array", str: "string", bool: "boolean"}.get(type(value), "number")


def mapping_at(parent: Obj, key: str, path: str) -> Obj | None:
    """``parent[key]`` when it is an object, None when absent or null; anything else is named."""
    value = parent.get(key)
    if value is None:
        return None
    if not isinstance(value, MutableMapping):
        raise ConversionError(f"{path}.{key}" if path else key, f"must be an object, not {_type_name(value)}")
    return value


def list_at(parent: Obj, key: str, path: str) -> list[Any]:
    """``parent[key]`` when it is an array, [] when absent or null; anything else is named."""
    value = parent.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConversionError(f"{path}.{key}" if path else key, f"must be an array, not {_type_name(value)}")
    return value


def items_of(parent: Obj, key: str, path: str) -> list[tuple[str, Obj]]:
    """The objects of the array ``parent[key]`` with their paths; an item not an object is named."""
    found: list[tuple[str, Obj]] = []
    for i, item in enumerate(list_at(parent, key, path)):
        where = f"{path}.{key}[{i}]"
        if not isinstance(item, MutableMapping):
            raise ConversionError(where, f"must be an object, not {_type_name(item)}")
        found.append((where, item))
    return found


def rename(parent: Obj, old: str, new: str) -> None:
    """Move ``parent[old]`` to ``parent[new]`` (the new name wins when both are there)."""
    if old in parent:
        value = parent.pop(old)
        parent.setdefault(new, value)
