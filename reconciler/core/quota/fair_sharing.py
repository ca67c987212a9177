"""The dominant resource share of a ClusterQueue or Cohort in its cohort tree, as Kueue's fair
sharing computes it.

For every flavor-resource of a node (a ClusterQueue's quotas; a cohort's own and its subtree's),
what it uses beyond its subtree quota is borrowed. Borrowed amounts are summed per resource over
the flavors and set against what the tree could lend at the node's parent (for each
flavor-resource the tree knows, what the parent could use with nothing else in use, summed per
resource), times 1000. The largest of these ratios is the node's share, the resource its dominant
resource; divided by the node's weight it is the weighted share. A node within its quota, or
with no parent, has share 0; a node with weight 0 that borrows has an infinite weighted share.

Floats are used where Kueue uses them, in the same order of operations, so that equal inputs
compare equal here as there; the rounded value (`rounded`) is Kueue's integer weightedShare.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from .capacity import CohortTree, Node
from .ledger import Charge, FlavorResource, Ledger

__all__ = [
    "MAX_SHARE",
    "NEGATIVE_SHARE",
    "Share",
    "compare_shares",
    "dominant_share",
    "node_flavor_resources",
    "shares_on_path",
    "simulated_usage",
]

# Kueue's weightedShare for a borrowing node of weight 0 (the largest int64).
MAX_SHARE = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Share:
    """A node's dominant resource share (Kueue's DRS)."""

    weight: float = 1.0
    # The largest borrowed/lendable ratio, times 1000, before the weight.
    ratio: float = 0.0
    dominant: str = ""
    # The flavor-resources the node uses beyond its quota.
    borrowed: frozenset[FlavorResource] = field(default_factory=frozenset)

    @property
    def borrowing(self) -> bool:
        return bool(self.borrowed)

    @property
    def is_zero(self) -> bool:
        return self.ratio == 0

    def borrowing_on(self, requests: Mapping[FlavorResource, int]) -> bool:
        """It borrows on one of the flavor-resources `requests` asks for."""
        return any(requests.get(fr, 0) > 0 for fr in self.borrowed)

    @property
    def zero_weight_borrows(self) -> bool:
        return self.weight == 0 and not self.is_zero

    def precise(self) -> float:
        """The weighted share (infinite for a borrowing node of weight 0)."""
        if self.is_zero:
            return 0.0
        if self.weight == 0:
            return math.inf
        return self.ratio / self.weight

    def rounded(self) -> int:
        """Kueue's status.fairSharing.weightedShare: the weighted share rounded up."""
        if self.zero_weight_borrows:
            return MAX_SHARE
        return math.ceil(self.precise())


# Below every real share: where a search for the largest starts.
NEGATIVE_SHARE = Share(ratio=-1.0)


def compare_shares(a: Share, b: Share) -> int:
    """-1, 0 or 1: lower is preferred for admission, higher for preemption. Borrowing nodes of
    weight 0 come last, ordered by their unweighted ratio."""
    if a.zero_weight_borrows and b.zero_weight_borrows:
        x, y = a.ratio, b.ratio
    elif a.zero_weight_borrows:
        return 1
    elif b.zero_weight_borrows:
        return -1
    else:
        x, y = a.precise(), b.precise()
    return (x > y) - (x < y)


def node_flavor_resources(tree: CohortTree, node: Node) -> frozenset[FlavorResource]:
    """The flavor-resources a node has a subtree quota for (0 included)."""
    key = ("frs", node)
    known = tree.shape_memo.get(key)
    if known is None:
        known = tree.shape_memo[key] = frozenset(_flavor_resources(tree, node, None))
    assert isinstance(known, frozenset)
    return known


def _flavor_resources(tree: CohortTree, node: Node, _seen: set[str] | None) -> set[FlavorResource]:
    kind, name = node
    out: set[FlavorResource] = set()
    if kind == "cq":
        model = tree.cluster_queues.get(name)
        groups = [] if model is None else model.groups
    else:
        cohort = tree.cohort_models.get(name)
        groups = [] if cohort is None else cohort.groups
    for group in groups:
        for quota in group.flavors:
            out.update((quota.name, r) for r in quota.nominal)
    if kind == "cohort":
        seen = _seen if _seen is not None else set()
        seen.add(name)
        for child in tree.children(name):
            if child[0] == "cq" or child[1] not in seen:
                out |= _flavor_resources(tree, child, seen)
    return out


