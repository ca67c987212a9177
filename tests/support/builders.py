"""Small builders of API-shaped objects for the core's tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from reconciler.api import ClusterQueue, Job, ResourceClaimTemplate, ResourceFlavor, Workload
from reconciler.core.model.clusterqueues import ClusterQueueModel, compile_cluster_queue


def decode(body: Mapping[str, Any], kind: type[Any]) -> Any:
    return msgspec.json.decode(msgspec.json.encode(body), type=kind)


def job_body(
    name: str,
    *,
    namespace: str = "ns",
    queue: str | None = "lq",
    uid: str = "",
    parallelism: int | None = 1,
    completions: int | None = 1,
    requests: Mapping[str, str] | None = None,
    claims: Sequence[Mapping[str, str]] = (),
    node_selector: Mapping[str, str] | None = None,
    created: str | None = None,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "busybox"}
    if requests:
        container["resources"] = {"requests": dict(requests)}
    spec: dict[str, Any] = {"containers": [container], "restartPolicy": "Never"}
    if claims:
        spec["resourceClaims"] = [dict(c) for c in claims]
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": {}}
    if queue is not None:
        meta["labels"]["kueue.x-k8s.io/queue-name"] = queue
    if uid:
        meta["uid"] = uid
    if created:
        meta["creationTimestamp"] = created
    body: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {"suspend": True, "template": {"spec": spec}},
    }
    if parallelism is not None:
        body["spec"]["parallelism"] = parallelism
    if completions is not None:
        body["spec"]["completions"] = completions
    return body


def job(name: str, **kwargs: Any) -> Job:
    result: Job = decode(job_body(name, **kwargs), Job)
    return result


def flavor(
    name: str, labels: Mapping[str, str] | None = None, taints: Sequence[Mapping[str, str]] = ()
) -> ResourceFlavor:
    spec: dict[str, Any] = {"nodeLabels": dict(labels or {})}
    if taints:
        spec["nodeTaints"] = [dict(t) for t in taints]
    result: ResourceFlavor = decode(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": name},
            "spec": spec,
        },
        ResourceFlavor,
    )
    return result


def cluster_queue_body(
    name: str,
    flavors: Sequence[tuple[str, Mapping[str, str | int]]],
    *,
    covered: Sequence[str] | None = None,
    strategy: str | None = None,
    namespace_selector: Mapping[str, Any] | None = None,
    cohort: str | None = None,
    limits: Mapping[tuple[str, str], Mapping[str, str | int]] | None = None,
    when_can_borrow: str | None = None,
) -> dict[str, Any]:
    """`limits`: (flavor, resource) -> {"borrowingLimit": ..., "lendingLimit": ...}."""
    resources = list(covered or (flavors[0][1].keys() if flavors else []))
    spec: dict[str, Any] = {
        "namespaceSelector": dict(namespace_selector) if namespace_selector is not None else {},
        "resourceGroups": [
            {
                "coveredResources": resources,
                "flavors": [
                    {
                        "name": f,
                        "resources": [
                            {"name": r, "nominalQuota": q, **(limits or {}).get((f, r), {})}
                            for r, q in quotas.items()
                        ],
                    }
                    for f, quotas in flavors
                ],
            }
        ],
    }
    if strategy:
        spec["queueingStrategy"] = strategy
    if cohort:
        spec["cohortName"] = cohort
    if when_can_borrow:
        spec["flavorFungibility"] = {"whenCanBorrow": when_can_borrow}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
    }


def cluster_queue(
    name: str, flavors: Sequence[tuple[str, Mapping[str, str | int]]], **kwargs: Any
) -> ClusterQueueModel:
    return compile_cluster_queue(decode(cluster_queue_body(name, flavors, **kwargs), ClusterQueue))


def claim_template(
    name: str, requests: Sequence[Mapping[str, Any]], namespace: str = "ns"
) -> ResourceClaimTemplate:
    result: ResourceClaimTemplate = decode(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": [dict(r) for r in requests]}}},
        },
        ResourceClaimTemplate,
    )
    return result


def gpu_request(count: int = 1, device_class: str = "gpu.nvidia.com", **extra: Any) -> dict[str, Any]:
    exactly: dict[str, Any] = {
        "deviceClassName": device_class,
        "allocationMode": "ExactCount",
        "count": count,
    }
    exactly.update(extra)
    return {"name": "gpu", "exactly": exactly}


def workload_of(body: Mapping[str, Any]) -> Workload:
    result: Workload = decode(body, Workload)
    return result


def t4_group(quota: dict[str, Any]) -> list[dict[str, Any]]:
    """resourceGroups of one group: flavor t4 with that one quota entry (its resource covered)."""
    return [{"coveredResources": [quota["name"]], "flavors": [{"name": "t4", "resources": [quota]}]}]


def cohort_body(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Cohort",
        "metadata": {"name": name},
        "spec": spec,
    }


def job_pod_metadata(job_name: str) -> dict[str, Any]:
    """The metadata of the Job's pod (namespace ns, pod set main), the Job its controller."""
    return {
        "name": f"{job_name}-1",
        "namespace": "ns",
        "labels": {"kueue.x-k8s.io/podset": "main"},
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job_name, "controller": True}],
    }


def unschedulable(message: str, since: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    """kube-scheduler's PodScheduled=False condition (Unschedulable) of a pod it could not place."""
    return {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": message,
        "lastTransitionTime": since,
    }
