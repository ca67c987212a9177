"""How much of a flavor's resource a ClusterQueue can still use: its own quota, and in a cohort
what the rest of the cohort tree lends.

A cohort tree (Kueue's hierarchical cohorts) has ClusterQueues as leaves and
cohorts as inner nodes; a cohort named only by ClusterQueues' `cohortName` is
a root with no quota of its own. Every node has, per flavor and resource:

- a *subtree quota*: its own nominal quota plus what each child lends to it
  (the child's subtree quota minus the part it keeps, its *local* quota:
  `subtree - lendingLimit`, 0 without a lendingLimit);
- a *usage*: a ClusterQueue's own; a cohort's is what its children use beyond
  their local quota.

A node may use its unused local quota plus what its parent has left for it,
the latter capped by its borrowingLimit (at most `borrowingLimit` beyond what
it stores in the parent). The root has its subtree quota minus its usage.
This is Kueue's arithmetic (pkg/cache/scheduler resource_node).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Set
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Protocol

from ..model.clusterqueues import ClusterQueueModel, FlavorQuota, ResourceGroupModel
from .ledger import FlavorResource, Ledger

__all__ = ["Capacity", "CohortModel", "CohortTree", "NominalCapacity"]


class Capacity(Protocol):
    def used(self, cluster_queue: str, fr: FlavorResource) -> int: ...

    def limits(self, cq: ClusterQueueModel, fr: FlavorResource, nominal: int, used: int) -> tuple[int, int]:
        """(what `cq` could use with nothing else in use, what is left for it now; negative when
        over-committed), given its own nominal quota and usage of `fr`."""
        ...

    def borrow_level(self, cq: ClusterQueueModel, fr: FlavorResource, value: int) -> tuple[int, bool]:
        """Kueue's FindHeightOfLowestSubtreeThatFits for `value` of `fr` in `cq`: (how high in the
        cohort tree it must borrow, 0 when not at all; whether a subtree below the root holds it)."""
        ...


@dataclass(frozen=True, slots=True)
class NominalCapacity:
    """Each ClusterQueue on its own: its nominal quota is all there is."""

    ledger: Ledger

    def used(self, cluster_queue: str, fr: FlavorResource) -> int:
        return self.ledger.used(cluster_queue, fr)

    def limits(self, cq: ClusterQueueModel, fr: FlavorResource, nominal: int, used: int) -> tuple[int, int]:
        return nominal, nominal - used

    def borrow_level(self, cq: ClusterQueueModel, fr: FlavorResource, value: int) -> tuple[int, bool]:
        return 0, False


@dataclass(slots=True)
class CohortModel:
    """A Cohort object: its parent and its own quota (both optional)."""

    name: str
    parent: str | None = None
    groups: list[ResourceGroupModel] = field(default_factory=list)
    # spec.fairSharing.weight (1 when not given).
    fair_weight: Fraction = Fraction(1)

    def quota(self, flavor: str, resource: str) -> FlavorQuota | None:
        for group in self.groups:
            if resource in group.covered:
                return next((q for q in group.flavors if q.name == flavor), None)
        return None


# A node of the tree: ("cq", name) or ("cohort", name).
Node = tuple[str, str]


def _limits_of(quota: FlavorQuota | None, resource: str) -> tuple[int, int | None, int | None]:
    if quota is None:
        return 0, None, None
    return (
        quota.nominal.get(resource, 0),
        quota.borrowing_limit.get(resource),
        quota.lending_limit.get(resource),
    )


@dataclass(frozen=True, slots=True)
class CohortTree:
    """The cohort forest over the ledger's usage; answers are computed afresh on each call."""

    ledger: Ledger
    cluster_queues: Mapping[str, ClusterQueueModel]
    # Cohort name -> its member ClusterQueues (direct children).
    members: Mapping[str, Set[str]]
    # Cohort objects by name; a cohort only named by ClusterQueues has none.
    cohort_models: Mapping[str, CohortModel] = field(default_factory=dict)
    # Cohort name -> its child cohorts.
    child_cohorts: Mapping[str, Set[str]] = field(default_factory=dict)
    # Cohorts' (subtree quota, usage, local quota) by (cohort, fr, ledger generation): usage
    # moves the generation on; the owner clears it when the tree's shape changes.
    memo: dict[tuple[str, FlavorResource, int], tuple[int, int, int]] = field(default_factory=dict)
    # What depends on the tree's quotas alone (not on usage), for its owner to clear on a change
    # of shape: fair sharing's lendable amounts and flavor-resources per node.
    shape_memo: dict[object, object] = field(default_factory=dict)

    # --- structure ---------------------------------------------------------------------
    # What depends on the tree's shape alone is kept in `shape_memo` under a tagged key.

    def parent(self, node: Node) -> str | None:
        kind, name = node
        if kind == "cq":
            model = self.cluster_queues.get(name)
            return None if model is None else model.cohort
        cohort = self.cohort_models.get(name)
        return None if cohort is None else cohort.parent

    def _ancestors(self, node: Node) -> tuple[str, ...]:
        key = ("ancestors", node)
        known = self.shape_memo.get(key)
        if known is None:
            out: list[str] = []
            current = self.parent(node)
            while current is not None and current not in out:
                out.append(current)
                current = self.parent(("cohort", current))
            known = self.shape_memo[key] = tuple(out)
        assert isinstance(known, tuple)
        return known

    def ancestors(self, node: Node) -> list[str]:
        """Cohorts from the parent up to the root; a cycle ends the walk where it closes."""
        return list(self._ancestors(node))

    def in_cycle(self, cluster_queue: str) -> bool:
        path = self._ancestors(("cq", cluster_queue))
        return bool(path) and self.parent(("cohort", path[-1])) is not None

    def root(self, cluster_queue: str) -> str | None:
        path = self._ancestors(("cq", cluster_queue))
        return path[-1] if path else None

    def _children(self, cohort: str) -> tuple[Node, ...]:
        key = ("children", cohort)
        known = self.shape_memo.get(key)
        if known is None:
            cohorts = [("cohort", child) for child in sorted(self.child_cohorts.get(cohort, ()))]
            queues = [("cq", cq) for cq in sorted(self.members.get(cohort, ()))]
            known = self.shape_memo[key] = (*cohorts, *queues)
        assert isinstance(known, tuple)
        return known

    def children(self, cohort: str) -> Iterator[Node]:
        return iter(self._children(cohort))

    def subtree_cluster_queues(self, cohort: str, _seen: set[str] | None = None) -> list[str]:
        key = ("subtree", cohort)
        if _seen is None:
            known = self.shape_memo.get(key)
            if known is not None:
                assert isinstance(known, tuple)
                return list(known)
        seen = _seen if _seen is not None else set()
        if cohort in seen:
            return []
        seen.add(cohort)
        out: list[str] = []
        for kind, name in self._children(cohort):
            out.extend(self.subtree_cluster_queues(name, seen) if kind == "cohort" else [name])
        if _seen is None:
            self.shape_memo[key] = tuple(out)
        return out

    # --- quantities ---------------------------------------------------------------------

    def _quota(self, node: Node, fr: FlavorResource) -> tuple[int, int | None, int | None]:
        key = ("quota", node, fr)
        known = self.shape_memo.get(key)
        if known is None:
            kind, name = node
            model: ClusterQueueModel | CohortModel | None = (
                self.cluster_queues.get(name) if kind == "cq" else self.cohort_models.get(name)
            )
            known = self.shape_memo[key] = _limits_of(None if model is None else model.quota(*fr), fr[1])
        assert isinstance(known, tuple)
        return known

    def stats(self, node: Node, fr: FlavorResource, _seen: set[str] | None = None) -> tuple[int, int, int]:
        """(subtree quota, usage, local quota) of a node."""
        kind, name = node
        if kind == "cq":
            nominal, _, lending = self._quota(node, fr)
            local = 0 if lending is None else max(0, nominal - lending)
            return nominal, self.ledger.used(name, fr), local
        memo_key = (name, fr, self.ledger.generation)
        known = self.memo.get(memo_key)
        if known is not None:
            return known
        nominal, _, lending = self._quota(node, fr)
        seen = _seen if _seen is not None else set()
        seen.add(name)
        subtree, usage = nominal, 0
        for child in self._children(name):
            if child[0] == "cohort" and child[1] in seen:
                continue
            c_subtree, c_usage, c_local = self.stats(child, fr, seen)
            subtree += c_subtree - c_local
            usage += max(0, c_usage - c_local)
        local = 0 if lending is None else max(0, subtree - lending)
        if _seen is None:  # a whole subtree (not one cut by a cycle)
            self.memo[memo_key] = (subtree, usage, local)
        return subtree, usage, local

    def local_available(self, node: Node, fr: FlavorResource) -> int:
        _, usage, local = self.stats(node, fr)
        return max(0, local - usage)

    def path_figures(self, cluster_queue: str, frs: Iterable[FlavorResource]) -> tuple[object, ...]:
        """What the arithmetic along a ClusterQueue's path reads of usage for `frs`: its own usage,
        and each cohort's (subtree quota, usage, local quota) up to the root. With the tree's shape
        unchanged, equal figures give equal answers for the ClusterQueue."""
        own = self.ledger.used_by(cluster_queue)
        out: list[object] = [own.get(fr, 0) for fr in frs]
        memo, generation = self.memo, self.ledger.generation
        for cohort in self._ancestors(("cq", cluster_queue)):
            for fr in frs:
                known = memo.get((cohort, fr, generation))
                out.append(known if known is not None else self.stats(("cohort", cohort), fr))
        return tuple(out)

    def path(self, node: Node) -> tuple[Node, ...]:
        """The node and its cohorts up to the root."""
        key = ("path", node)
        known = self.shape_memo.get(key)
        if known is None:
            known = self.shape_memo[key] = (node, *(("cohort", c) for c in self._ancestors(node)))
        assert isinstance(known, tuple)
        return known

    def available(self, node: Node, fr: FlavorResource) -> int:
        """What the node can still use (negative when over-committed)."""
        path = self.path(node)
        top = path[-1]
        subtree, usage, _ = self.stats(top, fr)
        left = subtree - usage
        for below in reversed(path[:-1]):
            subtree, usage, local = self.stats(below, fr)
            _, borrowing, _ = self._quota(below, fr)
            if borrowing is not None:
                stored = subtree - local
                used_in_parent = max(0, usage - local)
                left = min(left, stored - used_in_parent + borrowing)
            left = max(0, local - usage) + left
        return left

    def potential(self, node: Node, fr: FlavorResource) -> int:
        """What the node could use with nothing else in use (its quotas alone decide it)."""
        key = ("potential", node, fr)
        known = self.shape_memo.get(key)
        if known is None:
            path = self.path(node)
            most = self.stats(path[-1], fr)[0]
            for below in reversed(path[:-1]):
                subtree, _, local = self.stats(below, fr)
                _, borrowing, _ = self._quota(below, fr)
                most = local + most
                if borrowing is not None:
                    most = min(most, subtree + borrowing)
            known = self.shape_memo[key] = most
        assert isinstance(known, int)
        return known

    def borrowing_with(self, node: Node, fr: FlavorResource, amount: int) -> bool:
        """The node would use more than its subtree quota (its nominal for a ClusterQueue)."""
        subtree, usage, _ = self.stats(node, fr)
        return subtree < usage + amount

    def within_nominal(self, node: Node, frs: Iterable[FlavorResource]) -> bool:
        return all(not self.borrowing_with(node, fr, 0) for fr in frs)

    def fits_in_quota(
        self, node: Node, requests: Mapping[FlavorResource, int]
    ) -> tuple[bool, dict[FlavorResource, int]]:
        """Whether `requests` fit in the node's subtree quota; what the parent must supply."""
        fits = True
        remaining: dict[FlavorResource, int] = {}
        for fr, amount in requests.items():
            subtree, usage, local = self.stats(node, fr)
            if subtree < usage + amount:
                fits = False
            remaining[fr] = max(0, amount - max(0, local - usage))
        return fits, remaining

    # --- Capacity -----------------------------------------------------------------------

    def used(self, cluster_queue: str, fr: FlavorResource) -> int:
        return self.ledger.used(cluster_queue, fr)

    def limits(self, cq: ClusterQueueModel, fr: FlavorResource, nominal: int, used: int) -> tuple[int, int]:
        if cq.cohort is None:
            return nominal, nominal - used
        node = ("cq", cq.name)
        return self.potential(node, fr), self.available(node, fr)

    def height(self, cohort: str, _seen: set[str] | None = None) -> int:
        """Distance from a cohort to its furthest leaf."""
        key = ("height", cohort)
        if _seen is None:
            known = self.shape_memo.get(key)
            if known is not None:
                assert isinstance(known, int)
                return known
        seen = _seen if _seen is not None else set()
        seen.add(cohort)
        children = self._children(cohort)
        most = min(len(children), 1)
        for kind, name in children:
            if kind == "cohort" and name not in seen:
                most = max(most, self.height(name, seen) + 1)
        if _seen is None:
            self.shape_memo[key] = most
        return most

    def borrow_level(self, cq: ClusterQueueModel, fr: FlavorResource, value: int) -> tuple[int, bool]:
        node = ("cq", cq.name)
        parents = self._ancestors(node)
        if not parents or not self.borrowing_with(node, fr, value):
            return 0, bool(parents)
        remaining = value - self.local_available(node, fr)
        for cohort in parents:
            if not self.borrowing_with(("cohort", cohort), fr, remaining):
                return self.height(cohort), self.parent(("cohort", cohort)) is not None
            remaining -= self.local_available(("cohort", cohort), fr)
        return self.height(parents[-1]), False
