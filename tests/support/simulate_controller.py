"""Workload objects for simulate's tests and the same objects run through the controller's reconciler."""

from __future__ import annotations

from typing import Any

import msgspec

from reconciler.api import ClusterQueue, Cohort, LocalQueue, Namespace, ResourceFlavor, Workload
from reconciler.api.resources import (
    CLUSTER_QUEUES,
    COHORTS,
    LOCAL_QUEUES,
    NAMESPACES,
    RESOURCE_FLAVORS,
    WORKLOADS,
    Resource,
)
from reconciler.config import Configuration
from reconciler.runtime.shared.actions import MergePatch
from reconciler.runtime.shared.writer import WriteDone
from tests.support.memory_api import merge
from tests.support.reconciler_harness import CONFIG, GPU, Harness

KUEUE = "kueue.x-k8s.io/v1beta2"


NOW = "2026-01-01T00:00:00Z"  # the harness's clock


Obj = dict[str, Any]


Key = tuple[str, str]


KINDS: dict[str, tuple[Resource, type[Any]]] = {
    "Namespace": (NAMESPACES, Namespace),
    "ResourceFlavor": (RESOURCE_FLAVORS, ResourceFlavor),
    "Cohort": (COHORTS, Cohort),
    "ClusterQueue": (CLUSTER_QUEUES, ClusterQueue),
    "LocalQueue": (LOCAL_QUEUES, LocalQueue),
    "Workload": (WORKLOADS, Workload),
}


def _workload(name: str, queue: str, priority: int, created: str) -> Obj:
    container = {"name": "main", "image": "busybox", "resources": {"requests": {GPU: "1"}}}
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": "team",
            "uid": f"uid-{name}",
            "labels": {"kueue.x-k8s.io/job-uid": f"job-uid-{name}"},
            "generation": 1,
            "resourceVersion": "1",
            "creationTimestamp": created,
        },
        "spec": {
            "queueName": queue,
            "priority": priority,
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}],
        },
    }


def _decode(body: Obj, kind: type[Any]) -> Any:
    return msgspec.json.decode(msgspec.json.encode(body), type=kind)


def _settle(h: Harness, shown: dict[Key, Obj]) -> None:
    """Play the API server for the reconciler's Workload writes until it asks for none."""
    for _ in range(20):
        writes = [a for a in h.take() if isinstance(a, MergePatch) and a.resource == WORKLOADS]
        if not writes:
            return
        for write in writes:
            key = (write.namespace or "", write.name)
            body = merge(shown[key], msgspec.json.decode(write.patch))
            body["metadata"]["resourceVersion"] = h.next_rv()
            shown[key] = body
            h.reconciler.handle(WriteDone(write, body=msgspec.json.encode(body)))
            h.event("MODIFIED", WORKLOADS, _decode(body, Workload))
    raise AssertionError("the reconciler kept writing")


def through_controller(
    queues: list[Obj], workloads: list[Obj], config: Configuration = CONFIG
) -> dict[Key, Obj]:
    """The Workloads as the API shows them once the controller's reconciler has settled after
    each arrival."""
    h = Harness(config)
    for doc in queues:
        resource, kind = KINDS[doc["kind"]]
        h.event("ADDED", resource, _decode(doc, kind))
    h.sync_all()
    shown: dict[Key, Obj] = {}
    for doc in workloads:
        key = (doc["metadata"]["namespace"], doc["metadata"]["name"])
        shown[key] = doc
        h.event("ADDED", WORKLOADS, _decode(doc, Workload))
        _settle(h, shown)
    return shown
