"""Plain pods and pod groups on the in-memory cluster: the Configuration with the pod framework, the queues
(a tainted flavor t4 with cpu and GPUs, template gpu-a), and a pod's gates and conditions."""

from __future__ import annotations

import dataclasses
from typing import Any

from reconciler.api.resources import (
    CLUSTER_QUEUES,
    LOCAL_QUEUES,
    NAMESPACES,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_FLAVORS,
)
from reconciler.config import parse_config
from tests.support.builders import cluster_queue_body
from tests.support.memory_cluster import GPU, Cluster

TAINT = {"key": "gpu", "operator": "Equal", "value": "t4", "effect": "NoSchedule"}


CONFIG = dataclasses.replace(
    parse_config(
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "waitForPodsReady": {"timeout": "60s"},
            "integrations": {"frameworks": ["batch/job", "pod"]},
            "resources": {"deviceClassMappings": [{"name": GPU, "deviceClassNames": ["gpu.nvidia.com"]}]},
        }
    ),
)


def pod_cluster() -> Cluster:
    """The cluster with the pod framework on, its finalizers honoured."""
    return Cluster(CONFIG, finalizers=True)


def queues(c: Cluster, gpus: int) -> None:
    c.api.add(NAMESPACES, {"metadata": {"name": "ns", "labels": {"kubernetes.io/metadata.name": "ns"}}})
    flavor = {"nodeLabels": {"gpu": "t4"}, "tolerations": [TAINT]}
    c.api.add(RESOURCE_FLAVORS, {"metadata": {"name": "t4"}, "spec": flavor})
    c.api.add(CLUSTER_QUEUES, cluster_queue_body("cq", [("t4", {"cpu": 10, GPU: gpus})]))
    c.api.add(LOCAL_QUEUES, {"metadata": {"name": "lq", "namespace": "ns"}, "spec": {"clusterQueue": "cq"}})
    request = {"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}}
    template = {
        "metadata": {"name": "gpu-a", "namespace": "ns"},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }
    c.api.add(RESOURCE_CLAIM_TEMPLATES, template)
    c.api.sync()


def condition(body: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in body.get("status", {}).get("conditions", []) if c["type"] == kind), None)


def gates(pod: dict[str, Any]) -> list[str]:
    return [g["name"] for g in pod["spec"].get("schedulingGates", [])]
