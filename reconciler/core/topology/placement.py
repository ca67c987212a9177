"""Placing one pod set in a Topology's domains, as Kueue v0.18.1's TAS does it (default features).

Phase 1: how many pods fit in each leaf (its free capacity divided by one pod's requests plus one
``pods``; leaves whose node has an untolerated NoSchedule/NoExecute taint, or does not match the
pod set's node selector or required node affinity, hold none, counted in the exclusion statistics
when the lowest level is the hostname), summed up the tree.
Phase 2: the level. ``required: L``: one domain of level L must hold all pods, the best fit among
those that can (the fewest free places, then the first by level values), or the pod set does not
fit. ``preferred: L``: the same at L, else one level up, and so on; at the top, the domains with
the most room are taken in turn (best fit for the last). ``unconstrained``: the domains with the
least room that can hold all pods, else taken in turn from the least room up (Kueue's
LeastFreeCapacity, TASProfileMixed being on by default).
Phase 3: down to the lowest level, the chosen domains' children are taken in turn in the same
order until all pods are placed. The assignment lists the leaves with their pod counts (only the
hostname when it is the lowest level). Slices, leaders and balanced placement are not done here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from reconciler.api import Affinity, Toleration

from ..primitives.selectors import first_untolerated_taint, requirement_matches, taint_text
from .domains import Domain, TopologyTree
from .requests import TopologyRequest

__all__ = ["DomainCount", "NotFit", "Placed", "PodSetPlacement", "place"]


@dataclass(frozen=True, slots=True)
class PodSetPlacement:
    """What one pod of the pod set needs and where it may run."""

    count: int
    per_pod: Mapping[str, int]
    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity: Affinity | None = None
    tolerations: Sequence[Toleration] = ()


@dataclass(frozen=True, slots=True)
class DomainCount:
    values: tuple[str, ...]
    count: int


@dataclass(frozen=True, slots=True)
class Placed:
    """The topology assignment: the levels it names and the domains with their pod counts."""

    levels: tuple[str, ...]
    domains: tuple[DomainCount, ...]


@dataclass(frozen=True, slots=True)
class NotFit:
    message: str


@dataclass(slots=True)
class _Stats:
    total_nodes: int = 0
    node_selector: int = 0
    affinity: int = 0
    taints: Counter[str] = field(default_factory=Counter)
    resources: Counter[str] = field(default_factory=Counter)

    def reasons(self) -> str:
        found = [
            f"{name}: {n}"
            for name, n in (("nodeSelector", self.node_selector), ("affinity", self.affinity))
            if n
        ]
        found += [f'taint "{t}": {n}' for t, n in self.taints.items()]
        found += [f'resource "{r}": {n}' for r, n in self.resources.items()]
        return ", ".join(sorted(found))


def place(tree: TopologyTree, request: TopologyRequest, pod_set: PodSetPlacement) -> Placed | NotFit:
    """Where the pod set's pods go in the tree, or Kueue's message when they do not fit."""
    if request.slice_level is not None or request.slice_size is not None:
        return NotFit("podset slice topology is not supported by this controller")
    level = request.level if not request.unconstrained else None
    index = len(tree.levels) - 1 if level is None else tree.level_index(level)
    if index is None:
        return NotFit(f"no requested topology level: {level}")
    stats = _fill_counts(tree, pod_set)
    unconstrained = request.unconstrained or level is None
    found = _fit_level(tree, index, pod_set.count, request.required is not None, unconstrained, stats)
    if isinstance(found, NotFit):
        return found
    fit_index, chosen = found
    chosen = _take(chosen, pod_set.count, unconstrained)
    for _ in range(fit_index, len(tree.levels) - 1):
        children = [child for domain in chosen for child in domain.children]
        chosen = _take(_sorted(children, unconstrained), pod_set.count, unconstrained)
    return _assignment(tree, chosen)


def _fill_counts(tree: TopologyTree, pod_set: PodSetPlacement) -> _Stats:
    stats = _Stats()
    one = {**pod_set.per_pod, "pods": pod_set.per_pod.get("pods", 0) + 1}
    for depth in range(len(tree.levels) - 2, -1, -1):
        for domain in tree.per_level[depth]:
            domain.state = 0
    for leaf in tree.leaves:
        stats.total_nodes += 1
        leaf.state = 0
        if tree.lowest_is_hostname and _excluded(leaf, pod_set, stats):
            continue
        leaf.state, limiting = _count_in(one, leaf.free)
        if leaf.state == 0 and limiting:
            stats.resources[limiting] += 1
    for depth in range(len(tree.levels) - 2, -1, -1):
        for domain in tree.per_level[depth]:
            domain.state = sum(child.state for child in domain.children)
    return stats


def _excluded(leaf: Domain, pod_set: PodSetPlacement, stats: _Stats) -> bool:
    node = leaf.nodes[0]
    taint = first_untolerated_taint(node.taints, pod_set.tolerations)
    if taint is not None:
        stats.taints[taint_text(taint)] += 1
        return True
    if any(node.labels.get(k) != v for k, v in pod_set.node_selector.items()):
        stats.node_selector += 1
        return True
    if not _affinity_matches(pod_set.affinity, node.labels):
        stats.affinity += 1
        return True
    return False


def _affinity_matches(affinity: Affinity | None, labels: Mapping[str, str]) -> bool:
    node_affinity = affinity.node_affinity if affinity is not None else None
    required = node_affinity.required_during_scheduling_ignored_during_execution if node_affinity else None
    if required is None or not required.node_selector_terms:
        return True
    return any(
        all(requirement_matches(e.key, e.operator, e.values, labels) for e in term.match_expressions)
        for term in required.node_selector_terms
    )


def _count_in(one: Mapping[str, int], free: Mapping[str, int]) -> tuple[int, str]:
    """How many pods fit in `free`, and the resource that limits it (ties: the first by name)."""
    best: int | None = None
    limiting = ""
    for name in sorted(one):
        need = one[name]
        if need == 0:
            continue
        if name not in free:
            return 0, name
        fits = max(free[name] // need, 0)
        if best is None or fits < best:
            best, limiting = fits, name
    return (best if best is not None else 0), limiting


def _fit_level(
    tree: TopologyTree, index: int, count: int, required: bool, unconstrained: bool, stats: _Stats
) -> tuple[int, list[Domain]] | NotFit:
    """The level and the domains that hold all pods (Kueue's findLevelWithFitDomains)."""
    domains = tree.per_level[index]
    if not domains:
        return NotFit(f"no topology domains at level: {tree.levels[index]}")
    ordered = _sorted(domains, unconstrained)
    if unconstrained:
        fitting = next((d for d in ordered if d.state >= count), None)
        if fitting is not None:
            return index, [fitting]
    top = ordered[0]
    if not unconstrained and top.state >= count:
        return index, [_best_fit(ordered, count)]
    if required:
        return _not_fit(tree, top.state, count, stats)
    if index > 0 and not unconstrained:
        return _fit_level(tree, index - 1, count, required, unconstrained, stats)
    results: list[Domain] = []
    remaining = count
    for i, domain in enumerate(ordered):
        if remaining <= 0:
            break
        if not unconstrained and domain.state >= remaining:
            domain = _best_fit(ordered[i:], remaining)
        results.append(domain)
        remaining -= domain.state
    if remaining > 0:
        return _not_fit(tree, count - remaining, count, stats)
    return index, results


def _sorted(domains: Sequence[Domain], unconstrained: bool) -> list[Domain]:
    """Best fit: the most room first; least free capacity (unconstrained): the least room first;
    then by level values."""
    sign = 1 if unconstrained else -1
    return sorted(domains, key=lambda d: (sign * d.state, d.values))


def _best_fit(domains: Sequence[Domain], needed: int) -> Domain:
    """The first domain with the fewest places that still holds `needed`, else the first."""
    best = domains[0]
    for domain in domains:
        if needed <= domain.state < best.state:
            best = domain
    return best


def _take(domains: Sequence[Domain], count: int, unconstrained: bool) -> list[Domain]:
    """Domains in turn until `count` pods are placed; each one's state becomes its pod count."""
    chosen: list[Domain] = []
    remaining = count
    for i, domain in enumerate(domains):
        if not unconstrained and domain.state >= remaining:
            domain = _best_fit(domains[i:], remaining)
        if domain.state >= remaining:
            domain.state = remaining
            chosen.append(domain)
            return chosen
        remaining -= domain.state
        chosen.append(domain)
    return chosen


def _not_fit(tree: TopologyTree, fit: int, total: int, stats: _Stats) -> NotFit:
    name = tree.name
    if fit == 0:
        text = f'topology "{name}" doesn\'t allow to fit any of {total} pod(s)'
    else:
        text = f'topology "{name}" allows to fit only {fit} out of {total} pod(s)'
    reasons = stats.reasons()
    if reasons:
        text += f". Total nodes: {stats.total_nodes}; excluded: {reasons}"
    return NotFit(text)


def _assignment(tree: TopologyTree, leaves: Sequence[Domain]) -> Placed:
    start = len(tree.levels) - 1 if tree.lowest_is_hostname else 0
    ordered = sorted(leaves, key=lambda d: d.values)
    domains = tuple(DomainCount(d.values[start:], d.state) for d in ordered if d.state > 0)
    return Placed(tree.levels[start:], domains)
