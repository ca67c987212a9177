"""Cohort fair sharing in an explanation: the weighted shares the scheduler compares.

With the Configuration's `fairSharing` on, the scheduler admits across a Cohort tree by Kueue's
tournament: at each Cohort, the child (ClusterQueue or Cohort) with the lowest weighted share
goes first. The explanation shows, from the target's ClusterQueue up to the root, the shares of
every child at each level (Kueue's `status.fairSharing.weightedShare` values), so a user sees
when their queue waits because its share is higher than another's.
"""

from __future__ import annotations

from reconciler.core.engine import Engine
from reconciler.core.quota.capacity import Node

__all__ = ["cohort_shares"]


def _label(node: Node) -> str:
    kind, name = node
    return f"ClusterQueue {name}" if kind == "cq" else f"Cohort {name}"


def cohort_shares(engine: Engine, cluster_queue: str) -> list[str]:
    """One line per Cohort from the ClusterQueue's parent up to the root: each child's weighted
    share now, lowest first, the target's side marked; empty outside a cohort."""
    tree = engine.cache.capacity
    lines: list[str] = []
    node: Node = ("cq", cluster_queue)
    seen: set[str] = set()
    while (parent := tree.parent(node)) is not None and parent not in seen:
        seen.add(parent)
        shares = sorted(
            (
                (engine.share(*child).rounded(), _label(child), child == node)
                for child in tree.children(parent)
            ),
            key=lambda s: (s[0], s[1]),
        )
        if len(shares) > 1:
            parts = [f"{label} {value}{' (its side)' if mine else ''}" for value, label, mine in shares]
            lines.append(f"in Cohort {parent}, lowest admitted first: " + ", ".join(parts))
        node = ("cohort", parent)
    return lines
