"""Which head of a cohort tree goes next when fair sharing is on: Kueue's tournament.

Every ClusterQueue of the tree with a head offers it. Shares are computed as if each head were
admitted on its own: for the head's ClusterQueue and each cohort on its way up, the share of
the child through which the head reaches each cohort. Then, from the leaves up, each cohort
picks one head among those its children offer:

1. a head whose child (at this level) does not borrow on the flavor-resources the head asks
   for beats one whose child does;
2. the lower share of that child (with the head admitted) wins;
3. then the higher priority;
4. then the older queue-order timestamp.

The root's pick goes next; the shares are computed again for the rest, as usage moved.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass

from ..quota.capacity import CohortTree
from ..quota.fair_sharing import Share, compare_shares, shares_on_path
from ..quota.ledger import FlavorResource

__all__ = ["Contender", "tournament_winner"]


@dataclass(frozen=True, slots=True)
class Contender:
    """A ClusterQueue's head as the tournament sees it."""

    cluster_queue: str
    # What admitting it would add to its ClusterQueue's usage.
    usage: Mapping[FlavorResource, int]
    priority: int
    # Kueue's queue-order timestamp (RFC 3339: sorts as text).
    timestamp: str
    # The caller's handle on the head.
    ident: Hashable = None
    # It fits or may preempt: its turn can change what the others find.
    contends: bool = True


def _shares(tree: CohortTree, contenders: Mapping[str, Contender]) -> dict[tuple[str, str], Share]:
    """(cohort, ClusterQueue of the head) -> share, with that head admitted, of the cohort's child
    on the head's way up."""
    shares: dict[tuple[str, str], Share] = {}
    for name, contender in contenders.items():
        path = shares_on_path(tree, name, contender.usage)
        for share, cohort in zip(path, tree.ancestors(("cq", name)), strict=False):
            shares[(cohort, name)] = share
    return shares


def _less(a: Contender, b: Contender, cohort: str, shares: Mapping[tuple[str, str], Share]) -> bool:
    a_share, b_share = shares[(cohort, a.cluster_queue)], shares[(cohort, b.cluster_queue)]
    a_borrows, b_borrows = a_share.borrowing_on(a.usage), b_share.borrowing_on(b.usage)
    if a_borrows != b_borrows:
        return not a_borrows
    order = compare_shares(a_share, b_share)
    if order:
        return order < 0
    if a.priority != b.priority:
        return a.priority > b.priority
    return a.timestamp < b.timestamp


def _run(
    tree: CohortTree,
    cohort: str,
    contenders: Mapping[str, Contender],
    shares: Mapping[tuple[str, str], Share],
    seen: set[str],
) -> Contender | None:
    seen.add(cohort)
    candidates: list[Contender] = []
    for kind, name in tree.children(cohort):
        if kind == "cohort":
            if name in seen:
                continue
            picked = _run(tree, name, contenders, shares, seen)
            if picked is not None:
                candidates.append(picked)
    candidates += [contenders[n] for k, n in tree.children(cohort) if k == "cq" and n in contenders]
    if not candidates:
        return None
    best = candidates[0]
    for current in candidates[1:]:
        if _less(current, best, cohort, shares):
            best = current
    return best


def tournament_winner(tree: CohortTree, root: str, contenders: Mapping[str, Contender]) -> Contender | None:
    """The head of the cohort tree under `root` that goes next; `contenders` by ClusterQueue."""
    if not contenders:
        return None
    shares = _shares(tree, contenders)
    return _run(tree, root, contenders, shares, set())
