"""Quota verdicts kept across scheduling cycles, so a release re-evaluates only what it moved.

When quota comes back in a cohort, every parked head of the cohort's
ClusterQueues is woken and takes its turn, as in Kueue. A head's flavor
assignment reads only its shape, its ClusterQueue's configuration, the
flavors, the device inventory's sizes and, for each flavor/resource its
ClusterQueue has quota for, the cohort tree's arithmetic along its path: its
own (quota, usage, local quota) and those of each cohort above it up to the
root (`CohortTree.stats`; a cohort's usage is what its children use beyond
what they keep). A no-fit verdict is kept with those figures; while they are
the same again (nothing on the path moved, or a release was taken again by
another admission) the verdict is the same and is reused instead of computed
again. So a release costs an evaluation only for the heads whose path it
moved, and only while it is free; checking a head costs its path's length,
not the size of its cohort (the cohorts' figures are computed once per change
of usage). Heads keep their turns: the scheduler's decisions are unchanged.

Configuration changes move the queue manager's epoch, which drops them all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model.clusterqueues import ClusterQueueModel
from ..quota.capacity import CohortTree
from ..quota.ledger import FlavorResource
from .flavors import FlavorNoFit

__all__ = ["KeptVerdicts"]

# Past this many (ClusterQueue, shape) entries they are all dropped (shapes come and go); an
# entry keeps the verdicts of this many different figures (usage goes back and forth).
_LIMIT = 16_384
_PER_ENTRY = 4

Figures = tuple[object, ...]


@dataclass(slots=True)
class _Entry:
    model: ClusterQueueModel
    epoch: int
    sizes: object
    # The flavor/resources read, and the verdicts by the path's figures they were made from.
    frs: tuple[FlavorResource, ...]
    by_figures: dict[Figures, FlavorNoFit] = field(default_factory=dict)


def _flavor_resources(model: ClusterQueueModel) -> tuple[FlavorResource, ...]:
    return tuple((q.name, r) for g in model.groups for q in g.flavors for r in sorted(g.covered))


def _figures(tree: CohortTree, model: ClusterQueueModel, frs: tuple[FlavorResource, ...]) -> Figures:
    """What an assignment in `model` reads of usage (its quotas are the model's and the tree's,
    which only change with the epoch)."""
    return tree.path_figures(model.name, frs)


@dataclass(slots=True)
class KeptVerdicts:
    _entries: dict[tuple[str, bytes], _Entry] = field(default_factory=dict)
    # The figures the last `get` computed, for the `put` after its miss: (key, tree, usage
    # generation, figures); the tree is held, so no other tree can be taken for it.
    _last: tuple[tuple[str, bytes], CohortTree, int, Figures] | None = None

    def _figures(self, key: tuple[str, bytes], tree: CohortTree, entry: _Entry) -> Figures:
        last = self._last
        generation = tree.ledger.generation
        if last is not None and last[0] == key and last[1] is tree and last[2] == generation:
            return last[3]
        figures = _figures(tree, entry.model, entry.frs)
        self._last = (key, tree, generation, figures)
        return figures

    def _entry(self, model: ClusterQueueModel, shape: bytes, epoch: int, sizes: object) -> _Entry | None:
        key = (model.name, shape)
        entry = self._entries.get(key)
        if entry is not None and (
            entry.model is not model or entry.epoch != epoch or entry.sizes is not sizes
        ):
            del self._entries[key]
            return None
        return entry

    def get(
        self, model: ClusterQueueModel, shape: bytes, epoch: int, sizes: object, tree: CohortTree
    ) -> FlavorNoFit | None:
        """The verdict of `shape` in `model`, when everything it read is as it was then."""
        entry = self._entry(model, shape, epoch, sizes)
        if entry is None:
            return None
        return entry.by_figures.get(self._figures((model.name, shape), tree, entry))

    def put(
        self,
        model: ClusterQueueModel,
        shape: bytes,
        epoch: int,
        sizes: object,
        tree: CohortTree,
        verdict: FlavorNoFit,
    ) -> None:
        """Keep a no-fit verdict, with the figures it was made from."""
        entry = self._entry(model, shape, epoch, sizes)
        if entry is None:
            if len(self._entries) >= _LIMIT:
                self._entries.clear()
            entry = self._entries[(model.name, shape)] = _Entry(model, epoch, sizes, _flavor_resources(model))
        if len(entry.by_figures) >= _PER_ENTRY:
            del entry.by_figures[next(iter(entry.by_figures))]  # the oldest
        entry.by_figures[self._figures((model.name, shape), tree, entry)] = verdict

    def __len__(self) -> int:
        return sum(len(entry.by_figures) for entry in self._entries.values())
