"""How much of a flavor's resource a ClusterQueue can still use: its own quota, and in a cohort
what the other members lend.

The arithmetic is Kueue's (for a cohort with ClusterQueues as its members):

- a member keeps `nominal - lendingLimit` to itself (its *local* quota; 0 without a
  lendingLimit) and lends the rest to the cohort;
- the cohort's capacity is what its members lend, and its usage what members use
  beyond their local quota;
- a member may use its unused local quota plus what the cohort has left, the latter
  capped by its borrowingLimit (it may take at most `borrowingLimit` beyond what it
  lends itself).
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass
from typing import Protocol

from .clusterqueues import ClusterQueueModel
from .ledger import FlavorResource, Ledger

__all__ = ["Capacity", "CohortCapacity", "NominalCapacity"]


class Capacity(Protocol):
    def used(self, cluster_queue: str, fr: FlavorResource) -> int: ...

    def limits(self, cq: ClusterQueueModel, fr: FlavorResource, nominal: int, used: int) -> tuple[int, int]:
        """(what `cq` could use with nothing else in use, what is left for it now; negative when
        over-committed), given its own nominal quota and usage of `fr`."""
        ...


@dataclass(frozen=True, slots=True)
class NominalCapacity:
    """Each ClusterQueue on its own: its nominal quota is all there is."""

    ledger: Ledger

    def used(self, cluster_queue: str, fr: FlavorResource) -> int:
        return self.ledger.used(cluster_queue, fr)

    def limits(self, cq: ClusterQueueModel, fr: FlavorResource, nominal: int, used: int) -> tuple[int, int]:
        return nominal, nominal - used


def _local_quota(cq: ClusterQueueModel, fr: FlavorResource) -> int:
    lending = cq.lending_limit(*fr)
    return 0 if lending is None else max(0, cq.nominal(*fr) - lending)


@dataclass(frozen=True, slots=True)
class CohortCapacity:
    ledger: Ledger
    cluster_queues: Mapping[str, ClusterQueueModel]
    # Cohort name -> its member ClusterQueues.
    cohorts: Mapping[str, Set[str]]

    def used(self, cluster_queue: str, fr: FlavorResource) -> int:
        return self.ledger.used(cluster_queue, fr)

    def _cohort_left(self, cohort: str, fr: FlavorResource) -> tuple[int, int]:
        """(what the cohort holds, what of it is left)."""
        lent = in_use = 0
        for name in self.cohorts.get(cohort, ()):
            member = self.cluster_queues.get(name)
            if member is None:
                continue
            local = _local_quota(member, fr)
            lent += member.nominal(*fr) - local
            in_use += max(0, self.ledger.used(name, fr) - local)
        return lent, lent - in_use

    def limits(self, cq: ClusterQueueModel, fr: FlavorResource, nominal: int, used: int) -> tuple[int, int]:
        if cq.cohort is None:
            return nominal, nominal - used
        local = _local_quota(cq, fr)
        held, from_cohort = self._cohort_left(cq.cohort, fr)  # one pass over the members for both
        most = local + held
        borrowing = cq.borrowing_limit(*fr)
        if borrowing is not None:
            most = min(most, nominal + borrowing)
            stored_in_cohort = nominal - local
            used_in_cohort = max(0, used - local)
            from_cohort = min(from_cohort, stored_in_cohort - used_in_cohort + borrowing)
        return most, max(0, local - used) + from_cohort
