"""The shapes of Kueue v0.18.1's scheduler performance suite (test/performance/scheduler/configs:
``baseline`` and ``large-scale``), their scaled-down versions, and the objects they are made of.

A shape is cohorts of ClusterQueues (one cpu quota each in one ResourceFlavor, a borrowing limit,
preemption within the ClusterQueue and within the cohort) and, per ClusterQueue, workload sets: a
class (cpu request, runtime, priority) created ``count`` times, one every ``interval_ms``.
``scaled(shape, f)`` divides the three counts (cohorts, ClusterQueues per cohort, Workloads per set)
by ``f``, rounding up so none is left empty; quotas, sizes, runtimes, priorities and intervals stay.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from e2e.testbed import api_path

__all__ = [
    "CLASS_LABEL",
    "FLAVOR",
    "RUNTIME_LABEL",
    "SHAPES",
    "ClassSet",
    "Shape",
    "scaled",
]

Obj = dict[str, Any]
KUEUE = "kueue.x-k8s.io/v1beta2"
FLAVOR = "perf-rf"
# what the runner reads of a Workload: its class, and how long it runs once admitted
CLASS_LABEL = "bench.dra-quota.dev/perf-class"
RUNTIME_LABEL = "bench.dra-quota.dev/perf-runtime-ms"


@dataclass(frozen=True)
class ClassSet:
    """One workload set of a ClusterQueue: ``count`` Workloads of one class, one per ``interval_ms``."""

    name: str
    count: int
    interval_ms: int
    runtime_ms: int
    priority: int
    cpu: int  # whole cpus, one pod

    @property
    def arrival_seconds(self) -> float:
        """How long the set takes to create: the interval before each Workload."""
        return self.count * self.interval_ms / 1000


@dataclass(frozen=True)
class Shape:
    name: str
    cohorts: int
    queues_per_cohort: int
    nominal_cpu: int
    borrowing_limit_cpu: int
    reclaim_within_cohort: str
    within_cluster_queue: str
    sets: tuple[ClassSet, ...]
    scale: float = 1.0

    @property
    def cluster_queues(self) -> int:
        return self.cohorts * self.queues_per_cohort

    @property
    def workloads_per_queue(self) -> int:
        return sum(s.count for s in self.sets)

    @property
    def workloads(self) -> int:
        return self.cluster_queues * self.workloads_per_queue

    def cpu_seconds_per_queue(self) -> float:
        """The work one ClusterQueue's Workloads ask for: cpu x runtime, summed."""
        return sum(s.count * s.cpu * s.runtime_ms / 1000 for s in self.sets)

    def creation_rate(self) -> float:
        """Workloads per second created while every set of every ClusterQueue is creating."""
        return self.cluster_queues * sum(1000 / s.interval_ms for s in self.sets)

    def describe(self) -> list[str]:
        head = (
            f"shape {self.name} (scale 1/{self.scale:g}): {self.cohorts} cohorts x {self.queues_per_cohort} "
            f"ClusterQueues = {self.cluster_queues} (nominal {self.nominal_cpu} cpu, borrowingLimit "
            f"{self.borrowing_limit_cpu}, reclaimWithinCohort {self.reclaim_within_cohort}, "
            f"withinClusterQueue {self.within_cluster_queue}); {self.workloads} Workloads"
        )
        lines = [head]
        for s in self.sets:
            lines.append(
                f"  {s.name}: {s.count} per ClusterQueue, {s.cpu} cpu, {s.runtime_ms} ms, priority "
                f"{s.priority}, one every {s.interval_ms} ms ({s.arrival_seconds:g} s of arrivals)"
            )
        total_quota = self.cluster_queues * self.nominal_cpu
        lines.append(
            f"  creation rate asked of the loader while every set creates: "
            f"{self.creation_rate():.0f} Workloads/s"
        )
        lines.append(
            f"  work asked for: {self.cpu_seconds_per_queue() * self.cluster_queues:g} cpu-seconds against "
            f"{total_quota} cpu of quota (at least {self.cpu_seconds_per_queue() / self.nominal_cpu:.1f} s "
            f"of wall time at full use)"
        )
        return lines

    # --- the objects ------------------------------------------------------------------------------

    def cohort_name(self, cohort: int) -> str:
        return f"perf-cohort-{cohort}"

    def queue_name(self, cohort: int, queue: int) -> str:
        """The ClusterQueue's name, also its namespace's and its LocalQueue's."""
        return f"perf-{cohort}-{queue}"

    def queue_names(self) -> list[tuple[int, str]]:
        return [
            (c, self.queue_name(c, q)) for c in range(self.cohorts) for q in range(self.queues_per_cohort)
        ]

    def setup_objects(self) -> list[Obj]:
        """ResourceFlavor, Cohorts, then per ClusterQueue its namespace, itself and its LocalQueue."""
        out: list[Obj] = [{"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}}]
        out += [
            {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": self.cohort_name(c)}, "spec": {}}
            for c in range(self.cohorts)
        ]
        for cohort, name in self.queue_names():
            out.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
            out.append(self.cluster_queue(name, self.cohort_name(cohort)))
            out.append(
                {
                    "apiVersion": KUEUE,
                    "kind": "LocalQueue",
                    "metadata": {"name": name, "namespace": name},
                    "spec": {"clusterQueue": name},
                }
            )
        return out

    def cluster_queue(self, name: str, cohort: str) -> Obj:
        quota = {
            "name": "cpu",
            "nominalQuota": str(self.nominal_cpu),
            "borrowingLimit": str(self.borrowing_limit_cpu),
        }
        return {
            "apiVersion": KUEUE,
            "kind": "ClusterQueue",
            "metadata": {"name": name},
            "spec": {
                "cohortName": cohort,
                "namespaceSelector": {},
                "resourceGroups": [
                    {"coveredResources": ["cpu"], "flavors": [{"name": FLAVOR, "resources": [quota]}]}
                ],
                "preemption": {
                    "reclaimWithinCohort": self.reclaim_within_cohort,
                    "withinClusterQueue": self.within_cluster_queue,
                },
            },
        }


def workload(namespace: str, name: str, cls: ClassSet) -> Obj:
    """A Workload as Kueue's runner creates one: one pod set of one pod with a cpu request, the
    priority in spec.priority, the queue's LocalQueue (named as the namespace)."""
    container = {
        "name": "c",
        "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": str(cls.cpu)}},
    }
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {CLASS_LABEL: cls.name, RUNTIME_LABEL: str(cls.runtime_ms)},
        },
        "spec": {
            "queueName": namespace,
            "priority": cls.priority,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
                }
            ],
        },
    }


