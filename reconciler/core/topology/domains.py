"""A Topology's domains built from Nodes, as Kueue's TAS snapshot builds them (v0.18.1).

A node belongs to the tree when it is ready and schedulable, carries the flavor's node labels and
a value for every level of the Topology. When the lowest level is ``kubernetes.io/hostname`` each
node is its own leaf (and the pod set's node selector, required node affinity and the node's
taints are checked node by node); otherwise the nodes sharing all level values make one leaf whose
free capacity is the sum of theirs. A domain's values are its level values from the top down to
its own level: a rack's are ``(block, rack)``.

The free capacity of a node is what the caller says is left on it: allocatable minus the requests
of the pods bound there (and of the pods Kueue already placed there), plus the free DRA devices the
node publishes (`dra_capacity`), each under its resource name. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from reconciler.api import Taint

from ..primitives.podrequests import Amounts, add_amounts

__all__ = ["HOSTNAME", "Domain", "TopologyNode", "TopologyTree", "build_tree"]

HOSTNAME = "kubernetes.io/hostname"


@dataclass(frozen=True, slots=True)
class TopologyNode:
    """A node as topology-aware scheduling sees it."""

    name: str
    labels: Mapping[str, str]
    free: Mapping[str, int]
    taints: Sequence[Taint] = ()
    ready: bool = True
    unschedulable: bool = False


@dataclass(eq=False, slots=True)
class Domain:
    """A topology domain: its level values (top down), children, and at a leaf its nodes and their
    summed free capacity. `state` is scratch space of a placement: how many pods fit here."""

    values: tuple[str, ...]
    children: list[Domain] = field(default_factory=list)
    nodes: list[TopologyNode] = field(default_factory=list)
    free: Amounts = field(default_factory=dict)
    state: int = 0

    @property
    def name(self) -> str:
        return self.values[-1]


@dataclass(slots=True)
class TopologyTree:
    """The domains of one Topology on one flavor's nodes: `per_level[i]` holds level i's domains."""

    name: str
    levels: tuple[str, ...]
    per_level: list[list[Domain]]
    # Each leaf by its level values, and by its lowest value alone (an assignment names only the
    # hostname when it is the lowest level).
    by_values: dict[tuple[str, ...], Domain] = field(default_factory=dict)

    @property
    def leaves(self) -> list[Domain]:
        return self.per_level[-1]

    @property
    def lowest_is_hostname(self) -> bool:
        return self.levels[-1] == HOSTNAME

    def level_index(self, level: str) -> int | None:
        return self.levels.index(level) if level in self.levels else None

    def domain(self, values: Sequence[str]) -> Domain | None:
        """The domain with these level values (top down), if the tree has it."""
        if not values or len(values) > len(self.levels):
            return None
        wanted = tuple(values)
        return next((d for d in self.per_level[len(wanted) - 1] if d.values == wanted), None)


def build_tree(
    name: str,
    levels: Sequence[str],
    nodes: Sequence[TopologyNode],
    flavor_labels: Mapping[str, str] | None = None,
) -> TopologyTree:
    """The domains of Topology `name` over the nodes of a flavor (those carrying `flavor_labels`)."""
    if not levels:
        raise ValueError(f"topology {name} has no levels")
    keys = tuple(levels)
    index: list[dict[tuple[str, ...], Domain]] = [{} for _ in keys]
    wanted = dict(flavor_labels or {})
    for node in sorted(nodes, key=lambda n: n.name):
        if not node.ready or node.unschedulable:
            continue
        if any(node.labels.get(k) != v for k, v in wanted.items()):
            continue
        values = tuple(node.labels.get(key) for key in keys)
        if any(v is None for v in values):
            continue
        path = tuple(v for v in values if v is not None)
        parent: Domain | None = None
        for depth in range(len(keys)):
            prefix = path[: depth + 1]
            domain = index[depth].get(prefix)
            if domain is None:
                domain = index[depth][prefix] = Domain(prefix)
                if parent is not None:
                    parent.children.append(domain)
            parent = domain
        assert parent is not None
        parent.nodes.append(node)
        add_amounts(parent.free, node.free)
    per_level = [sorted(level.values(), key=lambda d: d.values) for level in index]
    for level in per_level:
        for domain in level:
            domain.children.sort(key=lambda d: d.values)
    by_values = {leaf.values: leaf for leaf in per_level[-1]}
    if keys[-1] == HOSTNAME:
        by_values.update({leaf.values[-1:]: leaf for leaf in per_level[-1]})
    return TopologyTree(name, keys, per_level, by_values)
