"""What an informer last reported per object: what a relist is diffed against."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, Literal, Protocol, TypeVar

from reconciler.api import ObjectMeta

__all__ = ["ObjectCache"]

Key = tuple[str, str]


class _HasMetadata(Protocol):
    metadata: ObjectMeta


T = TypeVar("T", bound=_HasMetadata)


class ObjectCache(Generic[T]):
    """Per key, the last resourceVersion and object reported."""

    def __init__(self) -> None:
        self._known: dict[Key, tuple[str, T]] = {}

    def __len__(self) -> int:
        return len(self._known)

    def put(self, key: Key, obj: T) -> Literal["ADDED", "MODIFIED"] | None:
        """Remember an object; says how it changed (None: the same resourceVersion again)."""
        rv = obj.metadata.resource_version
        known = self._known.get(key)
        if known is not None and known[0] == rv:
            return None
        self._known[key] = (rv, obj)
        return "ADDED" if known is None else "MODIFIED"

    def delete(self, key: Key) -> None:
        self._known.pop(key, None)

    def drop_unseen(self, seen: set[Key]) -> Iterator[tuple[Key, T]]:
        """After a relist: forget, and yield with their last state, the objects it no longer shows."""
        for key in [k for k in self._known if k not in seen]:
            _, last = self._known.pop(key)
            yield key, last
