"""The watch protocol on the wire: event lines, list pages, and lines that carry no object.

Only what the informer needs is decoded; an object event is decoded by the
informer itself, straight into the caller's projection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

import msgspec

__all__ = ["NOT_AN_EVENT", "ErrorStatus", "ListPage", "ObjectEvent", "OtherLine", "classify_line", "meta_of"]

T = TypeVar("T")
# The type of a line that is not a watch event at all.
NOT_AN_EVENT = ""


class ObjectEvent(msgspec.Struct, Generic[T]):
    type: str
    object: T


class _Head(msgspec.Struct):
    type: str
    object: msgspec.Raw = msgspec.Raw(b"null")


class Meta(msgspec.Struct, rename="camel"):
    name: str = ""
    namespace: str = ""
    resource_version: str = ""


class _MetaOnly(msgspec.Struct):
    metadata: Meta = msgspec.field(default_factory=Meta)


class ErrorStatus(msgspec.Struct):
    code: int = 0
    reason: str = ""
    message: str = ""


class _ListMeta(msgspec.Struct, rename="camel"):
    resource_version: str = ""
    continue_: str = msgspec.field(default="", name="continue")


class ListPage(msgspec.Struct):
    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    items: list[msgspec.Raw] | None = None


def meta_of(raw: msgspec.Raw) -> Meta | None:
    """Name, namespace and resourceVersion of a raw object, None when it has none readable."""
    try:
        return msgspec.json.decode(raw, type=_MetaOnly).metadata
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


@dataclass(frozen=True, slots=True)
class OtherLine:
    """A watch line that is not an object event the projection decodes."""

    type: str  # BOOKMARK, ERROR, an object event type, anything else, or NOT_AN_EVENT
    resource_version: str = ""
    name: str | None = None
    namespace: str | None = None
    error: ErrorStatus | None = None


def classify_line(line: bytes) -> OtherLine:
    try:
        head = msgspec.json.decode(line, type=_Head)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return OtherLine(NOT_AN_EVENT)
    if head.type == "ERROR":
        try:
            status = msgspec.json.decode(head.object, type=ErrorStatus)
        except (msgspec.DecodeError, msgspec.ValidationError):
            status = ErrorStatus()
        return OtherLine("ERROR", error=status)
    meta = meta_of(head.object)
    if meta is None:
        return OtherLine(head.type)
    return OtherLine(head.type, meta.resource_version, meta.name, meta.namespace)
