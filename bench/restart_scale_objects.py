"""The objects bench/restart_scale.py stores before the controller starts: a few ClusterQueues
(one flavor, cpu only), a few namespaces with a LocalQueue each, and N bare Workloads (no owner),
most of them admitted (QuotaReserved and Admitted True, ``status.admission``, as this controller
writes an admission through the status subresource), the rest pending (no status yet: created
while the controller was down).

Each ClusterQueue's cpu quota is what its admitted Workloads use plus ``free_slots`` Workloads'
worth: once the ledger is rebuilt, exactly ``min(free_slots, pending)`` of its pending Workloads
fit, and no more. Pure: no I/O, so tests/bench/test_restart_scale_objects.py checks it directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

KUEUE = "kueue.x-k8s.io/v1beta2"
FLAVOR = "restart-flavor"
LOCAL_QUEUE = "lq"
CONTAINER_IMAGE = "registry.k8s.io/pause:3.10"

Obj = dict[str, Any]


@dataclass(frozen=True)
class Layout:
    """How many Workloads, over how many queues and namespaces, and how many are pending."""

    workloads: int
    cluster_queues: int = 4
    namespaces_per_queue: int = 2
    pending_percent: float = 10.0
    free_slots: int = 1
    cpu_milli: int = 100

    def __post_init__(self) -> None:
        if self.workloads < 2 * self.cluster_queues:
            raise ValueError(
                f"at least {2 * self.cluster_queues} Workloads: one admitted, one pending per queue"
            )
        if self.cluster_queues < 1 or self.namespaces_per_queue < 1 or self.free_slots < 1:
            raise ValueError("cluster_queues, namespaces_per_queue and free_slots must be >= 1")
        if not 0 < self.pending_percent < 100:
            raise ValueError("pending_percent must be in (0, 100)")


@dataclass(frozen=True)
class WorkloadPlan:
    namespace: str
    name: str
    cluster_queue: str
    admitted: bool


@dataclass(frozen=True)
class QueuePlan:
    cluster_queue: str
    namespaces: tuple[str, ...]
    admitted: int
    pending: int
    quota_milli: int


@dataclass(frozen=True)
class Plan:
    layout: Layout
    queues: tuple[QueuePlan, ...]
    workloads: tuple[WorkloadPlan, ...]

    @property
    def admitted(self) -> int:
        return sum(q.admitted for q in self.queues)

    @property
    def pending(self) -> int:
        return sum(q.pending for q in self.queues)

    @property
    def fitting(self) -> int:
        """How many pending Workloads fit once the ledger is rebuilt (all of them ask the same)."""
        return sum(min(self.layout.free_slots, q.pending) for q in self.queues)


def cluster_queue_name(q: int) -> str:
    return f"restart-cq-{q:02d}"


def namespace_name(q: int, n: int) -> str:
    return f"restart-{q:02d}-{n}"


def plan(layout: Layout) -> Plan:
    """Workload ``j`` of queue ``q`` is ``wl-QQ-JJJJJJ`` in namespace ``j mod namespaces``; the last
    ones of each queue (the newest) are the pending ones. Queues are interleaved in creation order."""
    count = [layout.workloads // layout.cluster_queues] * layout.cluster_queues
    for q in range(layout.workloads % layout.cluster_queues):
        count[q] += 1
    queues: list[QueuePlan] = []
    for q, total in enumerate(count):
        pending = min(total - 1, max(1, round(total * layout.pending_percent / 100)))
        admitted = total - pending
        spaces = tuple(namespace_name(q, n) for n in range(layout.namespaces_per_queue))
        quota = (admitted + layout.free_slots) * layout.cpu_milli
        queues.append(QueuePlan(cluster_queue_name(q), spaces, admitted, pending, quota))
    workloads = [
        WorkloadPlan(
            namespace=queues[q].namespaces[j % layout.namespaces_per_queue],
            name=f"wl-{q:02d}-{j:06d}",
            cluster_queue=queues[q].cluster_queue,
            admitted=j < queues[q].admitted,
        )
        for j in range(max(count))
        for q in range(layout.cluster_queues)
        if j < count[q]
    ]
    return Plan(layout, tuple(queues), tuple(workloads))


def queue_objects(p: Plan) -> list[Obj]:
    """The ResourceFlavor, then per ClusterQueue itself, its namespaces and their LocalQueues."""
    objects: list[Obj] = [{"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}}]
    for q in p.queues:
        objects.append(
            {
                "apiVersion": KUEUE,
                "kind": "ClusterQueue",
                "metadata": {"name": q.cluster_queue},
                "spec": {
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [
                                {
                                    "name": FLAVOR,
                                    "resources": [{"name": "cpu", "nominalQuota": f"{q.quota_milli}m"}],
                                }
                            ],
                        }
                    ],
                },
            }
        )
        for ns in q.namespaces:
            objects.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            objects.append(
                {
                    "apiVersion": KUEUE,
                    "kind": "LocalQueue",
                    "metadata": {"name": LOCAL_QUEUE, "namespace": ns},
                    "spec": {"clusterQueue": q.cluster_queue},
                }
            )
    return objects


def workload_body(w: WorkloadPlan, cpu_milli: int) -> Obj:
    """A bare Workload: one pod set of one pod asking ``cpu_milli`` cpu, in LocalQueue ``lq``."""
    container = {
        "name": "main",
        "image": CONTAINER_IMAGE,
        "resources": {"requests": {"cpu": f"{cpu_milli}m"}},
    }
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {"name": w.name, "namespace": w.namespace},
        "spec": {
            "queueName": LOCAL_QUEUE,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
                }
            ],
        },
    }


def admission_patch(w: WorkloadPlan, cpu_milli: int, created: Obj, now: str) -> Obj:
    """The merge patch of the status subresource that admits ``created`` (the POST's answer) as this
    controller writes it (reconciler/core/status.py: admitted_workload_status), with the
    resourceVersion precondition its writer sends."""
    generation = created["metadata"].get("generation", 1)

    def cond(kind: str, message: str) -> Obj:
        return {
            "type": kind,
            "status": "True",
            "reason": kind,
            "message": message,
            "lastTransitionTime": now,
            "observedGeneration": generation,
        }

    return {
        "metadata": {"resourceVersion": created["metadata"]["resourceVersion"]},
        "status": {
            "conditions": [
                cond("QuotaReserved", f"Quota reserved in ClusterQueue {w.cluster_queue}"),
                cond("Admitted", "The workload is admitted"),
            ],
            "admission": {
                "clusterQueue": w.cluster_queue,
                "podSetAssignments": [
                    {
                        "name": "main",
                        "flavors": {"cpu": FLAVOR},
                        "resourceUsage": {"cpu": f"{cpu_milli}m"},
                        "count": 1,
                    }
                ],
            },
        },
    }
