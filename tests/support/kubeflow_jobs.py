"""Kubeflow replica-spec jobs for the tests: a PyTorchJob (or any training-operator kind) and an
MPIJob with replica types, each asking for cpu and, optionally, a GPU through a template."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from reconciler.api.kubeflow import MPIJob, PyTorchJob, ReplicaJob

# (replica type, replicas, claim template or None)
Replica = tuple[str, int | None, str | None]


def pod_template(claim_template: str | None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [container]}
    if claim_template is not None:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": claim_template}]
        container["resources"]["claims"] = [{"name": "gpu"}]
    return {"spec": spec}


def replica_job_body(
    kind: str,
    api_version: str,
    field: str,
    name: str,
    replicas: Sequence[Replica],
    *,
    queue: str | None = "lq",
    suspend: bool | None = True,
) -> dict[str, Any]:
    specs: dict[str, Any] = {}
    for replica_type, count, claim in replicas:
        spec: dict[str, Any] = {"template": pod_template(claim), "restartPolicy": "Never"}
        if count is not None:
            spec["replicas"] = count
        specs[replica_type] = spec
    body: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": "ns",
            "labels": {"kueue.x-k8s.io/queue-name": queue} if queue else {},
        },
        "spec": {field: specs},
    }
    if suspend is not None:
        body["spec"]["runPolicy"] = {"suspend": suspend}
    return body


def pytorchjob_body(name: str, replicas: Sequence[Replica], **kw: Any) -> dict[str, Any]:
    return replica_job_body("PyTorchJob", "kubeflow.org/v1", "pytorchReplicaSpecs", name, replicas, **kw)


def mpijob_body(name: str, replicas: Sequence[Replica], **kw: Any) -> dict[str, Any]:
    return replica_job_body("MPIJob", "kubeflow.org/v2beta1", "mpiReplicaSpecs", name, replicas, **kw)


def pytorchjob_of(body: dict[str, Any]) -> PyTorchJob:
    return msgspec.json.decode(msgspec.json.encode(body), type=PyTorchJob)


def mpijob_of(body: dict[str, Any]) -> MPIJob:
    return msgspec.json.decode(msgspec.json.encode(body), type=MPIJob)


def decoded(body: dict[str, Any], kind: type[ReplicaJob]) -> Any:
    return msgspec.json.decode(msgspec.json.encode(body), type=kind)


def with_status(
    body: dict[str, Any], *conditions: tuple[str, str], active: dict[str, int] | None = None
) -> dict[str, Any]:
    """The body with conditions (type, status) and active pods per replica type."""
    status: dict[str, Any] = {
        "conditions": [{"type": t, "status": s, "reason": t, "message": f"job is {t}"} for t, s in conditions]
    }
    if active:
        status["replicaStatuses"] = {rt: {"active": n} for rt, n in active.items()}
    return {**body, "status": status}
