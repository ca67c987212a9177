"""A placement as the Workload's admission records it, and back.

``podSetAssignments[].topologyAssignment`` (v1beta2) lists the levels and one compact slice, as
Kueue v0.18.1 writes it: per level, one ``universal`` value when every domain has the same, else
``individual`` roots with the longest common ``prefix`` and ``suffix`` taken out; the pod counts
``universal`` when all are equal, else ``individual``. Each domain's node selector is its level
values under the level keys (what Kueue writes on the pods it ungates). `charge` takes a placement's
pods off the leaves' free capacity, so the next pod set (or Workload) sees what is left.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from reconciler.api import (
    TopologyAssignment,
    TopologyAssignmentSlice,
    TopologyIndividualValues,
    TopologyLevelValues,
    TopologyPodCounts,
)

from .domains import TopologyTree
from .placement import DomainCount, Placed

__all__ = ["charge", "decode_assignment", "encode_assignment", "node_selector"]


def encode_assignment(placed: Placed) -> TopologyAssignment:
    levels = list(placed.levels)
    if not placed.domains:
        return TopologyAssignment(levels=levels, slices=[])
    per_level = [_compact([d.values[i] for d in placed.domains]) for i in range(len(levels))]
    counts = [d.count for d in placed.domains]
    pod_counts = (
        TopologyPodCounts(universal=counts[0])
        if len(set(counts)) == 1
        else TopologyPodCounts(individual=counts)
    )
    piece = TopologyAssignmentSlice(
        domain_count=len(placed.domains), values_per_level=per_level, pod_counts=pod_counts
    )
    return TopologyAssignment(levels=levels, slices=[piece])


def _compact(values: Sequence[str]) -> TopologyLevelValues:
    prefix = _common_prefix(values)
    longest = max(len(v) for v in values)
    if len(prefix) == longest:
        return TopologyLevelValues(universal=prefix)
    suffix = _common_prefix([v[::-1] for v in values])[::-1]
    shortest = min(len(v) for v in values)
    if len(prefix) + len(suffix) > shortest:
        prefix = prefix[: shortest - len(suffix)]
    roots = [v[len(prefix) : len(v) - len(suffix)] for v in values]
    return TopologyLevelValues(
        individual=TopologyIndividualValues(roots=roots, prefix=prefix or None, suffix=suffix or None)
    )


def _common_prefix(values: Sequence[str]) -> str:
    first = values[0]
    end = len(first)
    for value in values[1:]:
        end = min(end, len(value))
        for i in range(end):
            if value[i] != first[i]:
                end = i
                break
    return first[:end]


def decode_assignment(assignment: TopologyAssignment) -> Placed:
    """The domains and pod counts a topologyAssignment names, slice by slice."""
    domains: list[DomainCount] = []
    for piece in assignment.slices:
        n = piece.domain_count
        columns = [_values(level, n) for level in piece.values_per_level]
        counts = piece.pod_counts
        per_domain = counts.individual if counts.individual is not None else [counts.universal or 0] * n
        for i in range(n):
            domains.append(DomainCount(tuple(column[i] for column in columns), per_domain[i]))
    return Placed(tuple(assignment.levels), tuple(domains))


def _values(level: TopologyLevelValues, n: int) -> list[str]:
    if level.universal is not None:
        return [level.universal] * n
    individual = level.individual or TopologyIndividualValues()
    prefix, suffix = individual.prefix or "", individual.suffix or ""
    return [f"{prefix}{root}{suffix}" for root in individual.roots]


def node_selector(levels: Sequence[str], domain: DomainCount) -> dict[str, str]:
    """The node labels a pod placed in this domain must carry."""
    return dict(zip(levels, domain.values, strict=True))


def charge(tree: TopologyTree, placed: Placed, per_pod: Mapping[str, int]) -> None:
    """Take the placed pods' requests (and one ``pods`` each) off their leaves' free capacity."""
    for domain in placed.domains:
        leaf = tree.by_values.get(domain.values)
        if leaf is None:
            continue  # a node gone since: nothing left there to take from
        for name, amount in per_pod.items():
            leaf.free[name] = leaf.free.get(name, 0) - amount * domain.count
        leaf.free["pods"] = leaf.free.get("pods", 0) - domain.count
