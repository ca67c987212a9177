"""JobSets on the in-memory cluster: the Configuration with their framework, the queues (flavor t4 with cpu
and GPUs, templates gpu-a and gpu-b), two replicated jobs, a condition, and the Jobs and pods the
JobSet controller would make."""

from __future__ import annotations

import dataclasses
from typing import Any

from reconciler.api.resources import (
    CLUSTER_QUEUES,
    JOBS,
    LOCAL_QUEUES,
    NAMESPACES,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_FLAVORS,
)
from reconciler.config import parse_config
from reconciler.integrations import PODSET_LABEL
from tests.support.builders import cluster_queue_body, job_body
from tests.support.memory_cluster import GPU, Cluster

# A leader Job of 1 pod (1 GPU from gpu-a) and 2 worker Jobs of 1 pod (1 GPU each from gpu-b).
TWO = [("leader", 1, 1, 1, "gpu-a"), ("workers", 2, 1, 1, "gpu-b")]


CONFIG = dataclasses.replace(
    parse_config(
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "waitForPodsReady": {"timeout": "60s", "requeuingStrategy": {"backoffBaseSeconds": 10}},
            "integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]},
            "resources": {"deviceClassMappings": [{"name": GPU, "deviceClassNames": ["gpu.nvidia.com"]}]},
        }
    ),
)


def jobset_cluster() -> Cluster:
    """The cluster with the JobSet framework on."""
    return Cluster(CONFIG)


def claim_template(name: str) -> dict[str, Any]:
    request = {"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}}
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


def queues(c: Cluster, gpus: int) -> None:
    c.api.add(NAMESPACES, {"metadata": {"name": "ns", "labels": {"kubernetes.io/metadata.name": "ns"}}})
    c.api.add(RESOURCE_FLAVORS, {"metadata": {"name": "t4"}, "spec": {"nodeLabels": {"gpu": "t4"}}})
    c.api.add(CLUSTER_QUEUES, cluster_queue_body("cq", [("t4", {"cpu": 10, GPU: gpus})]))
    c.api.add(LOCAL_QUEUES, {"metadata": {"name": "lq", "namespace": "ns"}, "spec": {"clusterQueue": "cq"}})
    c.api.add(RESOURCE_CLAIM_TEMPLATES, claim_template("gpu-a"))
    c.api.add(RESOURCE_CLAIM_TEMPLATES, claim_template("gpu-b"))
    c.api.sync()


def condition(body: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in body.get("status", {}).get("conditions", []) if c["type"] == kind), None)


def child_job(c: Cluster, jobset: str, rj: str, *, suspend: bool) -> None:
    """A Job the JobSet controller makes: owned by the JobSet, its pod template's queue label
    copied (the JobSet controller copies the template's labels)."""
    owner = c.jobset(jobset)["metadata"]
    body = job_body(f"{jobset}-{rj}-0", requests={"cpu": "1"})
    body["spec"]["suspend"] = suspend
    body["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "name": jobset,
            "uid": owner["uid"],
            "controller": True,
        }
    ]
    c.api.add(JOBS, body)


def ready_pod(c: Cluster, job: str, role: str, name: str) -> None:
    """A ready pod of one of a JobSet's Jobs (its controller is the Job, not the JobSet)."""
    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": job,
        "uid": c.api.get(JOBS, "ns", job)["metadata"]["uid"],
        "controller": True,
    }
    c.api.add(
        PODS,
        {
            "metadata": {
                "name": name,
                "namespace": "ns",
                "labels": {PODSET_LABEL: role},
                "ownerReferences": [owner],
            },
            "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "busybox"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        },
    )
