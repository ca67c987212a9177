"""Realistic Kueue objects in v1beta1 (as manifests written for Kueue carry them) and in v1beta2
(as this controller stores them, status included), one pair per kind served in both versions;
and a pruner that drops what a CRD version's structural schema does not know, as the API server
does."""

from __future__ import annotations

import copy
from typing import Any

T0 = "2026-12-07T10:00:00Z"


def _condition(kind: str, reason: str, message: str) -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": T0,
        "observedGeneration": 1,
    }


def _meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "labels": {"team": "vision"},
        "annotations": {"owner": "ml-platform"},
    }
    if namespace:
        meta["namespace"] = namespace
    return meta


_RESOURCE_GROUPS = [
    {
        "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
        "flavors": [
            {
                "name": "a100",
                "resources": [
                    {"name": "cpu", "nominalQuota": "64"},
                    {"name": "memory", "nominalQuota": "512Gi"},
                    {"name": "nvidia.com/gpu", "nominalQuota": 8, "borrowingLimit": 4, "lendingLimit": 2},
                ],
            }
        ],
    }
]
_USAGE = [{"name": "a100", "resources": [{"name": "nvidia.com/gpu", "total": "2", "borrowed": "0"}]}]


def _cluster_queue_spec(cohort_key: str) -> dict[str, Any]:
    return {
        cohort_key: "research",
        "namespaceSelector": {"matchLabels": {"kueue": "on"}},
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": copy.deepcopy(_RESOURCE_GROUPS),
        "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
        "admissionChecksStrategy": {"admissionChecks": [{"name": "prov", "onFlavors": ["a100"]}]},
        "fairSharing": {"weight": "2"},
        "stopPolicy": "None",
    }


def _cluster_queue_status() -> dict[str, Any]:
    return {
        "pendingWorkloads": 3,
        "reservingWorkloads": 1,
        "admittedWorkloads": 1,
        "conditions": [_condition("Active", "Ready", "Can admit new workloads")],
        "flavorsReservation": copy.deepcopy(_USAGE),
        "flavorsUsage": copy.deepcopy(_USAGE),
        "fairSharing": {"weightedShare": 250},
    }


def _workload_spec(v1beta1: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "queueName": "team-a",
        "priority": 1000,
        "active": True,
        "maximumExecutionTimeSeconds": 3600,
        "podSets": [
            {
                "name": "main",
                "count": 4,
                "minCount": 2,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {"name": "train", "image": "trainer:1", "resources": {"requests": {"cpu": "2"}}}
                        ],
                    }
                },
                "topologyRequest": {"preferred": "cloud.provider.com/topology-rack"},
            }
        ],
    }
    if v1beta1:
        spec |= {"priorityClassName": "high", "priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass"}
    else:
        spec["priorityClassRef"] = {
            "group": "kueue.x-k8s.io",
            "kind": "WorkloadPriorityClass",
            "name": "high",
        }
    return spec


def _workload_status(v1beta1: bool) -> dict[str, Any]:
    levels = ["cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"]
    if v1beta1:
        topology: dict[str, Any] = {
            "levels": levels,
            "domains": [
                {"values": ["block-1", "rack-1"], "count": 2},
                {"values": ["block-1", "rack-2"], "count": 1},
                {"values": ["block-1", "rack-13"], "count": 1},
            ],
        }
    else:
        topology = {
            "levels": levels,
            "slices": [
                {
                    "domainCount": 3,
                    "valuesPerLevel": [
                        {"universal": "block-1"},
                        {"individual": {"prefix": "rack-", "roots": ["1", "2", "13"]}},
                    ],
                    "podCounts": {"individual": [2, 1, 1]},
                }
            ],
        }
    time_key = "accumulatedPastExexcutionTimeSeconds" if v1beta1 else "accumulatedPastExecutionTimeSeconds"
    return {
        "conditions": [_condition("QuotaReserved", "QuotaReserved", "Quota reserved in ClusterQueue gpu")],
        "admission": {
            "clusterQueue": "gpu",
            "podSetAssignments": [
                {
                    "name": "main",
                    "flavors": {"nvidia.com/gpu": "a100"},
                    "resourceUsage": {"nvidia.com/gpu": "4"},
                    "count": 4,
                    "topologyAssignment": topology,
                }
            ],
        },
        "requeueState": {"count": 1, "requeueAt": T0},
        "resourceRequests": [{"name": "main", "resources": {"cpu": "8"}}],
        time_key: 120,
    }


