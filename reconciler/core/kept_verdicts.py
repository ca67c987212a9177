"""Quota verdicts kept across scheduling cycles, so a release re-evaluates only what it touched.

When quota comes back in a cohort, every parked head of the cohort's
ClusterQueues is woken and takes its turn, as in Kueue. A head's flavor
assignment reads only its ClusterQueue's configuration, the flavors, and the
usage of the flavor/resources its ClusterQueue has quota for (across the
cohort tree). When none of those moved since its last no-fit verdict, the
verdict is the same and is reused instead of computed again: a release of
one flavor's quota costs an evaluation only for the heads that could use
that flavor.

Usage changes are told by `touch` (the scheduler's admissions, the engine's
releases); configuration changes move the queue manager's epoch, which
drops every kept verdict.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .clusterqueues import ClusterQueueModel
from .flavors import FlavorNoFit
from .ledger import FlavorResource

__all__ = ["KeptVerdicts"]

# Past this many kept verdicts they are all dropped (shapes come and go).
_LIMIT = 65_536


@dataclass(frozen=True, slots=True)
class _Entry:
    verdict: FlavorNoFit
    model: ClusterQueueModel
    frs: tuple[FlavorResource, ...]
    tick: int
    epoch: int
    sizes: object


def _flavor_resources(model: ClusterQueueModel) -> tuple[FlavorResource, ...]:
    return tuple((q.name, r) for g in model.groups for q in g.flavors for r in sorted(g.covered))


@dataclass(slots=True)
class KeptVerdicts:
    _tick: int = 0
    # When usage of each flavor/resource last moved (a tick).
    _changed_at: dict[FlavorResource, int] = field(default_factory=dict)
    _entries: dict[tuple[str, bytes], _Entry] = field(default_factory=dict)

    def touch(self, frs: Iterable[FlavorResource]) -> None:
        self._tick += 1
        tick = self._tick
        changed = self._changed_at
        for fr in frs:
            changed[fr] = tick

    def get(self, model: ClusterQueueModel, shape: bytes, epoch: int, sizes: object) -> FlavorNoFit | None:
        """The verdict of `shape` in `model`, when nothing it read has moved since."""
        key = (model.name, shape)
        entry = self._entries.get(key)
        if entry is None:
            return None
        changed = self._changed_at
        if (
            entry.model is not model
            or entry.epoch != epoch
            or entry.sizes is not sizes
            or any(changed.get(fr, 0) > entry.tick for fr in entry.frs)
        ):
            del self._entries[key]
            return None
        return entry.verdict

    def put(
        self, model: ClusterQueueModel, shape: bytes, epoch: int, sizes: object, verdict: FlavorNoFit
    ) -> None:
        if len(self._entries) >= _LIMIT:
            self._entries.clear()
        self._entries[(model.name, shape)] = _Entry(
            verdict, model, _flavor_resources(model), self._tick, epoch, sizes
        )

    def __len__(self) -> int:
        return len(self._entries)
