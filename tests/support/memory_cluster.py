"""The reconciler over the in-memory API server (memory_api.py) with a controlled clock: batch/v1
Jobs asking for GPUs through a ResourceClaimTemplate, their flows run end to end (every write the
reconciler asks for is performed and its watch event delivered, no hand-made events)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.api.resources import (
    CLUSTER_QUEUES,
    JOBS,
    JOBSETS,
    LEADERWORKERSETS,
    LOCAL_QUEUES,
    NAMESPACES,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_FLAVORS,
    WORKLOADS,
)
from reconciler.api.times import rfc3339
from reconciler.config import Configuration, parse_config
from reconciler.integrations import Integration
from reconciler.integrations.lws.group import workload_name
from reconciler.integrations.registry import REGISTRY
from reconciler.runtime.loop.reconciler import Reconciler
from reconciler.runtime.shared.actions import Action
from tests.support.builders import cluster_queue_body, job_body
from tests.support.lws import group_pods, lws_body, stored_lws
from tests.support.memory_api import MemoryApi

__all__ = ["CONFIG", "GPU", "T0", "Cluster", "admitted", "condition", "gpu_template"]

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


def admitted(c: Cluster, job: str) -> bool:
    """Whether the job's Workload holds an admission and says Admitted, as Kueue says it."""
    workload = c.workload(job)
    return workload["status"].get("admission") is not None and condition(workload, "Admitted") == (
        "True",
        "Admitted",
        "The workload is admitted",
    )


class Cluster:
    """The reconciler (with its Configuration, and a registry of integrations when given) over the
    in-memory API (honouring finalizers when asked) with a controlled clock starting at T0."""

    def __init__(
        self,
        config: Configuration = CONFIG,
        *,
        finalizers: bool = False,
        registry: Mapping[str, Integration] = REGISTRY,
    ) -> None:
        self.now = T0
        self.actions: list[Action] = []
        self.reconciler = Reconciler(
            config,
            self.actions.append,
            clock=lambda: rfc3339(self.now),
            wall=lambda: self.now,
            registry=registry,
        )
        self.api = MemoryApi(self.reconciler, lambda: rfc3339(self.now), finalizers=finalizers)

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

    def submit(self, name: str, template: str = "gpu", queue: str = "lq") -> list[Action]:
        """A suspended Job asking for one device through the template; what followed."""
        body = job_body(name, queue=queue, claims=[{"name": "g", "resourceClaimTemplateName": template}])
        self.api.add(JOBS, body)
        return self.settle()

    def job(self, name: str) -> dict[str, Any]:
        return self.api.get(JOBS, "ns", name)

    def pod(self, name: str) -> dict[str, Any]:
        return self.api.get(PODS, "ns", name)

    def jobset(self, name: str) -> dict[str, Any]:
        return self.api.get(JOBSETS, "ns", name)

    def workload(self, job_name: str) -> dict[str, Any]:
        """The Workload of a Job (by its owner reference)."""
        (found,) = [
            body
            for (plural, _, _), body in self.api.objects.items()
            if plural == WORKLOADS.plural
            and any(ref["name"] == job_name for ref in body["metadata"].get("ownerReferences", []))
        ]
        return found

    def only_workload(self) -> dict[str, Any]:
        """The one Workload there is."""
        (body,) = [b for (plural, _, _), b in self.api.objects.items() if plural == WORKLOADS.plural]
        return body

    def workloads(self) -> dict[str, dict[str, Any]]:
        """Workloads by (owner kind, owner name)."""
        return {
            f"{ref['kind']}/{ref['name']}": body
            for (plural, _, _), body in self.api.objects.items()
            if plural == WORKLOADS.plural
            for ref in body["metadata"]["ownerReferences"]
        }

    def add_set(self, name: str, replicas: int = 1) -> dict[str, Any]:
        """A stored LeaderWorkerSet and its groups' pods."""
        body = stored_lws(lws_body(name, replicas=replicas))
        self.api.add(LEADERWORKERSETS, body)
        for index in range(replicas):
            self.add_group(body, index)
        return body

    def add_group(self, lws: dict[str, Any], index: int) -> None:
        for pod in group_pods(lws, index):
            self.api.add(PODS, pod)

    def group_workload(self, lws: dict[str, Any], index: int) -> dict[str, Any] | None:
        """The Workload of a LeaderWorkerSet's group, if any."""
        name = workload_name(lws["metadata"]["name"], lws["metadata"]["uid"], index)
        return self.api.objects.get((WORKLOADS.plural, "ns", name))

    def stop_policy(self, policy: str) -> list[Action]:
        """The admin sets the ClusterQueue's spec.stopPolicy; what followed."""
        generation = self.api.get(CLUSTER_QUEUES, "", "cq")["metadata"].get("generation", 1) + 1
        patch = {"metadata": {"generation": generation}, "spec": {"stopPolicy": policy}}
        self.api.change(CLUSTER_QUEUES, "", "cq", patch)
        return self.settle()

    def local_queue(self, name: str, cluster_queue: str = "cq") -> list[Action]:
        """Another LocalQueue in namespace ns; what followed."""
        body = {"metadata": {"name": name, "namespace": "ns"}, "spec": {"clusterQueue": cluster_queue}}
        self.api.add(LOCAL_QUEUES, body)
        return self.settle()

    def local_queue_stop_policy(self, policy: str, name: str = "lq") -> list[Action]:
        """The user sets a LocalQueue's spec.stopPolicy; what followed."""
        generation = self.api.get(LOCAL_QUEUES, "ns", name)["metadata"].get("generation", 1) + 1
        patch = {"metadata": {"generation": generation}, "spec": {"stopPolicy": policy}}
        self.api.change(LOCAL_QUEUES, "ns", name, patch)
        return self.settle()

    def used(self, flavor: str, resource: str) -> int:
        return self.reconciler.core.ledger.used("cq", (flavor, resource))

    def used_gpus(self) -> int:
        return self.used("t4", GPU)
