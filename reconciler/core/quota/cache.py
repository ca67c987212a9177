"""What is admitted: the quota cache.

It knows the ResourceFlavors, the usable ClusterQueues (their quota models),
the Namespaces' labels for the ClusterQueues' selectors, and every admitted
workload with its charge in the ledger. Whatever waits lives in the queue
manager; the scheduler reads both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import msgspec

from reconciler.api import Admission, ResourceFlavor, Topology, Workload

from ..model.clusterqueues import ClusterQueueModel, active_condition
from ..model.workloads import WorkloadInfo
from ..primitives.quantity import format_amount, parse_quantity, to_amount
from ..topology.domains import TopologyNode
from ..topology.placement import Placed
from .capacity import CohortModel, CohortTree
from .cohorts import cohort_cycle, cycle_message
from .ledger import Charge, FlavorResource, Ledger

__all__ = ["QuotaCache", "after_reclaim", "charge_from_admission"]

WorkloadKey = tuple[str, str]


def after_reclaim(workload: Workload) -> Admission | None:
    """The admission a Workload is charged by: its status.admission with each pod set's usage
    scaled down to the pods still needed, when its job has reclaimable pods (finished pods whose
    quota goes back, Kueue's ReclaimablePods, beta and on in v0.18.1). Per pod set, the count
    after reclaim is the spec's count less the reclaimable ones; only a lower count than admitted
    scales the usage (a higher one is a partial admission's, kept)."""
    admission = workload.status.admission
    reclaimable = {r.name: r.count for r in workload.status.reclaimable_pods if r.count > 0}
    if admission is None or not reclaimable:
        return admission
    counts = {ps.name: 1 if ps.count is None else ps.count for ps in workload.spec.pod_sets}
    assignments = []
    for psa in admission.pod_set_assignments:
        admitted = psa.count if psa.count is not None else counts.get(psa.name)
        left = counts.get(psa.name, 0) - reclaimable.get(psa.name, 0)
        if admitted is None or admitted <= 0 or left >= admitted:
            assignments.append(psa)
            continue
        left = max(left, 0)
        # As Kueue: the pod set's usage divided by its admitted count, times the pods still needed.
        usage = {
            resource: format_amount(
                resource, to_amount(resource, parse_quantity(quantity)) // admitted * left
            )
            for resource, quantity in psa.resource_usage.items()
        }
        assignments.append(msgspec.structs.replace(psa, resource_usage=usage, count=left))
    return msgspec.structs.replace(admission, pod_set_assignments=assignments)


def charge_from_admission(admission: Admission) -> Charge:
    """The ledger charge an admitted Workload's status.admission describes."""
    usage: dict[FlavorResource, int] = {}
    for assignment in admission.pod_set_assignments:
        for resource, quantity in assignment.resource_usage.items():
            flavor = assignment.flavors.get(resource)
            if flavor is None:
                continue
            fr = (flavor, resource)
            usage[fr] = usage.get(fr, 0) + to_amount(resource, parse_quantity(quantity))
    return Charge(admission.cluster_queue, usage)


@dataclass
class QuotaCache:
    flavors: dict[str, ResourceFlavor] = field(default_factory=dict)
    cluster_queues: dict[str, ClusterQueueModel] = field(default_factory=dict)
    # ClusterQueues whose spec could not be used, with the reason.
    broken_cluster_queues: dict[str, str] = field(default_factory=dict)
    namespaces: dict[str, Mapping[str, str]] = field(default_factory=dict)
    ledger: Ledger = field(default_factory=Ledger)
    # Admitted workloads (known once their Workload has been seen; a rebuilt ledger has charges only).
    workloads: dict[WorkloadKey, WorkloadInfo] = field(default_factory=dict)
    # Cohort name -> its member ClusterQueues.
    cohorts: dict[str, set[str]] = field(default_factory=dict)
    # Cohort objects (hierarchical cohorts), and each cohort's child cohorts.
    cohort_models: dict[str, CohortModel] = field(default_factory=dict)
    child_cohorts: dict[str, set[str]] = field(default_factory=dict)
    # When each admitted workload got its quota (RFC 3339, "" when only known as "just now"),
    # and an admission counter to order equal times: preemption takes the newest first.
    admitted_at: dict[WorkloadKey, tuple[str, int]] = field(default_factory=dict)
    # Admitted workloads whose eviction (preemption) has been asked for and not yet seen.
    evicting: set[WorkloadKey] = field(default_factory=set)
    # Topology-aware scheduling: the Topologies, the nodes with their free capacity (None: not fed,
    # so TAS flavors are refused), and per admitted workload what its topology assignments take:
    # (flavor, placement, requests per pod).
    topologies: dict[str, Topology] = field(default_factory=dict)
    topology_nodes: list[TopologyNode] | None = None
    # The owners (apiVersion, kind) whose Workloads may be placed in topology domains (the
    # controller places only those kinds' pods); None: any Workload.
    topology_owners: frozenset[tuple[str, str]] | None = None
    topology_usage: dict[WorkloadKey, list[tuple[str, Placed, Mapping[str, int]]]] = field(
        default_factory=dict
    )
    _admissions: int = 0
    # Cohort arithmetic memo, valid for (ledger generation, tree shape version). Every change of
    # the tree moves the shape version once it is made (what was read before it is dropped).
    _tree_memo: dict[tuple[str, FlavorResource, int], tuple[int, int, int]] = field(default_factory=dict)
    _tree_memo_at: tuple[int, int] = (-1, -1)
    _shape: int = 0
    _shape_memo: dict[object, object] = field(default_factory=dict)
    _shape_memo_at: int = -1

    @property
    def capacity(self) -> CohortTree:
        """What each ClusterQueue can still use, its cohort tree included."""
        at = (self.ledger.generation, self._shape)
        if at != self._tree_memo_at:
            self._tree_memo.clear()
            self._tree_memo_at = at
        if self._shape != self._shape_memo_at:
            self._shape_memo.clear()
            self._shape_memo_at = self._shape
        return CohortTree(
            self.ledger,
            self.cluster_queues,
            self.cohorts,
            self.cohort_models,
            self.child_cohorts,
            self._tree_memo,
            self._shape_memo,
        )

    @property
    def admissions(self) -> int:
        """How many admissions the cache has taken (a change means less quota is free)."""
        return self._admissions

    def cohort_of(self, cluster_queue: str) -> str | None:
        model = self.cluster_queues.get(cluster_queue)
        return None if model is None else model.cohort

    def cohort_members(self, cluster_queue: str) -> set[str]:
        """The ClusterQueues sharing quota with this one: its whole cohort tree (itself included)."""
        tree = self.capacity
        root = tree.root(cluster_queue)
        return {cluster_queue} if root is None else {cluster_queue, *tree.subtree_cluster_queues(root)}

    def cohort_path(self, cluster_queue: str) -> list[str]:
        """The ClusterQueue's cohorts, from the root down to its parent."""
        return list(reversed(self.capacity.ancestors(("cq", cluster_queue))))

    # --- cohorts ------------------------------------------------------------------------

    def set_cohort(self, model: CohortModel) -> set[str]:
        """Add or change a Cohort object; gives the ClusterQueues whose quota it may change."""
        before = self._tree_members(model.name)
        self.delete_cohort(model.name)
        self.cohort_models[model.name] = model
        if model.parent is not None:
            self.child_cohorts.setdefault(model.parent, set()).add(model.name)
        self._shape += 1  # after the change: what was read of the tree before it is dropped
        return before | self._tree_members(model.name)

    def delete_cohort(self, name: str) -> set[str]:
        before = self._tree_members(name)
        old = self.cohort_models.pop(name, None)
        if old is not None and old.parent is not None:
            siblings = self.child_cohorts.get(old.parent, set())
            siblings.discard(name)
            if not siblings:
                self.child_cohorts.pop(old.parent, None)
        self._shape += 1
        return before

    def _tree_members(self, cohort: str) -> set[str]:
        tree = self.capacity
        top = cohort
        for ancestor in tree.ancestors(("cohort", cohort)):
            top = ancestor
        return set(tree.subtree_cluster_queues(top))

    # --- queue objects ------------------------------------------------------------------

    def set_flavor(self, flavor: ResourceFlavor) -> None:
        self.flavors[flavor.metadata.name] = flavor
        self._shape += 1

    def delete_flavor(self, name: str) -> None:
        self.flavors.pop(name, None)

    def set_cluster_queue(self, model: ClusterQueueModel) -> None:
        self.broken_cluster_queues.pop(model.name, None)
        self._leave_cohort(model.name)
        self.cluster_queues[model.name] = model
        if model.cohort is not None:
            self.cohorts.setdefault(model.cohort, set()).add(model.name)
        self._shape += 1

    def set_broken_cluster_queue(self, name: str, reason: str) -> None:
        self._leave_cohort(name)
        self.cluster_queues.pop(name, None)
        self.broken_cluster_queues[name] = reason
        self._shape += 1

    def delete_cluster_queue(self, name: str) -> None:
        self._leave_cohort(name)
        self.cluster_queues.pop(name, None)
        self.broken_cluster_queues.pop(name, None)
        self._shape += 1

    def _leave_cohort(self, name: str) -> None:
        cohort = self.cohort_of(name)
        members = self.cohorts.get(cohort, set()) if cohort is not None else set()
        members.discard(name)
        if cohort is not None and not members:
            self.cohorts.pop(cohort, None)

    def set_namespace(self, name: str, labels: Mapping[str, str]) -> None:
        self.namespaces[name] = dict(labels)

    def cluster_queue_active(self, name: str) -> tuple[str, str, str]:
        """The ClusterQueue's Active condition: (status, reason, message)."""
        model = self.cluster_queues.get(name)
        if model is None:
            reason = self.broken_cluster_queues.get(name, "not found")
            return "False", "Unknown", f"Can't admit new workloads: {reason}."
        missing = self._missing_topologies(model)
        return active_condition(model, self.flavors, self.cycle_problem(name), missing)

    def _missing_topologies(self, model: ClusterQueueModel) -> list[tuple[str, str]]:
        """(flavor, Topology) of the ClusterQueue's flavors naming a Topology not known, while
        topology-aware scheduling runs (the nodes are given): Kueue's TopologyNotFound."""
        if self.topology_nodes is None:
            return []
        out: list[tuple[str, str]] = []
        for name in dict.fromkeys(model.flavor_names()):
            flavor = self.flavors.get(name)
            topology = None if flavor is None else flavor.spec.topology_name
            if topology and topology not in self.topologies:
                out.append((name, topology))
        return out

    def cycle_problem(self, cluster_queue: str) -> str:
        """`cohort has a cycle: a -> b -> a` when the cohorts above it form a cycle, else ""."""
        cycle = cohort_cycle(self.capacity, cluster_queue)
        return "" if cycle is None else cycle_message(cycle)

    # --- admitted workloads -------------------------------------------------------------

    def admit(self, info: WorkloadInfo, charge: Charge, reserved_at: str = "") -> None:
        self.ledger.reserve(info.key, charge)
        self.workloads[info.key] = info
        self._admissions += 1
        # An unknown time sorts after every RFC 3339 stamp: it was admitted just now.
        self.admitted_at[info.key] = (reserved_at or "~", self._admissions)

    def hold(self, cluster_queue: str, usage: Mapping[FlavorResource, int], sign: int = 1) -> None:
        """Keep `usage` from every later head of a scheduling cycle, as an admission would (a
        preempting head's, as Kueue does); `sign` -1 gives it back at the end of the cycle."""
        self.ledger.add_usage(cluster_queue, usage, sign)
        self._admissions += 1

    def release(self, key: WorkloadKey) -> tuple[Charge | None, WorkloadInfo | None]:
        """Return a workload's quota; gives its charge and what was known of it."""
        self.admitted_at.pop(key, None)
        self.evicting.discard(key)
        self.topology_usage.pop(key, None)
        return self.ledger.release(key), self.workloads.pop(key, None)

    def rebuild(self, admitted: Iterable[tuple[WorkloadKey, Admission]]) -> None:
        """Recompute the ledger from admitted Workloads (start, relist)."""
        self.workloads.clear()
        self.topology_usage.clear()
        self.ledger.rebuild((key, charge_from_admission(a)) for key, a in admitted)

    def holds(self, key: WorkloadKey) -> bool:
        return self.ledger.holds(key)

    def admitted_through(self, cluster_queue: str, namespace: str, name: str) -> list[WorkloadKey]:
        """Admitted workloads submitted through one LocalQueue."""
        admitted: list[WorkloadKey] = []
        for key in self.ledger.holders(cluster_queue):
            info = self.workloads.get(key)
            if info is not None and info.namespace == namespace and info.queue_name == name:
                admitted.append(key)
        return admitted
