"""The quota ledger: what each ClusterQueue has handed out, per flavor and resource.

Every reservation is recorded against the workload that holds it, so release
is exact and the whole ledger can be rebuilt from admitted Workloads alone
(the API server is the only durable store).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = ["Charge", "FlavorResource", "Ledger", "LedgerError"]

FlavorResource = tuple[str, str]
WorkloadKey = tuple[str, str]


_NOTHING: Mapping[FlavorResource, int] = MappingProxyType({})


class LedgerError(RuntimeError):
    """A reservation that would double-book a workload."""


@dataclass(frozen=True, slots=True)
class Charge:
    cluster_queue: str
    usage: Mapping[FlavorResource, int]


class Ledger:
    def __init__(self) -> None:
        self._usage: dict[str, dict[FlavorResource, int]] = {}
        self._charges: dict[WorkloadKey, Charge] = {}
        self._holders: dict[str, set[WorkloadKey]] = {}
        # Bumped on every change of usage: what was computed from usage holds while it stays.
        self.generation = 0

    def reserve(self, key: WorkloadKey, charge: Charge) -> None:
        if key in self._charges:
            raise LedgerError(f"workload {key[0]}/{key[1]} already holds quota")
        self._charges[key] = charge
        self._holders.setdefault(charge.cluster_queue, set()).add(key)
        nonzero = {fr: amount for fr, amount in charge.usage.items() if amount}
        if not nonzero:
            return
        self.generation += 1
        usage = self._usage.setdefault(charge.cluster_queue, {})
        for fr, amount in nonzero.items():
            usage[fr] = usage.get(fr, 0) + amount

    def release(self, key: WorkloadKey) -> Charge | None:
        charge = self._charges.pop(key, None)
        if charge is None:
            return None
        holders = self._holders[charge.cluster_queue]
        holders.discard(key)
        if not holders:
            del self._holders[charge.cluster_queue]
        usage = self._usage.get(charge.cluster_queue)
        if usage is None:
            return charge
        self.generation += 1
        for fr, amount in charge.usage.items():
            if not amount:
                continue
            left = usage[fr] - amount
            if left:
                usage[fr] = left
            else:
                del usage[fr]
        if not usage:
            del self._usage[charge.cluster_queue]
        return charge

    def add_usage(self, cluster_queue: str, usage: Mapping[FlavorResource, int], sign: int = 1) -> None:
        """Usage held by no workload (a preempting head's, for the rest of a scheduling cycle);
        `sign` -1 takes it back."""
        nonzero = {fr: amount for fr, amount in usage.items() if amount}
        if not nonzero:
            return
        self.generation += 1
        held = self._usage.setdefault(cluster_queue, {})
        for fr, amount in nonzero.items():
            left = held.get(fr, 0) + sign * amount
            if left:
                held[fr] = left
            else:
                held.pop(fr, None)
        if not held:
            del self._usage[cluster_queue]

    def rebuild(self, charges: Iterable[tuple[WorkloadKey, Charge]]) -> None:
        self.generation += 1
        self._usage.clear()
        self._charges.clear()
        self._holders.clear()
        for key, charge in charges:
            self.reserve(key, charge)

    def used(self, cluster_queue: str, fr: FlavorResource) -> int:
        return self._usage.get(cluster_queue, {}).get(fr, 0)

    def used_by(self, cluster_queue: str) -> Mapping[FlavorResource, int]:
        """The ClusterQueue's usage as it is now (a view: read it before the ledger moves)."""
        return self._usage.get(cluster_queue, _NOTHING)

    def usage(self, cluster_queue: str) -> dict[FlavorResource, int]:
        return dict(self._usage.get(cluster_queue, {}))

    def holds(self, key: WorkloadKey) -> bool:
        return key in self._charges

    def charge_of(self, key: WorkloadKey) -> Charge | None:
        return self._charges.get(key)

    def holders(self, cluster_queue: str | None = None) -> list[WorkloadKey]:
        if cluster_queue is None:
            return list(self._charges)
        return list(self._holders.get(cluster_queue, ()))

    def holder_count(self, cluster_queue: str) -> int:
        return len(self._holders.get(cluster_queue, ()))

    def snapshot(self) -> dict[str, dict[FlavorResource, int]]:
        return {cq: dict(u) for cq, u in self._usage.items()}
