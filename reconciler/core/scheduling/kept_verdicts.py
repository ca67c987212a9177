"""Quota verdicts kept across scheduling cycles, so a release re-evaluates only what it moved.

When quota comes back in a cohort, every parked head of the cohort's
ClusterQueues is woken and takes its turn, as in Kueue. A head's flavor
assignment reads only its ClusterQueue's configuration, the flavors, and the
usage of the flavor/resources its ClusterQueue has quota for, by every
ClusterQueue of its cohort tree. A no-fit verdict is kept with those usages;
while they are the same again (nothing there moved, or a release was taken
again by another admission) the verdict is the same and is reused instead of
computed again. So a release costs an evaluation only for the heads that
could use what it freed, and only while it is free.

Configuration changes move the queue manager's epoch, which drops them all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..model.clusterqueues import ClusterQueueModel
from ..quota.ledger import FlavorResource, Ledger
from .flavors import FlavorNoFit

__all__ = ["KeptVerdicts"]

# Past this many kept verdicts they are all dropped (shapes come and go).
_LIMIT = 65_536


@dataclass(frozen=True, slots=True)
class _Entry:
    verdict: FlavorNoFit
    model: ClusterQueueModel
    epoch: int
    sizes: object
    # The cohort tree's ClusterQueues and the flavor/resources read, with the usages seen.
    members: tuple[str, ...]
    frs: tuple[FlavorResource, ...]
    usage: tuple[int, ...]


def _flavor_resources(model: ClusterQueueModel) -> tuple[FlavorResource, ...]:
    return tuple((q.name, r) for g in model.groups for q in g.flavors for r in sorted(g.covered))


def _usage(ledger: Ledger, members: tuple[str, ...], frs: tuple[FlavorResource, ...]) -> tuple[int, ...]:
    used = ledger.used
    return tuple(used(m, fr) for m in members for fr in frs)


@dataclass(slots=True)
class KeptVerdicts:
    _entries: dict[tuple[str, bytes], _Entry] = field(default_factory=dict)

    def get(
        self, model: ClusterQueueModel, shape: bytes, epoch: int, sizes: object, ledger: Ledger
    ) -> FlavorNoFit | None:
        """The verdict of `shape` in `model`, when everything it read is as it was then."""
        key = (model.name, shape)
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.model is not model or entry.epoch != epoch or entry.sizes is not sizes:
            del self._entries[key]
            return None
        if _usage(ledger, entry.members, entry.frs) != entry.usage:
            return None  # kept: the usage may come back to what it was
        return entry.verdict

    def put(
        self,
        model: ClusterQueueModel,
        shape: bytes,
        epoch: int,
        sizes: object,
        ledger: Ledger,
        members: Callable[[], set[str]],
        verdict: FlavorNoFit,
    ) -> None:
        """Keep a no-fit verdict; `members` gives the ClusterQueues of the model's cohort tree."""
        key = (model.name, shape)
        entry = self._entries.get(key)
        if entry is not None and entry.model is model and entry.epoch == epoch:
            tree = entry.members  # the tree only changes with the epoch
        else:
            tree = tuple(sorted(members()))
        if len(self._entries) >= _LIMIT:
            self._entries.clear()
        frs = _flavor_resources(model) if entry is None or entry.model is not model else entry.frs
        self._entries[key] = _Entry(verdict, model, epoch, sizes, tree, frs, _usage(ledger, tree, frs))

    def __len__(self) -> int:
        return len(self._entries)
