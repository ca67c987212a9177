"""Which admitted workloads to preempt so that a pending one fits, as Kueue's fair-sharing
preemption.

Candidates use a flavor-resource the workload lacks unused quota for, and are allowed by the
ClusterQueue's policy: its own admitted workloads (`withinClusterQueue`) and those of the other
ClusterQueues of its cohort tree that borrow on one of those flavor-resources
(`reclaimWithinCohort`). With the pending workload counted as admitted, the ClusterQueue to take
from next is found from the root down, at each level going to the child with the highest share
(children neither borrowing nor on the preemptor's way up drop out):

- from its own ClusterQueue a workload is taken outright (InClusterQueue);
- while the preemptor stays within its nominal quota on what it needs, outright too
  (InCohortReclamation);
- otherwise the first strategy decides (InCohortFairSharing), comparing shares where the two
  ClusterQueues' paths meet (the children of their lowest common cohort):
  `LessThanOrEqualToFinalShare`: the preemptor's share with the workload at most the target's
  after losing the candidate; `LessThanInitialShare`: below the target's share now. After a
  preemption the next ClusterQueue is looked for anew.

Candidates the first strategy refused are tried with `LessThanInitialShare` when it is listed
second, one per ClusterQueue. Once the workload fits, the targets not needed after all are put
back, from the second-to-last; the ledger is restored before returning.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from ..model.clusterqueues import ClusterQueueModel
from ..model.workloads import DeviceSizes, WorkloadInfo
from ..quota.cache import QuotaCache
from ..quota.capacity import CohortTree, Node
from ..quota.fair_sharing import NEGATIVE_SHARE, Share, compare_shares, dominant_share, simulated_usage
from ..quota.ledger import Charge, FlavorResource
from .preemption import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_FAIR_SHARING,
    IN_COHORT_RECLAMATION,
    LocalQueueUsage,
    Needs,
    Target,
    TopologyCheck,
    candidate_order,
    policy_allows,
    preemption_needs,
)

__all__ = ["fair_preemption_targets", "passes_strategy"]

WorkloadKey = tuple[str, str]
LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"


def passes_strategy(strategy: str, preemptor_new: Share, target_old: Share, target_new: Share) -> bool:
    if strategy == LESS_THAN_OR_EQUAL_TO_FINAL_SHARE:
        return compare_shares(preemptor_new, target_new) <= 0
    return compare_shares(preemptor_new, target_old) < 0


class _Ordering:
    """The ClusterQueues to take candidates from, highest share first (Kueue's target ordering)."""

    def __init__(
        self,
        tree: CohortTree,
        preemptor_cq: str,
        candidates: Sequence[tuple[WorkloadKey, str]],
        order: Callable[[WorkloadKey], tuple[object, ...]],
    ) -> None:
        self.tree, self.preemptor_cq, self.order = tree, preemptor_cq, order
        self.path = tree.ancestors(("cq", preemptor_cq))
        self.on_path = set(self.path)
        self.targets: dict[str, list[WorkloadKey]] = {}
        for key, cq in candidates:
            self.targets.setdefault(cq, []).append(key)
        self.pruned_cqs: set[str] = set()
        self.pruned_cohorts: set[str] = set()

    def has(self, cq: str) -> bool:
        return bool(self.targets.get(cq))

    def pop(self, cq: str) -> WorkloadKey:
        return self.targets[cq].pop(0)

    def drop(self, cq: str) -> None:
        self.pruned_cqs.add(cq)

    def __iter__(self) -> Iterator[str]:
        if not self.path:
            while self.has(self.preemptor_cq):
                yield self.preemptor_cq
            return
        root = self.path[-1]
        while root not in self.pruned_cohorts:
            target = self._next(root)
            if target is not None:
                yield target

    def _next(self, cohort: str) -> str | None:
        tree = self.tree
        best_cq, best_cq_share = None, NEGATIVE_SHARE
        best_cohort, best_cohort_share = None, NEGATIVE_SHARE
        for kind, name in tree.children(cohort):
            if kind == "cohort":
                if name in self.pruned_cohorts:
                    continue
                share = dominant_share(tree, ("cohort", name))
                if not share.borrowing and name not in self.on_path:
                    self.pruned_cohorts.add(name)
                elif compare_shares(share, best_cohort_share) >= 0:
                    best_cohort, best_cohort_share = name, share
                continue
            if name in self.pruned_cqs:
                continue
            share = dominant_share(tree, ("cq", name))
            if (not share.borrowing and name != self.preemptor_cq) or not self.has(name):
                self.pruned_cqs.add(name)
                continue
            versus = compare_shares(share, best_cq_share)
            if versus > 0:
                best_cq, best_cq_share = name, share
            elif versus == 0 and best_cq is not None and self._earlier(name, best_cq):
                best_cq = name
        if best_cohort is None and best_cq is None:
            self.pruned_cohorts.add(cohort)
            return None
        if best_cohort is not None and compare_shares(best_cohort_share, best_cq_share) >= 0:
            return self._next(best_cohort)
        return best_cq

    def _earlier(self, cq: str, than: str) -> bool:
        """Tied shares: the ClusterQueue whose first candidate comes first in candidate order."""
        return self.order(self.targets[cq][0]) < self.order(self.targets[than][0])

    def almost_lcas(self, target_cq: str) -> tuple[Node, Node]:
        """The children of the lowest cohort above both ClusterQueues, on each one's way up."""
        target_path = self.tree.ancestors(("cq", target_cq))
        lca = next(c for c in target_path if c in self.on_path)

        def below(cq: str, path: list[str]) -> Node:
            node: Node = ("cq", cq)
            for cohort in path:
                if cohort == lca:
                    return node
                node = ("cohort", cohort)
            return node

        return below(self.preemptor_cq, self.path), below(target_cq, target_path)


class _Run:
    """One preemption simulation on the ledger: what was removed, and whether the workload fits."""

    def __init__(
        self, cache: QuotaCache, model: ClusterQueueModel, requests: dict[FlavorResource, int]
    ) -> None:
        self.cache, self.model, self.requests = cache, model, requests
        self.tree = cache.capacity
        self.removed: list[tuple[Target, Charge]] = []
        self.incoming: WorkloadKey | None = None
        self.topology: TopologyCheck | None = None

    def remove(self, key: WorkloadKey, cq: str, reason: str) -> None:
        charge = self.cache.ledger.release(key)
        if charge is not None:
            self.removed.append((Target(key, cq, reason), charge))

    def fits(self) -> bool:
        """It fits once its own (simulated) usage is lifted, borrowing allowed."""
        ledger = self.cache.ledger
        lifted = ledger.release(self.incoming) if self.incoming is not None else None
        try:
            node = ("cq", self.model.name)
            if not all(amount <= self.tree.available(node, fr) for fr, amount in self.requests.items()):
                return False
            if self.topology is None:
                return True
            return self.topology(frozenset(t.key for t, _ in self.removed if not ledger.holds(t.key)))
        finally:
            if lifted is not None and self.incoming is not None:
                ledger.reserve(self.incoming, lifted)

    def share_without(self, key: WorkloadKey, node: Node) -> Share:
        charge = self.cache.ledger.release(key)
        try:
            return dominant_share(self.tree, node)
        finally:
            if charge is not None:
                self.cache.ledger.reserve(key, charge)

    def restore(self) -> None:
        for target, charge in self.removed:
            if not self.cache.ledger.holds(target.key):
                self.cache.ledger.reserve(target.key, charge)


def _candidates(
    cache: QuotaCache,
    preemptor: WorkloadInfo,
    model: ClusterQueueModel,
    needed: set[FlavorResource],
    order: Callable[[WorkloadKey], tuple[object, ...]],
) -> list[tuple[WorkloadKey, str]]:
    tree = cache.capacity

    def from_queue(cq: str, policy: str) -> list[tuple[WorkloadKey, str]]:
        out = []
        for key in cache.ledger.holders(cq):
            info = cache.workloads.get(key)
            charge = cache.ledger.charge_of(key)
            if info is None or charge is None or not policy_allows(policy, preemptor, info):
                continue
            if any(charge.usage.get(fr, 0) for fr in needed):
                out.append((key, cq))
        return out

    found = (
        from_queue(model.name, model.within_cluster_queue) if model.within_cluster_queue != "Never" else []
    )
    root = tree.root(model.name)
    if root is not None and model.reclaim_within_cohort != "Never":
        for cq in tree.subtree_cluster_queues(root):
            if cq != model.name and any(tree.borrowing_with(("cq", cq), fr, 0) for fr in needed):
                found += from_queue(cq, model.reclaim_within_cohort)
    return sorted(found, key=lambda c: (c[0] not in cache.evicting, order(c[0])))


def _first_strategy(
    run: _Run, ordering: _Ordering, strategy: str, within_nominal: bool
) -> list[tuple[WorkloadKey, str]]:
    """Kueue's first pass; returns the candidates its strategy refused (empty once it fits)."""
    retry: list[tuple[WorkloadKey, str]] = []
    for cq in ordering:
        if cq == run.model.name or within_nominal:
            run.remove(
                ordering.pop(cq), cq, IN_CLUSTER_QUEUE if cq == run.model.name else IN_COHORT_RECLAMATION
            )
            if run.fits():
                return []
            continue
        preemptor_node, target_node = ordering.almost_lcas(cq)
        preemptor_new = dominant_share(run.tree, preemptor_node)
        target_old = dominant_share(run.tree, target_node)
        while ordering.has(cq):
            key = ordering.pop(cq)
            target_new = run.share_without(key, target_node)
            if not passes_strategy(strategy, preemptor_new, target_old, target_new):
                retry.append((key, cq))
                continue
            run.remove(key, cq, IN_COHORT_FAIR_SHARING)
            if run.fits():
                return []
            break  # the shares moved: look for the ClusterQueue to take from anew
    return retry


def _second_strategy(run: _Run, ordering: _Ordering) -> bool:
    """`LessThanInitialShare` over the refused candidates, at most one per ClusterQueue."""
    for cq in ordering:
        preemptor_node, target_node = ordering.almost_lcas(cq)
        passed = (
            compare_shares(dominant_share(run.tree, preemptor_node), dominant_share(run.tree, target_node))
            < 0
        )
        key = ordering.pop(cq)
        if passed:
            run.remove(key, cq, IN_COHORT_FAIR_SHARING)
            if run.fits():
                return True
        ordering.drop(cq)
    return False


def fair_preemption_targets(
    preemptor: WorkloadInfo,
    model: ClusterQueueModel,
    cache: QuotaCache,
    strategies: Sequence[str],
    sizes: DeviceSizes | None = None,
    usage: LocalQueueUsage | None = None,
    needs: Needs | None = None,
    topology: TopologyCheck | None = None,
) -> list[Target]:
    """The workloads to evict so that `preemptor` fits in `model` under fair sharing; empty when
    no set would do. `usage`: admission fair sharing's LocalQueue scores, when `model` orders by
    them (Kueue sorts fair-sharing candidates with them too); `needs` as for classical preemption."""
    needs = needs or preemption_needs(preemptor, model, cache, sizes, fair_sharing=True)
    if needs is None:
        return []
    requests, needed = needs
    order = candidate_order(cache, model.name, usage)
    candidates = _candidates(cache, preemptor, model, needed, order)
    if not candidates:
        return []
    run = _Run(cache, model, requests)
    run.topology = topology
    try:
        with simulated_usage(cache.ledger, model.name, requests) as incoming:
            run.incoming = incoming
            node = ("cq", model.name)
            within_nominal = not any(run.tree.borrowing_with(node, fr, 0) for fr in needed)
            ordering = _Ordering(run.tree, model.name, candidates, order)
            retry = _first_strategy(run, ordering, strategies[0], within_nominal)
            fits = not retry and run.fits()
            if not fits and len(strategies) > 1:
                fits = _second_strategy(run, _Ordering(run.tree, model.name, retry, order))
        run.incoming = None
        return _fill_back(run) if fits else []
    finally:
        run.restore()


def _fill_back(run: _Run) -> list[Target]:
    """Put back the targets not needed after all, from the second-to-last one (Kueue's order)."""
    removed = run.removed
    ledger = run.cache.ledger
    for i in range(len(removed) - 2, -1, -1):
        target, charge = removed[i]
        ledger.reserve(target.key, charge)
        if run.fits():
            removed[i] = removed[-1]
            removed.pop()
        else:
            ledger.release(target.key)
    return [target for target, _ in removed]
