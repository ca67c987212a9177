"""The discovery documents an aggregated API server answers, and its errors as ``Status``, pure.

The API server's aggregator reads ``/apis`` (the group and its versions) and, per version,
``/apis/<group>/<version>`` (the resources): Kueue's visibility server lists ``clusterqueues`` and
``localqueues`` (no verbs of their own) and their ``pendingworkloads`` subresources (``get``), all
of kind ``PendingWorkloadsSummary``. The aggregator asks ``/apis`` for aggregated discovery first
(``apidiscovery.k8s.io`` v2 or v2beta1, as system:masters), as Kueue's generic API server serves
it; without it, it falls back to the per-version documents as a user without groups, whom RBAC
does not let read them, and marks the versions stale (which stalls namespace deletion).
``/openapi/v2`` answers a small document naming the API's
types (the aggregator merges it into the API server's own).

The same server answers the dry run's group (``whatif.dra-quota.dev``, beyond Kueue: ``dryrun.py``),
whose one resource ``whatifs`` is namespaced and can only be created.
"""

from __future__ import annotations

from typing import Any

from . import dryrun
from .summary import GROUP, VERSIONS

__all__ = [
    "AGGREGATED_VERSIONS",
    "aggregated_discovery",
    "api_group",
    "api_group_list",
    "openapi_v2",
    "resource_list",
    "status",
]

KIND = "PendingWorkloadsSummary"


# The groups served, with their versions (the preferred first).
GROUPS: dict[str, tuple[str, ...]] = {GROUP: VERSIONS, dryrun.WHATIF_GROUP: (dryrun.VERSION,)}


def _group(name: str = GROUP) -> dict[str, Any]:
    versions = [{"groupVersion": f"{name}/{v}", "version": v} for v in GROUPS[name]]
    return {"name": name, "versions": versions, "preferredVersion": versions[0]}


def api_group_list() -> dict[str, Any]:
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group(g) for g in GROUPS]}


def api_group(name: str = GROUP) -> dict[str, Any]:
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name)}


def whatif_resource_list() -> dict[str, Any]:
    """The dry run's version: `whatifs`, namespaced, create only."""
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{dryrun.WHATIF_GROUP}/{dryrun.VERSION}",
        "resources": [
            {
                "name": dryrun.RESOURCE,
                "singularName": "whatif",
                "namespaced": True,
                "kind": dryrun.KIND,
                "verbs": ["create"],
            }
        ],
    }


def resource_list(version: str) -> dict[str, Any]:
    def resource(name: str, singular: str, namespaced: bool, verbs: list[str]) -> dict[str, Any]:
        return {
            "name": name,
            "singularName": singular,
            "namespaced": namespaced,
            "kind": KIND,
            "verbs": verbs,
        }

    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{GROUP}/{version}",
        "resources": [
            resource("clusterqueues", "clusterqueue", False, []),
            resource("clusterqueues/pendingworkloads", "", False, ["get"]),
            resource("localqueues", "localqueue", True, []),
            resource("localqueues/pendingworkloads", "", True, ["get"]),
        ],
    }


# The aggregated discovery versions a client may ask for, newest first.
AGGREGATED_VERSIONS = ("v2", "v2beta1")
AGGREGATED_GROUP = "apidiscovery.k8s.io"
AGGREGATED_KIND = "APIGroupDiscoveryList"


def _version_discovery(version: str, group: str = GROUP) -> dict[str, Any]:
    """One version's resources in aggregated form: subresources under their parent resource."""
    listed = (resource_list(version) if group == GROUP else whatif_resource_list())["resources"]
    parents: dict[str, dict[str, Any]] = {}
    for r in listed:
        if "/" not in r["name"]:
            parents[r["name"]] = {
                "resource": r["name"],
                "responseKind": {"group": group, "version": version, "kind": r["kind"]},
                "scope": "Namespaced" if r["namespaced"] else "Cluster",
                "singularResource": r["singularName"],
                "verbs": r["verbs"],
            }
    for r in listed:
        if "/" in r["name"]:
            parent, sub = r["name"].split("/", 1)
            parents[parent].setdefault("subresources", []).append(
                {
                    "subresource": sub,
                    "responseKind": {"group": GROUP, "version": version, "kind": r["kind"]},
                    "verbs": r["verbs"],
                }
            )
    return {"version": version, "resources": list(parents.values()), "freshness": "Current"}


def aggregated_discovery(accept: str) -> tuple[dict[str, Any], str] | None:
    """The ``APIGroupDiscoveryList`` for ``/apis`` and its content type, when the Accept header
    asks for one in a version served here; None: answer the plain ``APIGroupList``."""
    for part in accept.split(","):
        params = dict(p.strip().split("=", 1) for p in part.split(";")[1:] if "=" in p)
        if (
            params.get("g") == AGGREGATED_GROUP
            and params.get("as") == AGGREGATED_KIND
            and params.get("v") in AGGREGATED_VERSIONS
        ):
            version = params["v"]
            body = {
                "kind": AGGREGATED_KIND,
                "apiVersion": f"{AGGREGATED_GROUP}/{version}",
                "metadata": {},
                "items": [
                    {"metadata": {"name": g}, "versions": [_version_discovery(v, g) for v in GROUPS[g]]}
                    for g in GROUPS
                ],
            }
            content_type = f"application/json;g={AGGREGATED_GROUP};v={version};as={AGGREGATED_KIND}"
            return body, content_type
    return None


def status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """A ``metav1.Status`` failure, as Kubernetes API servers answer errors."""
    answer: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details is not None:
        answer["details"] = details
    return answer


def not_found(resource: str, name: str) -> dict[str, Any]:
    """Kueue's NotFound for a queue it does not know (``resource``: clusterqueue or localqueue)."""
    return status(
        404,
        "NotFound",
        f'{resource}.{GROUP} "{name}" not found',
        {"name": name, "group": GROUP, "kind": resource},
    )


def openapi_v2() -> dict[str, Any]:
    """A Swagger 2.0 document with the API's paths (get) and its summary type."""
    ref = {"$ref": f"#/definitions/{GROUP}.v1beta2.{KIND}"}
    paths: dict[str, Any] = {}
    for version in VERSIONS:
        base = f"/apis/{GROUP}/{version}"
        for path, op in (
            (f"{base}/clusterqueues/{{name}}/pendingworkloads", "ClusterQueuePendingWorkloads"),
            (
                f"{base}/namespaces/{{namespace}}/localqueues/{{name}}/pendingworkloads",
                "LocalQueuePendingWorkloads",
            ),
        ):
            paths[path] = {
                "get": {
                    "operationId": f"read{version.capitalize()}{op}",
                    "produces": ["application/json"],
                    "responses": {"200": {"description": "OK", "schema": ref}},
                }
            }
    item = {
        "type": "object",
        "properties": {
            "metadata": {"type": "object"},
            "priority": {"type": "integer", "format": "int32"},
            "localQueueName": {"type": "string"},
            "positionInClusterQueue": {"type": "integer", "format": "int32"},
            "positionInLocalQueue": {"type": "integer", "format": "int32"},
        },
        "required": ["priority", "localQueueName", "positionInClusterQueue", "positionInLocalQueue"],
    }
    summary = {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "items": {"type": "array", "items": item},
        },
        "required": ["items"],
    }
    return {
        "swagger": "2.0",
        "info": {"title": "Kueue visibility-server", "version": "v0.18.1"},
        "paths": paths,
        "definitions": {f"{GROUP}.v1beta2.{KIND}": summary},
    }
