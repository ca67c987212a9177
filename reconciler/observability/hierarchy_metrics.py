"""Kueue's gauges of the cohort hierarchy and of what waits, computed at scrape time.

- ``kueue_cluster_queue_info{cluster_queue,parent_cohort,root_cohort}`` and
  ``kueue_cohort_info{cohort,parent_cohort,root_cohort}``: 1 per ClusterQueue and per cohort,
  naming where it sits in its tree (``""`` for no parent; a ClusterQueue whose cohort is in a
  cycle has both empty, a cohort in a cycle is not reported, as in Kueue);
- ``kueue_cluster_queue_resource_pending{cluster_queue,resource}``: what the pending Workloads of
  a ClusterQueue request in total (base units), 0 for each resource it has quota for;
- ``kueue_cohort_subtree_quota`` and ``kueue_cohort_subtree_resource_reservations``
  ``{cohort,flavor,resource}``: a cohort's subtree quota (its own nominal quota and what its
  children lend to it) and the reservations of every ClusterQueue below it; reported where
  positive, as Kueue clears the zero ones;
- ``kueue_cohort_subtree_admitted_active_workloads{cohort}``: admitted Workloads below it;
- ``kueue_admission_cycle_preemption_skips{cluster_queue}``: preempting heads the scheduler had
  to skip (another preemptor of the same cycle had claimed their targets), as of the last cycle
  that skipped any in that ClusterQueue (Kueue sets it only then).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily

if TYPE_CHECKING:
    from .state_metrics import ClusterQueueSample

__all__ = ["CohortTreeSample", "hierarchy_families"]

ROLE = "replica_role"
FlavorResource = tuple[str, str]


@dataclass(frozen=True, slots=True)
class CohortTreeSample:
    """A cohort not in a cycle: its place in the tree and its subtree's figures (base units)."""

    name: str
    parent: str = ""
    root: str = ""
    subtree_quota: dict[FlavorResource, float] = field(default_factory=dict)
    subtree_reserved: dict[FlavorResource, float] = field(default_factory=dict)
    admitted_active: int = 0


def _gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=[*labels, ROLE])


def hierarchy_families(
    cqs: Sequence[ClusterQueueSample], cohorts: Sequence[CohortTreeSample], role: str
) -> Iterator[GaugeMetricFamily]:
    cq_info = _gauge(
        "kueue_cluster_queue_info",
        "1 for each ClusterQueue, labelled with its cohort and the root of its cohort tree",
        ["cluster_queue", "parent_cohort", "root_cohort"],
    )
    pending = _gauge(
        "kueue_cluster_queue_resource_pending",
        "What the ClusterQueue's pending Workloads request in total, per resource, before any "
        "flavor is chosen (base units)",
        ["cluster_queue", "resource"],
    )
    skips = _gauge(
        "kueue_admission_cycle_preemption_skips",
        "Workloads of the ClusterQueue that had preemption targets but were skipped because "
        "another ClusterQueue's preemption in the same admission cycle claimed them (last cycle "
        "with any)",
        ["cluster_queue"],
    )
    for cq in cqs:
        cq_info.add_metric([cq.name, cq.parent_cohort, cq.root_cohort, role], 1.0)
        for resource, amount in sorted(cq.pending_requests.items()):
            pending.add_metric([cq.name, resource, role], amount)
        if cq.preemption_skips is not None:
            skips.add_metric([cq.name, role], cq.preemption_skips)
    yield from (cq_info, pending, skips)
    yield from _cohort_families(cohorts, role)


def _cohort_families(cohorts: Sequence[CohortTreeSample], role: str) -> Iterator[GaugeMetricFamily]:
    info = _gauge(
        "kueue_cohort_info",
        "1 for each cohort, labelled with its parent cohort and the root of its tree",
        ["cohort", "parent_cohort", "root_cohort"],
    )
    quota = _gauge(
        "kueue_cohort_subtree_quota",
        "The cohort's subtree quota: its own nominal quota and what its children can lend it, per "
        "flavor and resource (base units)",
        ["cohort", "flavor", "resource"],
    )
    reserved = _gauge(
        "kueue_cohort_subtree_resource_reservations",
        "Quota reserved by all the ClusterQueues below the cohort, per flavor and resource (base units)",
        ["cohort", "flavor", "resource"],
    )
    active = _gauge(
        "kueue_cohort_subtree_admitted_active_workloads",
        "Admitted Workloads that are active in the ClusterQueues below the cohort",
        ["cohort"],
    )
    for cohort in cohorts:
        info.add_metric([cohort.name, cohort.parent, cohort.root, role], 1.0)
        for family, amounts in ((quota, cohort.subtree_quota), (reserved, cohort.subtree_reserved)):
            for (flavor, resource), amount in sorted(amounts.items()):
                if amount > 0:
                    family.add_metric([cohort.name, flavor, resource, role], amount)
        active.add_metric([cohort.name, role], cohort.admitted_active)
    yield from (info, quota, reserved, active)
