"""Writes that keep meeting 409 Conflict: paced, and the object's watch relisted when they last.

A 409 on a write with a resourceVersion precondition says the cache is behind the server. The
reconciler decides again at once (the newer version may have come meanwhile), and when it has
not come yet, that decision is the same write, with the same stale precondition, again. Unpaced,
that is a hot loop against the API server for as long as the watch lags, and on a busy machine
the loop itself can keep the API server from sending the event that would end it.

`Conflicts` remembers, per object, how many writes in a row met a conflict: the next write to it
waits `delay` first (doubling from `BASE` up to `CEILING`), as a rate-limited requeue would; any
other outcome forgets the object. Writes that conflict for `BEHIND_AFTER` seconds say the
object's watch is behind (a lost event, a stream the server stopped feeding): `conflict` returns
True once per streak, and the writer asks for that collection to be relisted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["BASE", "BEHIND_AFTER", "CEILING", "Conflicts", "ObjectRef"]

BASE = 0.02
CEILING = 1.0
BEHIND_AFTER = 5.0
_KEEP = 60.0  # an object not written for this long is forgotten (it may be gone)

ObjectRef = tuple[str, str, str]  # (plural, namespace, name)


@dataclass
class _Streak:
    count: int
    first: float
    last: float
    told: bool = False


@dataclass
class Conflicts:
    monotonic: Callable[[], float] = time.monotonic
    _streaks: dict[ObjectRef, _Streak] = field(default_factory=dict)

    def delay(self, ref: ObjectRef) -> float:
        """Seconds the next write to `ref` waits (0 unless its last writes met conflicts)."""
        streak = self._streaks.get(ref)
        if streak is None:
            return 0.0
        return min(CEILING, BASE * 2.0 ** (streak.count - 1))

    def conflict(self, ref: ObjectRef) -> bool:
        """A write to `ref` met 409. True when its writes have conflicted for BEHIND_AFTER
        seconds (once per streak): its watch is behind."""
        now = self.monotonic()
        streak = self._streaks.get(ref)
        if streak is None:
            if len(self._streaks) >= 1024:
                self._prune(now)
            streak = self._streaks[ref] = _Streak(0, now, now)
        streak.count += 1
        streak.last = now
        if streak.told or now - streak.first < BEHIND_AFTER:
            return False
        streak.told = True
        return True

    def settled(self, ref: ObjectRef) -> None:
        """A write to `ref` had any other outcome: no pause for the next."""
        self._streaks.pop(ref, None)

    def _prune(self, now: float) -> None:
        for ref in [r for r, s in self._streaks.items() if now - s.last > _KEEP]:
            del self._streaks[ref]
