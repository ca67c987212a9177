"""TrainJobs and their runtimes as the API serves them (Kubeflow Trainer v2), on the in-memory
cluster: a ClusterTrainingRuntime whose trainer step's pods ask one GPU each through a
ResourceClaimTemplate, and a TrainJob naming it (with Kueue's runtime patch, as its webhook adds)."""

from __future__ import annotations

import dataclasses
from typing import Any

from reconciler.config import parse_config
from tests.support.memory_cluster import GPU, Cluster

ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
KUEUE_PATCH = {"manager": "kueue.x-k8s.io/manager", "trainingRuntimeSpec": {"template": {"spec": {}}}}

CONFIG = parse_config(
    {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "waitForPodsReady": {"timeout": "60s", "requeuingStrategy": {"backoffBaseSeconds": 10}},
        "integrations": {
            "frameworks": ["batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob"]
        },
        "resources": {"deviceClassMappings": [{"name": GPU, "deviceClassNames": ["gpu.nvidia.com"]}]},
    }
)


def trainjob_cluster() -> Cluster:
    return Cluster(dataclasses.replace(CONFIG))


def node_job(name: str = "node", *, parallelism: int | None = 1, gpu: str | None = "gpu") -> dict[str, Any]:
    """A replicated job of the trainer step: container `node`, a GPU claim from template `gpu`."""
    pod: dict[str, Any] = {
        "containers": [{"name": "node", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
        "restartPolicy": "Never",
    }
    if gpu is not None:
        pod["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": gpu}]
        pod["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    spec: dict[str, Any] = {"template": {"spec": pod}}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    return {
        "name": name,
        "replicas": 1,
        "template": {"metadata": {"labels": {ANCESTOR: "trainer"}}, "spec": spec},
    }


def runtime_body(
    name: str = "torch-gpu",
    *,
    jobs: list[dict[str, Any]] | None = None,
    ml_policy: dict[str, Any] | None = None,
    namespace: str | None = None,
) -> dict[str, Any]:
    """A ClusterTrainingRuntime (a TrainingRuntime with `namespace`)."""
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    spec: dict[str, Any] = {"template": {"spec": {"replicatedJobs": jobs or [node_job()]}}}
    if ml_policy is not None:
        spec["mlPolicy"] = ml_policy
    kind = "TrainingRuntime" if namespace is not None else "ClusterTrainingRuntime"
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": kind, "metadata": meta, "spec": spec}


def trainjob_body(
    name: str,
    *,
    runtime: str = "torch-gpu",
    kind: str = "ClusterTrainingRuntime",
    num_nodes: int | None = None,
    queue: str | None = "lq",
    suspend: bool = True,
    patches: list[dict[str, Any]] | None = None,
    trainer: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A TrainJob as stored after Kueue's webhook (suspended, Kueue's runtime patch last)."""
    labels = {"kueue.x-k8s.io/queue-name": queue} if queue else {}
    spec: dict[str, Any] = {
        "runtimeRef": {"name": runtime, "apiGroup": "trainer.kubeflow.org", "kind": kind},
        "suspend": suspend,
        "runtimePatches": [*(patches or []), KUEUE_PATCH],
    }
    if trainer is not None or num_nodes is not None:
        spec["trainer"] = {**(trainer or {}), **({"numNodes": num_nodes} if num_nodes is not None else {})}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": "ns", "labels": labels},
        "spec": spec,
    }
