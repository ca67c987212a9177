"""The reconciler as logic over plain data, driven by hand: watch events in, actions out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from reconciler.api import (
    ClusterQueue,
    Job,
    LocalQueue,
    Namespace,
    ResourceClaimTemplate,
    ResourceFlavor,
    Workload,
)
from reconciler.api.resources import (
    CLUSTER_QUEUES,
    JOBS,
    LOCAL_QUEUES,
    NAMESPACES,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_FLAVORS,
    WORKLOADS,
    Resource,
)
from reconciler.config import Configuration, parse_config
from reconciler.integrations import REGISTRY, Integration
from reconciler.kube import WatchEvent
from reconciler.runtime.loop.reconciler import Reconciler
from reconciler.runtime.shared.actions import Action, Create, MergePatch
from reconciler.runtime.shared.writer import WriteDone
from tests.support.builders import cluster_queue_body, job_body

CONFIG = parse_config(
    {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "resources": {
            "deviceClassMappings": [{"name": "nvidia.com/gpu", "deviceClassNames": ["gpu.nvidia.com"]}]
        },
    }
)
GPU = "nvidia.com/gpu"


def decode(body: dict[str, Any], kind: type[Any]) -> Any:
    return msgspec.json.decode(msgspec.json.encode(body), type=kind)


class Harness:
    def __init__(
        self,
        config: Configuration = CONFIG,
        registry: Mapping[str, Integration] = REGISTRY,
        namespace: str | None = None,
    ) -> None:
        self.actions: list[Action] = []
        self.rv = 100
        self.reconciler = Reconciler(
            config,
            self.actions.append,
            clock=lambda: "2026-01-01T00:00:00Z",
            namespace=namespace,
            registry=registry,
        )

    def event(self, kind: str, resource: Resource, obj: Any) -> None:
        meta = obj.metadata
        self.reconciler.handle(WatchEvent(kind, resource, (meta.namespace, meta.name), obj))  # type: ignore[arg-type]

    def sync_all(self) -> None:
        for resource in self.reconciler.watched:
            self.reconciler.handle(WatchEvent("SYNCED", resource, ("", ""), None))

    def take(self) -> list[Action]:
        self.reconciler.after_batch()
        out, self.actions[:] = list(self.actions), []
        return out

    def next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)


def queues(h: Harness, gpus: int = 1) -> None:
    h.event("ADDED", NAMESPACES, decode({"metadata": {"name": "ns"}}, Namespace))
    h.event(
        "ADDED",
        RESOURCE_FLAVORS,
        decode({"metadata": {"name": "t4"}, "spec": {"nodeLabels": {"gpu": "t4"}}}, ResourceFlavor),
    )
    h.event("ADDED", CLUSTER_QUEUES, decode(cluster_queue_body("cq", [("t4", {GPU: gpus})]), ClusterQueue))
    h.event(
        "ADDED",
        LOCAL_QUEUES,
        decode({"metadata": {"name": "lq", "namespace": "ns"}, "spec": {"clusterQueue": "cq"}}, LocalQueue),
    )
    h.event(
        "ADDED",
        RESOURCE_CLAIM_TEMPLATES,
        decode(
            {
                "metadata": {"name": "gpu", "namespace": "ns"},
                "spec": {
                    "spec": {
                        "devices": {
                            "requests": [
                                {"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}}
                            ]
                        }
                    }
                },
            },
            ResourceClaimTemplate,
        ),
    )


def gpu_job(h: Harness, name: str, *, suspend: bool = True) -> Job:
    body = job_body(name, uid=f"uid-{name}", claims=[{"name": "g", "resourceClaimTemplateName": "gpu"}])
    body["spec"]["suspend"] = suspend
    body["metadata"]["resourceVersion"] = h.next_rv()
    job: Job = decode(body, Job)
    return job


def created_workload(h: Harness, action: Create) -> Workload:
    """What the API returns (and the watch then shows) for a Create."""
    body = msgspec.json.decode(action.body)
    body["metadata"]["resourceVersion"] = h.next_rv()
    body["metadata"]["uid"] = f"wl-{action.name}"
    body["metadata"]["generation"] = 1
    workload: Workload = decode(body, Workload)
    return workload


def jobs_with_workloads(h: Harness, *names: str) -> dict[str, Workload]:
    """A one-GPU Job per name, and the Workload the API returns for each (not yet watched)."""
    workloads: dict[str, Workload] = {}
    for name in names:
        h.event("ADDED", JOBS, gpu_job(h, name))
        (create,) = of(h.take(), "create-workload")
        workloads[name] = created_workload(h, create)
    return workloads


def submitted(h: Harness, job: Job) -> Workload:
    """The Job seen, the Workload it asks for created (the create answered) and seen on the watch."""
    h.event("ADDED", JOBS, job)
    (create,) = of(h.take(), "create-workload")
    assert isinstance(create, Create)
    workload = created_workload(h, create)
    h.reconciler.handle(WriteDone(create, body=msgspec.json.encode(workload)))
    h.event("ADDED", WORKLOADS, workload)
    return workload


def admission_asked(h: Harness) -> tuple[Job, Workload, MergePatch]:
    """One queue, one Job a: its Workload seen (the create not answered) and its admission asked for."""
    queues(h)
    h.sync_all()
    job = gpu_job(h, "a")
    h.event("ADDED", JOBS, job)
    (create,) = of(h.take(), "create-workload")
    workload = created_workload(h, create)
    h.event("ADDED", WORKLOADS, workload)
    (admit,) = of(h.take(), "admit")
    return job, workload, admit


def apply_patch(h: Harness, workload: Workload, action: MergePatch) -> Workload:
    body = msgspec.json.decode(msgspec.json.encode(workload))
    patch = msgspec.json.decode(action.patch)
    status = {**body.get("status", {}), **patch["status"]}
    body["status"] = {k: v for k, v in status.items() if v is not None}
    body["metadata"]["resourceVersion"] = h.next_rv()
    patched: Workload = decode(body, Workload)
    return patched


def of(actions: list[Action], purpose: str) -> list[Any]:
    return [a for a in actions if a.purpose == purpose]