def object_path(obj: Obj) -> str:
    plural = {
        "Namespace": "namespaces",
        "ResourceFlavor": "resourceflavors",
        "Cohort": "cohorts",
        "ClusterQueue": "clusterqueues",
        "LocalQueue": "localqueues",
        "Workload": "workloads",
    }[obj["kind"]]
    return api_path(obj["apiVersion"], plural, obj["metadata"].get("namespace"), obj["metadata"]["name"])


def _sets(*rows: tuple[str, int, int, int, int, int]) -> tuple[ClassSet, ...]:
    return tuple(
        ClassSet(n, count, interval, runtime, prio, cpu) for n, count, interval, runtime, prio, cpu in rows
    )


# Kueue v0.18.1, test/performance/scheduler/configs/{baseline,large-scale}/generator.yaml:
# (class, count per ClusterQueue, creation interval ms, runtime ms, priority, cpu)
SHAPES: dict[str, Shape] = {
    "baseline": Shape(
        "baseline",
        cohorts=5,
        queues_per_cohort=6,
        nominal_cpu=20,
        borrowing_limit_cpu=100,
        reclaim_within_cohort="Any",
        within_cluster_queue="LowerPriority",
        sets=_sets(
            ("small", 350, 100, 200, 50, 1),
            ("medium", 100, 500, 500, 100, 5),
            ("large", 50, 1200, 1000, 200, 20),
        ),
    ),
    "large": Shape(
        "large",
        cohorts=10,
        queues_per_cohort=100,
        nominal_cpu=20,
        borrowing_limit_cpu=100,
        reclaim_within_cohort="Any",
        within_cluster_queue="LowerPriority",
        sets=_sets(
            ("small", 35, 60, 150, 50, 1), ("medium", 11, 300, 350, 100, 5), ("large", 4, 700, 700, 200, 20)
        ),
    ),
}


def _divided(count: int, factor: float) -> int:
    return max(1, math.ceil(count / factor - 1e-9))


def scaled(shape: Shape, factor: float) -> Shape:
    """The shape with its counts divided by ``factor`` (rounded up, at least 1), all else kept."""
    if factor < 1:
        raise ValueError(f"--scale must be at least 1, not {factor:g}")
    return replace(
        shape,
        cohorts=_divided(shape.cohorts, factor),
        queues_per_cohort=_divided(shape.queues_per_cohort, factor),
        sets=tuple(replace(s, count=_divided(s.count, factor)) for s in shape.sets),
        scale=shape.scale * factor,
    )