def _weight(tree: CohortTree, node: Node) -> float:
    kind, name = node
    if kind == "cq":
        model = tree.cluster_queues.get(name)
        return 1.0 if model is None else float(model.fair_weight)
    cohort = tree.cohort_models.get(name)
    return 1.0 if cohort is None else float(cohort.fair_weight)


def _lendable(tree: CohortTree, parent: str) -> dict[str, int]:
    """Per resource, what the tree could give the cohort `parent` with nothing else in use (quotas
    alone decide it: kept until the tree's shape changes)."""
    key = ("lendable", parent)
    known = tree.shape_memo.get(key)
    if known is None:
        known = tree.shape_memo[key] = _compute_lendable(tree, parent)
    assert isinstance(known, dict)
    return known


def _compute_lendable(tree: CohortTree, parent: str) -> dict[str, int]:
    ancestors = tree.ancestors(("cohort", parent))
    root = ancestors[-1] if ancestors else parent
    lendable: dict[str, int] = {}
    for fr in node_flavor_resources(tree, ("cohort", root)):
        lendable[fr[1]] = lendable.get(fr[1], 0) + tree.potential(("cohort", parent), fr)
    return lendable


def dominant_share(tree: CohortTree, node: Node, added: Mapping[FlavorResource, int] | None = None) -> Share:
    """The node's share with the usage the ledger holds now (and `added` on top, at this node)."""
    weight = _weight(tree, node)
    parent = tree.parent(node)
    if parent is None:
        return Share(weight)
    borrowed_by_resource: dict[str, int] = {}
    borrowed: set[FlavorResource] = set()
    for fr in node_flavor_resources(tree, node):
        subtree, usage, _ = tree.stats(node, fr)
        over = usage + (added.get(fr, 0) if added else 0) - subtree
        if over > 0:
            borrowed_by_resource[fr[1]] = borrowed_by_resource.get(fr[1], 0) + over
            borrowed.add(fr)
    if not borrowed:
        return Share(weight)
    ratio, dominant = 0.0, ""
    lendable = _lendable(tree, parent)
    for resource, amount in borrowed_by_resource.items():
        lent = lendable.get(resource, 0)
        if lent <= 0:
            continue
        value = float(amount) * 1000.0 / float(lent)
        if value > ratio or (value == ratio and resource < dominant):
            ratio, dominant = value, resource
    return Share(weight, ratio, dominant, frozenset(borrowed))


def shares_on_path(tree: CohortTree, cluster_queue: str, usage: Mapping[FlavorResource, int]) -> list[Share]:
    """The shares of the ClusterQueue and of each cohort above it (root last) were `usage` added
    to the ClusterQueue, without touching the ledger: each level passes up what its unused local
    quota cannot hold."""
    node: Node = ("cq", cluster_queue)
    path = [node, *(("cohort", c) for c in tree.ancestors(node))]
    added = dict(usage)
    out: list[Share] = []
    for i, level in enumerate(path):
        out.append(dominant_share(tree, level, added))
        if i + 1 < len(path):
            up: dict[FlavorResource, int] = {}
            for fr, amount in added.items():
                free = tree.local_available(level, fr)
                if amount > free:
                    up[fr] = amount - free
            added = up
    return out


_SIMULATIONS = itertools.count()


@contextmanager
def simulated_usage(
    ledger: Ledger, cluster_queue: str, usage: Mapping[FlavorResource, int]
) -> Iterator[tuple[str, str]]:
    """The ledger with `usage` charged to `cluster_queue` for the duration (a workload being
    considered), given back after. Yields the charge's key (to lift it for a while)."""
    key = ("", f"~simulated-{next(_SIMULATIONS)}")
    ledger.reserve(key, Charge(cluster_queue, dict(usage)))
    try:
        yield key
    finally:
        if ledger.holds(key):
            ledger.release(key)
