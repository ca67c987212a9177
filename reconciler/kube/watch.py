"""The informer: a paged list, then watches from the list's resourceVersion, forever.

Three nested layers, each handling one class of failure:

- ``_watch_once``: one watch request; ends when the server closes the stream,
  the inactivity deadline passes, or the connection drops.
- ``_list_then_watch``: one paged list (diffed against the cache, then
  SYNCED), then watch after watch from the last resourceVersion seen (events
  and bookmarks alike); returns when a relist is needed (410 in either form,
  an ERROR event, an undecodable line).
- ``run``: ``_list_then_watch`` forever, with jittered exponential backoff on
  every failure; a successful event resets it.

Events are decoded straight into the caller's msgspec projection. The cache
keeps, per key, the last resourceVersion and object, which is what a relist
diffs against: objects deleted while no watch was open come out as DELETED
with their last known state, unchanged objects are not repeated.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Generic, Literal, Protocol, TypeVar

import msgspec
import structlog

from reconciler.api import ObjectMeta
from reconciler.api.resources import Resource
from reconciler.kube.backoff import Backoff
from reconciler.kube.client import KubeClient
from reconciler.kube.errors import DecodeError, Gone, KubeError, TooManyRequests
from reconciler.kube.watchcache import ObjectCache
from reconciler.kube.watchwire import NOT_AN_EVENT, ErrorStatus, ListPage, ObjectEvent, classify_line, meta_of

__all__ = ["Backoff", "EventKind", "HasMetadata", "Informer", "InformerStats", "WatchEvent"]

log = structlog.get_logger(__name__)

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


class _Outcome(Enum):
    ENDED = "ended"  # the server closed the stream: re-watch from the last rv
    INACTIVE = "inactive"  # nothing for inactivity_timeout: re-watch from the last rv
    GONE = "gone"  # 410: relist
    ERROR = "error"  # another ERROR event: backoff, relist


_CONNECT_TIMEOUT = 10.0
_LIST_TIMEOUT = 60.0


class Informer(Generic[T]):
    """Follows one collection and reports every change to ``sink`` (a plain, non-blocking callable).

    ``run()`` runs until cancelled. ``synced`` turns True after the first
    complete list; ``last_event_monotonic`` is the time of the last line
    received; ``last_contact_monotonic`` also counts a completed list and a
    watch the server accepted (for liveness: a quiet collection without
    bookmarks is not a dead one); ``stats`` counts what happened. Exceptions
    raised by ``sink`` propagate out of ``run()``.
    """

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        decode_type: type[T],
        sink: Callable[[WatchEvent[T]], None],
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        watch_timeout: tuple[float, float] = (240.0, 360.0),
        inactivity_timeout: float = 90.0,
        backoff: Backoff = Backoff(),  # noqa: B008 (frozen, immutable)
    ) -> None:
        self._client = client
        self.resource = resource
        self._sink = sink
        self._path = resource.list_path(namespace if resource.namespaced else None)
        self._selectors: dict[str, str] = {}
        if label_selector:
            self._selectors["labelSelector"] = label_selector
        if field_selector:
            self._selectors["fieldSelector"] = field_selector
        self._page_size = page_size
        self._watch_timeout = watch_timeout
        self._inactivity_timeout = inactivity_timeout
        self._backoff = backoff
        self._delays: Iterator[float] = backoff.delays()
        self._event_type: Any = ObjectEvent[decode_type]  # type: ignore[valid-type]
        self._decode_type = decode_type
        self._cache: ObjectCache[T] = ObjectCache()
        self._rv = ""
        self._relist_requested = False
        self.synced = False
        self.last_event_monotonic = time.monotonic()
        self.last_contact_monotonic = self.last_event_monotonic
        self.stats = InformerStats()
        self._log = log.bind(kind=resource.kind, namespace=namespace)

    @property
    def inactivity_timeout(self) -> float:
        """Seconds without a line after which a watch is reconnected."""
        return self._inactivity_timeout

    @property
    def resource_version(self) -> str:
        """The resourceVersion the next watch resumes from."""
        return self._rv

    def __len__(self) -> int:
        return len(self._cache)

    # --- layer 3: forever ------------------------------------------------------------------

    async def run(self) -> None:
        """List and watch until cancelled. Never returns otherwise."""
        while True:
            try:
                await self._list_then_watch()
                # A relist was asked for (410, ERROR event, lost line): a pause first, never a hot loop.
                delay = next(self._delays)
            except TooManyRequests as exc:
                self.stats.errors += 1
                delay = max(next(self._delays), min(exc.retry_after or 0.0, 60.0))
                self._log.warning("throttled; relisting after a pause", delay=round(delay, 3), error=str(exc))
            except KubeError as exc:
                self.stats.errors += 1
                delay = next(self._delays)
                self._log.warning(
                    "list/watch failed; relisting after a pause", delay=round(delay, 3), error=str(exc)
                )
            await asyncio.sleep(delay)

    def _contact(self) -> None:
        self.last_contact_monotonic = time.monotonic()

    def _success(self) -> None:
        self._delays = self._backoff.delays()

    # --- layer 2: one list, then watches ---------------------------------------------------

    async def _list_then_watch(self) -> None:
        await self._list()
        first = True
        while True:
            if self._relist_requested:
                self._relist_requested = False
                self._log.info("relisting to recover a lost event", resource_version=self._rv)
                return
            if not first:
                self.stats.watch_restarts += 1
            first = False
            started = time.monotonic()
            try:
                outcome, lines = await self._watch_once()
            except Gone:
                outcome, lines = _Outcome.GONE, 0
            except TooManyRequests as exc:
                self.stats.errors += 1
                await self._pause(exc.retry_after or 0.0, reason=str(exc))
                continue
            except KubeError as exc:
                # Transport errors, 5xx, a truncated connection: resume from the last rv.
                self.stats.errors += 1
                await self._pause(0.0, reason=f"{type(exc).__name__}: {exc}")
                continue
            if outcome is _Outcome.GONE:
                self.stats.gone += 1
                self._log.info("resourceVersion expired (410); relisting", resource_version=self._rv)
                return
            if outcome is _Outcome.ERROR:
                return
            if outcome is _Outcome.INACTIVE:
                # Quiet collections go silent too (bookmarks are not guaranteed): reconnect at
                # once from the last rv. A dead server shows up as a connect error and backs off.
                self.stats.inactivity_timeouts += 1
                self._log.debug(
                    "watch inactive; reconnecting",
                    timeout=self._inactivity_timeout,
                    resource_version=self._rv,
                )
            # An empty stream that ended early is a misbehaving server (or a proxy): back off.
            # One that lasted (a quiet collection, a server without bookmarks) is not.
            early = time.monotonic() - started < self._watch_timeout[0] / 2
            if outcome is not _Outcome.INACTIVE and lines == 0 and early:
                await self._pause(0.0, reason="empty stream")
            else:
                # Streams normally last minutes; this floor only bites on a misbehaving server.
                await asyncio.sleep(max(0.0, self._backoff.initial - (time.monotonic() - started)))

    async def _pause(self, at_least: float, *, reason: str) -> None:
        delay = max(next(self._delays), min(at_least, 60.0))
        self._log.info(
            "re-watching after a pause", delay=round(delay, 3), reason=reason, resource_version=self._rv
        )
        await asyncio.sleep(delay)

    async def _list(self) -> None:
        """A paged list, diffed against the cache; ends with SYNCED and sets the resume rv."""
        if self.stats.lists:
            self.stats.relists += 1
            self._log.info("relisting", cached=len(self._cache))
        self._relist_requested = False  # this list is the recovery
        seen: set[Key] = set()
        params = dict(self._selectors)
        params["limit"] = str(self._page_size)
        rv = ""
        while True:
            try:
                body = await self._client.request("GET", self._path, params=params, timeout=_LIST_TIMEOUT)
            except Gone:
                if "continue" not in params:
                    raise
                self.stats.list_restarts += 1
                self._log.info("list continue token expired; listing again from the start")
                params.pop("continue")
                seen.clear()
                continue
            try:
                page = msgspec.json.decode(body, type=ListPage)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                raise DecodeError(f"list {self._path}: {exc}") from exc
            rv = page.metadata.resource_version or rv
            for raw in page.items or ():
                self._list_item(raw, seen)
            if not page.metadata.continue_:
                break
            params["continue"] = page.metadata.continue_
        if not rv:
            raise DecodeError(f"list {self._path}: no metadata.resourceVersion")
        for key, last in self._cache.drop_unseen(seen):
            self._emit("DELETED", key, last)
        self._rv = rv
        self.last_event_monotonic = self.last_contact_monotonic = time.monotonic()
        self.stats.lists += 1
        self.synced = True
        self._sink(WatchEvent("SYNCED", self.resource, ("", ""), None))
        self._log.debug("listed", count=len(self._cache), resource_version=rv)

    def _list_item(self, raw: msgspec.Raw, seen: set[Key]) -> None:
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

    # --- layer 1: one watch request --------------------------------------------------------

    async def _watch_once(self) -> tuple[_Outcome, int]:
        """One watch request from ``self._rv``; returns how it ended and how many lines came."""
        params = dict(self._selectors)
        low, high = self._watch_timeout
        params.update(
            watch="1",
            allowWatchBookmarks="true",
            timeoutSeconds=str(max(1, round(random.uniform(low, high)))),
            resourceVersion=self._rv,
        )
        self.stats.watches += 1
        loop = asyncio.get_running_loop()
        lines = 0
        stream = self._client.stream_lines(
            self._path,
            params,
            connect_timeout=_CONNECT_TIMEOUT,
            # the inactivity deadline below normally fires first; this one is the backstop.
            read_timeout=self._inactivity_timeout * 1.5 + 1.0,
            on_open=self._contact,
        )
        try:
            async with asyncio.timeout(_CONNECT_TIMEOUT + self._inactivity_timeout) as deadline:
                async with contextlib.aclosing(stream):
                    async for line in stream:
                        lines += 1
                        self.last_event_monotonic = self.last_contact_monotonic = time.monotonic()
                        deadline.reschedule(loop.time() + self._inactivity_timeout)
                        outcome = self._on_line(line)
                        if outcome is not None:
                            return outcome, lines
        except TimeoutError:
            if deadline.expired():
                return _Outcome.INACTIVE, lines
            raise
        return _Outcome.ENDED, lines

    def _on_line(self, line: bytes) -> _Outcome | None:
        try:
            event = msgspec.json.decode(line, type=self._event_type)
        except msgspec.ValidationError:  # (a subclass of DecodeError) JSON, but not an object event
            return self._on_other_line(line)
        except msgspec.DecodeError:
            # Not JSON: whatever object it carried is lost; a relist after this stream recovers it.
            self.stats.decode_errors += 1
            self._relist_requested = True
            self._log.warning("undecodable watch line; will relist", line=line[:200])
            return None
        kind = event.type
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            return self._on_other_line(line)
        obj: T = event.object
        self.stats.events[kind] += 1
        self._rv = obj.metadata.resource_version or self._rv
        self._success()
        key = (obj.metadata.namespace, obj.metadata.name)
        if kind == "DELETED":
            self._cache.delete(key)
            self._emit("DELETED", key, obj)
        else:
            self._apply(kind, key, obj)
        return None

    def _on_other_line(self, line: bytes) -> _Outcome | None:
        """BOOKMARK, ERROR, or an object that does not fit the projection."""
        other = classify_line(line)
        if other.type == NOT_AN_EVENT:
            self.stats.decode_errors += 1
            self._relist_requested = True
            self._log.warning("watch line is not an event; will relist", line=line[:200])
            return None
        self.stats.events[other.type] += 1
        if other.type == "BOOKMARK":
            if other.resource_version:
                self._rv = other.resource_version
                self._success()
            return None
        if other.type == "ERROR":
            status = other.error or ErrorStatus()
            if status.code == 410:
                return _Outcome.GONE
            self.stats.errors += 1
            self._log.warning(
                "watch ERROR event; relisting after a pause",
                code=status.code,
                reason=status.reason,
                message=status.message,
            )
            return _Outcome.ERROR
        if other.type in ("ADDED", "MODIFIED", "DELETED"):
            # Valid JSON that does not fit the projection: a relist would not decode it either.
            self.stats.decode_errors += 1
            if other.resource_version:
                self._rv = other.resource_version
            self._log.warning(
                "watch object does not decode; skipped",
                event_type=other.type,
                name=other.name,
                namespace=other.namespace,
            )
            return None
        self._log.warning("unknown watch event type; skipped", type=other.type)
        return None

    # --- cache -----------------------------------------------------------------------------

    def _apply(self, kind: str, key: Key, obj: T) -> None:
        """ADDED if new, MODIFIED if its resourceVersion changed, nothing if unchanged."""
        change = self._cache.put(key, obj)
        if change is not None:
            self._emit(change, key, obj)

    def _emit(self, kind: EventKind, key: Key, obj: T) -> None:
        self._sink(WatchEvent(kind, self.resource, key, obj))
