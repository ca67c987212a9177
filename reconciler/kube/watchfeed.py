"""What an informer knows of its collection, and how lines from the API change it.

`Feed` keeps the cache (per key, the last resourceVersion and object), the resourceVersion the
next watch resumes from, and the counters; it decodes watch lines and list items into events for
the sink. The requests themselves (paged list, watch, backoff) are the `Informer`'s (watch.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Generic, Literal, Protocol, TypeVar

import msgspec

from reconciler.api import ObjectMeta
from reconciler.api.resources import Resource
from reconciler.kube.watchcache import ObjectCache
from reconciler.kube.watchwire import NOT_AN_EVENT, ErrorStatus, ObjectEvent, classify_line, meta_of

__all__ = ["EventKind", "Feed", "HasMetadata", "InformerStats", "Key", "Outcome", "WatchEvent"]

EventKind = Literal["ADDED", "MODIFIED", "DELETED", "SYNCED"]


class HasMetadata(Protocol):
    metadata: ObjectMeta


T = TypeVar("T", bound=HasMetadata)
Key = tuple[str, str]


@dataclass(frozen=True, slots=True)
class WatchEvent(Generic[T]):
    """One change, as the runtime sees it. ``obj`` is None only for SYNCED (a list finished)."""

    kind: EventKind
    resource: Resource
    key: Key
    obj: T | None


@dataclass(slots=True)
class InformerStats:
    lists: int = 0  # complete lists (the first and every relist)
    relists: int = 0  # lists after the first
    list_restarts: int = 0  # lists restarted because their continue token expired
    watches: int = 0  # watch requests made
    watch_restarts: int = 0  # watches resumed from the last resourceVersion (no relist)
    gone: int = 0  # 410s, as HTTP status or ERROR event
    inactivity_timeouts: int = 0
    errors: int = 0  # transport errors and API errors met by list or watch
    decode_errors: int = 0
    events: Counter[str] = field(default_factory=Counter)  # by type, BOOKMARK and ERROR included


class Outcome(Enum):
    ENDED = "ended"  # the server closed the stream: re-watch from the last rv
    INACTIVE = "inactive"  # nothing for inactivity_timeout: re-watch from the last rv
    GONE = "gone"  # 410: relist
    ERROR = "error"  # another ERROR event: backoff, relist


class Feed(Generic[T]):
    """The collection as the informer last saw it, changed line by line.

    ``on_progress`` is called for every line that moves the resume resourceVersion on (an object
    event or a bookmark): the informer's backoff starts afresh."""

    def __init__(
        self,
        resource: Resource,
        decode_type: type[T],
        sink: Callable[[WatchEvent[T]], None],
        *,
        stats: InformerStats,
        log: Any,
        on_progress: Callable[[], None],
    ) -> None:
        self.resource = resource
        self._decode_type = decode_type
        self._event_type: Any = ObjectEvent[decode_type]  # type: ignore[valid-type]
        self._sink = sink
        self.stats = stats
        self._log = log
        self._success = on_progress
        self.cache: ObjectCache[T] = ObjectCache()
        # The resourceVersion the next watch resumes from.
        self.rv = ""
        # A line was lost (not JSON, not an event): relist once this stream ends.
        self.relist_requested = False

    def drop_unseen(self, seen: set[Key]) -> None:
        """A complete list did not show these: DELETED, with their last known state."""
        for key, last in self.cache.drop_unseen(seen):
            self._emit("DELETED", key, last)

    def synced(self, rv: str) -> None:
        """The list is complete: SYNCED, and watches resume from `rv`."""
        self.rv = rv
        self._sink(WatchEvent("SYNCED", self.resource, ("", ""), None))

    def list_item(self, raw: msgspec.Raw, seen: set[Key]) -> None:
        try:
            obj: T = msgspec.json.decode(raw, type=self._decode_type)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            self.stats.decode_errors += 1
            meta = meta_of(raw)
            if meta is not None:
                seen.add((meta.namespace, meta.name))  # keep what we knew rather than delete it
            self._log.warning("list item does not decode; skipped", error=str(exc), name=meta and meta.name)
            return
        key = (obj.metadata.namespace, obj.metadata.name)
        seen.add(key)
        self._apply("ADDED", key, obj)

    def on_line(self, line: bytes) -> Outcome | None:
        try:
            event = msgspec.json.decode(line, type=self._event_type)
        except msgspec.ValidationError:  # (a subclass of DecodeError) JSON, but not an object event
            return self._on_other_line(line)
        except msgspec.DecodeError:
            # Not JSON: whatever object it carried is lost; a relist after this stream recovers it.
            self.stats.decode_errors += 1
            self.relist_requested = True
            self._log.warning("undecodable watch line; will relist", line=line[:200])
            return None
        kind = event.type
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            return self._on_other_line(line)
        obj: T = event.object
        self.stats.events[kind] += 1
        self.rv = obj.metadata.resource_version or self.rv
        self._success()
        key = (obj.metadata.namespace, obj.metadata.name)
        if kind == "DELETED":
            self.cache.delete(key)
            self._emit("DELETED", key, obj)
        else:
            self._apply(kind, key, obj)
        return None

    def _on_other_line(self, line: bytes) -> Outcome | None:
        """BOOKMARK, ERROR, or an object that does not fit the projection."""
        other = classify_line(line)
        if other.type == NOT_AN_EVENT:
            self.stats.decode_errors += 1
            self.relist_requested = True
            self._log.warning("watch line is not an event; will relist", line=line[:200])
            return None
        self.stats.events[other.type] += 1
        if other.type == "BOOKMARK":
            if other.resource_version:
                self.rv = other.resource_version
                self._success()
            return None
        if other.type == "ERROR":
            status = other.error or ErrorStatus()
            if status.code == 410:
                return Outcome.GONE
            self.stats.errors += 1
            self._log.warning(
                "watch ERROR event; relisting after a pause",
                code=status.code,
                reason=status.reason,
                message=status.message,
            )
            return Outcome.ERROR
        if other.type in ("ADDED", "MODIFIED", "DELETED"):
            # Valid JSON that does not fit the projection: a relist would not decode it either.
            self.stats.decode_errors += 1
            if other.resource_version:
                self.rv = other.resource_version
            self._log.warning(
                "watch object does not decode; skipped",
                event_type=other.type,
                name=other.name,
                namespace=other.namespace,
            )
            return None
        self._log.warning("unknown watch event type; skipped", type=other.type)
        return None

    def _apply(self, kind: str, key: Key, obj: T) -> None:
        """ADDED if new, MODIFIED if its resourceVersion changed, nothing if unchanged."""
        change = self.cache.put(key, obj)
        if change is not None:
            self._emit(change, key, obj)

    def _emit(self, kind: EventKind, key: Key, obj: T) -> None:
        self._sink(WatchEvent(kind, self.resource, key, obj))
