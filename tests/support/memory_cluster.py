"""The reconciler over the in-memory API server (memory_api.py) with a controlled clock: batch/v1
Jobs asking for GPUs through a ResourceClaimTemplate, their flows run end to end (every write the
reconciler asks for is performed and its watch event delivered, no hand-made events)."""

from __future__ import annotations

from typing import Any

from reconciler.api.resources import (
    CLUSTER_QUEUES,
    JOBS,
    LOCAL_QUEUES,
    NAMESPACES,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_FLAVORS,
    WORKLOADS,
)
from reconciler.api.times import rfc3339
from reconciler.config import Configuration, parse_config
from reconciler.runtime.actions import Action
from reconciler.runtime.reconciler import Reconciler
from tests.support.builders import cluster_queue_body, job_body
from tests.support.memory_api import MemoryApi

__all__ = ["CONFIG", "GPU", "T0", "Cluster", "condition", "gpu_template"]

GPU = "nvidia.com/gpu"
T0 = 1767225600.0  # 2026-01-01T00:00:00Z
CONFIG = parse_config(
    {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "resources": {"deviceClassMappings": [{"name": GPU, "deviceClassNames": ["gpu.nvidia.com"]}]},
    }
)


def gpu_template(name: str = "gpu", count: int = 1) -> dict[str, Any]:
    request = {"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count}}
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


def condition(body: dict[str, Any], kind: str) -> tuple[str, str, str] | None:
    """(status, reason, message) of an object's condition of that type, or None."""
    for c in body.get("status", {}).get("conditions", []):
        if c["type"] == kind:
            return c["status"], c["reason"], c["message"]
    return None


class Cluster:
    def __init__(self, config: Configuration = CONFIG) -> None:
        self.now = T0
        self.actions: list[Action] = []
        self.reconciler = Reconciler(
            config, self.actions.append, clock=lambda: rfc3339(self.now), wall=lambda: self.now
        )
        self.api = MemoryApi(self.reconciler, lambda: rfc3339(self.now))

    def take(self) -> list[Action]:
        self.reconciler.after_batch()
        out, self.actions[:] = list(self.actions), []
        return out

    def settle(self) -> list[Action]:
        return self.api.settle(self.take)

    def tick(self, to: float) -> list[Action]:
        self.now = to
        self.reconciler.flush_status()
        return self.settle()

    def queues(self, gpus: int, *, template: bool = True) -> None:
        """Namespace, flavor t4, ClusterQueue cq with `gpus` GPUs, LocalQueue lq, template gpu."""
        self.api.add(
            NAMESPACES, {"metadata": {"name": "ns", "labels": {"kubernetes.io/metadata.name": "ns"}}}
        )
        self.api.add(RESOURCE_FLAVORS, {"metadata": {"name": "t4"}, "spec": {"nodeLabels": {"gpu": "t4"}}})
        self.api.add(CLUSTER_QUEUES, cluster_queue_body("cq", [("t4", {GPU: gpus})]))
        self.api.add(
            LOCAL_QUEUES, {"metadata": {"name": "lq", "namespace": "ns"}, "spec": {"clusterQueue": "cq"}}
        )
        if template:
            self.api.add(RESOURCE_CLAIM_TEMPLATES, gpu_template())
        self.api.sync()
        self.settle()

    def submit(self, name: str, template: str = "gpu") -> list[Action]:
        """A suspended Job asking for one device through the template; what followed."""
        body = job_body(name, claims=[{"name": "g", "resourceClaimTemplateName": template}])
        self.api.add(JOBS, body)
        return self.settle()

    def job(self, name: str) -> dict[str, Any]:
        return self.api.get(JOBS, "ns", name)

    def workload(self, job_name: str) -> dict[str, Any]:
        """The Workload of a Job (by its owner reference)."""
        (found,) = [
            body
            for (plural, _, _), body in self.api.objects.items()
            if plural == WORKLOADS.plural
            and any(ref["name"] == job_name for ref in body["metadata"].get("ownerReferences", []))
        ]
        return found

    def stop_policy(self, policy: str) -> list[Action]:
        """The admin sets the ClusterQueue's spec.stopPolicy; what followed."""
        generation = self.api.get(CLUSTER_QUEUES, "", "cq")["metadata"].get("generation", 1) + 1
        patch = {"metadata": {"generation": generation}, "spec": {"stopPolicy": policy}}
        self.api.change(CLUSTER_QUEUES, "", "cq", patch)
        return self.settle()

    def used_gpus(self) -> int:
        return self.reconciler.core.ledger.used("cq", ("t4", GPU))
