"""JobSet bodies for the integration's tests: replicated jobs whose pods ask for GPUs through
ResourceClaimTemplates (one template per replicated job, named after it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
from reconciler.api.jobset import JobSet

__all__ = ["RJ", "jobset_body", "jobset_of"]

# (name, replicas, parallelism, completions, claim template or None)
RJ = tuple[str, int, int | None, int | None, str | None]


def _replicated_job(
    name: str, replicas: int, parallelism: int | None, completions: int | None, claim: str | None
) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
        "restartPolicy": "Never",
    }
    if claim is not None:
        pod["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": claim}]
        pod["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    job: dict[str, Any] = {"template": {"spec": pod}, "backoffLimit": 0}
    if parallelism is not None:
        job["parallelism"] = parallelism
    if completions is not None:
        job["completions"] = completions
    return {"name": name, "replicas": replicas, "groupName": "default", "template": {"spec": job}}


def jobset_body(
    name: str, replicated: Sequence[RJ], *, queue: str | None = "lq", suspend: bool = True
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "labels": {}}
    if queue is not None:
        meta["labels"]["kueue.x-k8s.io/queue-name"] = queue
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": meta,
        "spec": {
            "suspend": suspend,
            "replicatedJobs": [_replicated_job(*rj) for rj in replicated],
            "successPolicy": {"operator": "All"},
        },
    }


def jobset_of(body: dict[str, Any]) -> JobSet:
    decoded: JobSet = msgspec.json.decode(msgspec.json.encode(body), type=JobSet)
    return decoded
