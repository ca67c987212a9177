"""The resourceVersions our own pending-verdict writes moved each Workload through.

An admission is decided on the version of the Workload the store shows, and carries it as its
precondition. A pending verdict of the same Workload still in flight lands first (the writes of
one Workload's status go in order) and moves the version on, so the admission would fail (409)
against our own write, and the workload would wait for another cycle. With the moves kept here,
the admission is sent on the version after them, provided the store shows no other change since
(the version our own write produced) and the Workload's spec did not change on the way (the same
generation before and after).

Kept per Workload: the versions our writes moved it from (a few) and the version they moved it
to. `follow` gives the version a write decided on `rv` is to be sent on.
"""

from __future__ import annotations

from collections.abc import Callable

from reconciler.runtime.shared.store import Key

__all__ = ["OwnMoves", "Version"]

# (resourceVersion, generation) of a Workload as the store shows it.
Version = tuple[str, int | None]

# Versions kept per Workload that our writes moved it from.
_BASES = 4


class OwnMoves:
    def __init__(self, current: Callable[[Key], Version | None]) -> None:
        self._current = current
        self._moves: dict[Key, tuple[tuple[str, ...], str]] = {}

    def landed(self, key: Key, base: Version | None, after: Version) -> None:
        """Our write sent on `base` landed as `after`."""
        if base is None or base[1] != after[1] or base[0] == after[0]:
            return  # (the spec changed on the way, or nothing moved)
        bases: tuple[str, ...] = (base[0],)
        previous = self._moves.get(key)
        if previous is not None and previous[1] == base[0]:
            bases = (*previous[0][-(_BASES - 1) :], base[0])
        self._moves[key] = (bases, after[0])

    def follow(self, key: Key, rv: str) -> str:
        """The version to send a write decided on `rv` on: past our own writes, when the store
        shows nothing else since; else `rv` itself."""
        moved = self._moves.get(key)
        if moved is None or rv not in moved[0]:
            return rv
        current = self._current(key)
        return moved[1] if current is not None and current[0] == moved[1] else rv

    def forget(self, key: Key) -> None:
        self._moves.pop(key, None)

    def __len__(self) -> int:
        return len(self._moves)