def _local_queue(v1beta1: bool) -> dict[str, Any]:
    usage_key = "flavorUsage" if v1beta1 else "flavorsUsage"
    usage = [{"name": "a100", "resources": [{"name": "nvidia.com/gpu", "total": "2"}]}]
    return {
        "kind": "LocalQueue",
        "metadata": _meta("team-a", "research"),
        "spec": {"clusterQueue": "gpu", "stopPolicy": "None", "fairSharing": {"weight": "1"}},
        "status": {
            "pendingWorkloads": 1,
            "reservingWorkloads": 1,
            "admittedWorkloads": 1,
            "conditions": [_condition("Active", "Ready", "Can submit new workloads to localQueue")],
            "flavorsReservation": copy.deepcopy(usage),
            usage_key: usage,
            "fairSharing": {"weightedShare": 0},
        },
    }


def objects(version: str) -> dict[str, dict[str, Any]]:
    """One realistic object of each kind, in ``version`` (``v1beta1`` or ``v1beta2``)."""
    v1beta1 = version == "v1beta1"
    found = {
        "ClusterQueue": {
            "kind": "ClusterQueue",
            "metadata": _meta("gpu"),
            "spec": _cluster_queue_spec("cohort" if v1beta1 else "cohortName"),
            "status": _cluster_queue_status(),
        },
        "Cohort": {
            "kind": "Cohort",
            "metadata": _meta("research"),
            "spec": {
                "parentName": "org",
                "resourceGroups": copy.deepcopy(_RESOURCE_GROUPS),
                "fairSharing": {"weight": "1"},
            },
            "status": {"fairSharing": {"weightedShare": 10}},
        },
        "LocalQueue": _local_queue(v1beta1),
        "Workload": {
            "kind": "Workload",
            "metadata": _meta("job-train-3f2a1", "research"),
            "spec": _workload_spec(v1beta1),
            "status": _workload_status(v1beta1),
        },
        "ResourceFlavor": {
            "kind": "ResourceFlavor",
            "metadata": _meta("a100"),
            "spec": {
                "nodeLabels": {"gpu.nvidia.com/model": "a100"},
                "nodeTaints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
                "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "topologyName": "default",
            },
        },
        "WorkloadPriorityClass": {
            "kind": "WorkloadPriorityClass",
            "metadata": _meta("high"),
            "value": 1000,
            "description": "production training",
        },
        "Topology": {
            "kind": "Topology",
            "metadata": _meta("default"),
            "spec": {
                "levels": [
                    {"nodeLabel": "cloud.provider.com/topology-block"},
                    {"nodeLabel": "kubernetes.io/hostname"},
                ]
            },
        },
    }
    for obj in found.values():
        obj["apiVersion"] = f"kueue.x-k8s.io/{version}"
    return found


def pruned_object(obj: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as the API server keeps it under ``schema`` (a CRD version's openAPIV3Schema): every
    field the schema does not know removed; metadata is the server's and kept whole."""
    kept: dict[str, Any] = pruned(obj, schema)
    if "metadata" in obj:
        kept["metadata"] = copy.deepcopy(obj["metadata"])
    return kept


def pruned(obj: Any, schema: dict[str, Any]) -> Any:
    if schema.get("x-kubernetes-preserve-unknown-fields") and "properties" not in schema:
        return copy.deepcopy(obj)
    if isinstance(obj, dict):
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        if properties is not None:
            keep_unknown = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
            return {
                k: pruned(v, properties[k]) if k in properties else copy.deepcopy(v)
                for k, v in obj.items()
                if k in properties or keep_unknown
            }
        if isinstance(extra, dict):
            return {k: pruned(v, extra) for k, v in obj.items()}
        return {} if schema.get("type") == "object" else copy.deepcopy(obj)
    if isinstance(obj, list) and isinstance(schema.get("items"), dict):
        return [pruned(v, schema["items"]) for v in obj]
    return copy.deepcopy(obj)
