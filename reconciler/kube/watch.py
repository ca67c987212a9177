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
with their last known state, unchanged objects are not repeated. Decoding the
lines and keeping the cache are `watchfeed.Feed`'s; the requests are the `Informer`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable, Iterator
from typing import Generic

import msgspec
import structlog

from reconciler.api.resources import Resource
from reconciler.kube.backoff import Backoff
from reconciler.kube.client import KubeClient
from reconciler.kube.errors import DecodeError, Gone, KubeError, NotFound, TooManyRequests
from reconciler.kube.watchfeed import EventKind, Feed, HasMetadata, InformerStats, Key, Outcome, T, WatchEvent
from reconciler.kube.watchwire import ListPage

__all__ = ["Backoff", "EventKind", "HasMetadata", "Informer", "InformerStats", "WatchEvent"]

log = structlog.get_logger(__name__)

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
        optional: bool = False,
    ) -> None:
        """`optional`: the collection may not be served (a CRD not installed): a list answered
        404 counts as an empty, complete list (SYNCED), and the list is tried again until it is."""
        self._client = client
        self._optional = optional
        self._absent = False
        self.resource = resource
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
        self.synced = False
        self.last_event_monotonic = time.monotonic()
        self.last_contact_monotonic = self.last_event_monotonic
        self.stats = InformerStats()
        self._open: asyncio.Timeout | None = None  # the open watch's deadline (`relist_soon` ends it)
        self._log = log.bind(kind=resource.kind, namespace=namespace)
        self._feed: Feed[T] = Feed(
            resource, decode_type, sink, stats=self.stats, log=self._log, on_progress=self._success
        )

    @property
    def inactivity_timeout(self) -> float:
        """Seconds without a line after which a watch is reconnected."""
        return self._inactivity_timeout

    @property
    def resource_version(self) -> str:
        """The resourceVersion the next watch resumes from."""
        return self._feed.rv

    def __len__(self) -> int:
        return len(self._feed.cache)

    def relist_soon(self) -> None:
        """Relist now: the caller has seen that the cache is behind the server (writes keep
        meeting 409 Conflict). An open watch is ended; the list follows the usual pause."""
        self._feed.relist_requested = True
        if self._open is not None:
            self._open.reschedule(asyncio.get_running_loop().time())

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
                if self._optional and isinstance(exc, NotFound):
                    delay = self._not_served(exc)
                else:
                    self.stats.errors += 1
                    delay = next(self._delays)
                    self._log.warning(
                        "list/watch failed; relisting after a pause", delay=round(delay, 3), error=str(exc)
                    )
            await asyncio.sleep(delay)

    def _not_served(self, exc: NotFound) -> float:
        """An optional collection the API does not serve: empty and synced, looked for again
        (the server answered: a live collection for the liveness probe)."""
        self._contact()
        delay = next(self._delays)
        if not self._absent:
            self._absent = True
            self._log.warning(
                f"{self.resource.plural}.{self.resource.group or 'core'} is not served (is its CRD "
                "installed?): none are seen until it is; looking again after a pause",
                delay=round(delay, 3),
                error=str(exc),
            )
        self._feed.drop_unseen(set())
        if not self.synced:
            self.synced = True
            self._feed.synced("")
        return delay

    def _contact(self) -> None:
        self.last_contact_monotonic = time.monotonic()

    def _success(self) -> None:
        self._delays = self._backoff.delays()

    # --- layer 2: one list, then watches ---------------------------------------------------

    async def _list_then_watch(self) -> None:
        await self._list()
        first = True
        while True:
            if self._feed.relist_requested:
                self._feed.relist_requested = False
                self._log.info("relisting to recover a lost event", resource_version=self._feed.rv)
                return
            if not first:
                self.stats.watch_restarts += 1
            first = False
            started = time.monotonic()
            try:
                outcome, lines = await self._watch_once()
            except Gone:
                outcome, lines = Outcome.GONE, 0
            except TooManyRequests as exc:
                self.stats.errors += 1
                await self._pause(exc.retry_after or 0.0, reason=str(exc))
                continue
            except KubeError as exc:
                # Transport errors, 5xx, a truncated connection: resume from the last rv.
                self.stats.errors += 1
                await self._pause(0.0, reason=f"{type(exc).__name__}: {exc}")
                continue
            if outcome is Outcome.GONE:
                self.stats.gone += 1
                self._log.info("resourceVersion expired (410); relisting", resource_version=self._feed.rv)
                return
            if outcome is Outcome.ERROR:
                return
            if outcome is Outcome.INACTIVE and not self._feed.relist_requested:
                # Quiet collections go silent too (bookmarks are not guaranteed): reconnect at
                # once from the last rv. A dead server shows up as a connect error and backs off.
                self.stats.inactivity_timeouts += 1
                self._log.debug(
                    "watch inactive; reconnecting",
                    timeout=self._inactivity_timeout,
                    resource_version=self._feed.rv,
                )
            # An empty stream that ended early is a misbehaving server (or a proxy): back off.
            # One that lasted (a quiet collection, a server without bookmarks) is not.
            early = time.monotonic() - started < self._watch_timeout[0] / 2
            if outcome is not Outcome.INACTIVE and lines == 0 and early:
                await self._pause(0.0, reason="empty stream")
            else:
                # Streams normally last minutes; this floor only bites on a misbehaving server.
                await asyncio.sleep(max(0.0, self._backoff.initial - (time.monotonic() - started)))

    async def _pause(self, at_least: float, *, reason: str) -> None:
        delay = max(next(self._delays), min(at_least, 60.0))
        self._log.info(
            "re-watching after a pause", delay=round(delay, 3), reason=reason, resource_version=self._feed.rv
        )
        await asyncio.sleep(delay)

    async def _list(self) -> None:
        """A paged list, diffed against the cache; ends with SYNCED and sets the resume rv."""
        if self.stats.lists:
            self.stats.relists += 1
            self._log.info("relisting", cached=len(self._feed.cache))
        self._feed.relist_requested = False  # this list is the recovery
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
                self._feed.list_item(raw, seen)
            if not page.metadata.continue_:
                break
            params["continue"] = page.metadata.continue_
        if not rv:
            raise DecodeError(f"list {self._path}: no metadata.resourceVersion")
        self._feed.drop_unseen(seen)
        self.last_event_monotonic = self.last_contact_monotonic = time.monotonic()
        self.stats.lists += 1
        self.synced = True
        if self._absent:
            self._absent = False
            self._log.info(f"{self.resource.plural}.{self.resource.group or 'core'} is served now")
        self._feed.synced(rv)
        self._log.debug("listed", count=len(self._feed.cache), resource_version=rv)

    # --- layer 1: one watch request --------------------------------------------------------

    async def _watch_once(self) -> tuple[Outcome, int]:
        """One watch request from ``self._feed.rv``; returns how it ended and how many lines came."""
        params = dict(self._selectors)
        low, high = self._watch_timeout
        params.update(
            watch="1",
            allowWatchBookmarks="true",
            timeoutSeconds=str(max(1, round(random.uniform(low, high)))),
            resourceVersion=self._feed.rv,
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
                self._open = deadline
                async with contextlib.aclosing(stream):
                    async for line in stream:
                        lines += 1
                        self.last_event_monotonic = self.last_contact_monotonic = time.monotonic()
                        deadline.reschedule(loop.time() + self._inactivity_timeout)
                        outcome = self._feed.on_line(line)
                        if outcome is not None:
                            return outcome, lines
        except TimeoutError:
            if deadline.expired():
                return Outcome.INACTIVE, lines
            raise
        finally:
            self._open = None
        return Outcome.ENDED, lines
