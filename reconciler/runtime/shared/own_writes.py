"""Our own writes to one kind of object, so that the cache never goes back in time.

Two races are covered, the same way for every kind:

- A write's response is the newest state we know, so it is applied at once;
  watch events older than it may still arrive and must not be applied. The
  written resourceVersion is *awaited*: other versions are skipped until it is
  seen, or until a deadline passes (a relist may skip it).
- The watch may deliver our write (and newer versions) before the write's
  response comes back. Every version the watch shows while a write is in
  flight is remembered; a response whose version is among them is older than
  (or as new as) the cache and is not applied.

It also says which writes are in flight, by purpose, so callers ask for a
write once.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Collection, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["OwnWrites"]

K = TypeVar("K", bound=Hashable)


@dataclass
class OwnWrites(Generic[K]):
    monotonic: Callable[[], float]
    _in_flight: dict[K, Counter[str]] = field(default_factory=dict)
    _seen: dict[K, set[str]] = field(default_factory=dict)
    # Key -> (resourceVersion written, monotonic deadline).
    _awaiting: dict[K, tuple[str, float]] = field(default_factory=dict)

    # --- writes in flight ---------------------------------------------------------------

    def begin(self, key: K, purpose: str) -> None:
        self._in_flight.setdefault(key, Counter())[purpose] += 1

    def end(self, key: K, purpose: str) -> None:
        purposes = self._in_flight.get(key)
        if purposes is None:
            return
        purposes[purpose] -= 1
        if purposes[purpose] <= 0:
            del purposes[purpose]
        if not purposes:
            del self._in_flight[key]
            self._seen.pop(key, None)

    def in_flight(self, key: K, *purposes: str) -> bool:
        """Whether a write for one of `purposes` (any, when none is given) is in flight."""
        current = self._in_flight.get(key)
        if not current:
            return False
        if not purposes:
            return True
        for purpose in purposes:  # noqa: SIM110 (a loop: no generator on a hot path)
            if purpose in current:
                return True
        return False

    def purposes(self, key: K) -> Collection[str]:
        """The purposes of the writes in flight for `key` (empty when none)."""
        return self._in_flight.get(key) or ()

    # --- watch events and responses -----------------------------------------------------

    def accept_event(self, key: K, resource_version: str) -> bool:
        """A watch event: False when it is older than our own write already applied."""
        if key in self._in_flight:
            self._seen.setdefault(key, set()).add(resource_version)
        awaited = self._awaiting.get(key)
        if awaited is not None:
            version, deadline = awaited
            if resource_version != version and self.monotonic() < deadline:
                return False
            # Our write's own event, or it never came (a relist skipped it): events rule again.
            del self._awaiting[key]
        return True

    def response_is_stale(self, key: K, resource_version: str) -> bool:
        """True when the watch already showed this version (or newer) while the write was in flight."""
        return resource_version in self._seen.get(key, ())

    def applied(self, key: K, resource_version: str, changed: bool, *, for_seconds: float = math.inf) -> None:
        """Our write's response was applied: await its own event (at most `for_seconds`)."""
        if changed:
            self._awaiting[key] = (resource_version, self.monotonic() + for_seconds)

    def awaiting(self, key: K) -> bool:
        awaited = self._awaiting.get(key)
        if awaited is None:
            return False
        if self.monotonic() < awaited[1]:
            return True
        del self._awaiting[key]
        return False

    def expired(self) -> list[K]:
        """Keys whose awaited event never came in time (now forgotten)."""
        return [key for key in list(self._awaiting) if not self.awaiting(key)]

    def relisted(self) -> None:
        """A relist is the truth: stop waiting for events it may have skipped."""
        self._awaiting.clear()

    def forget(self, key: K) -> None:
        """The object is gone."""
        self._awaiting.pop(key, None)
        self._seen.pop(key, None)
