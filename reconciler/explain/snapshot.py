"""Reading the cluster's admission state as plain objects, for the dry run of
`reconciler explain --what-if FILE`: the queue objects, priority classes, namespaces, claim
templates, DeviceClasses, the Workloads, the objects jobs refer to (as their integrations declare them), and
with the device inventory on the ResourceSlices and Nodes. Each list is paged, each request has
a timeout; a list the user may not read (403) or that is not served (404) is left out and named."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import msgspec

from reconciler.api.resources import (
    CLUSTER_QUEUES,
    COHORTS,
    DEVICE_CLASSES,
    LOCAL_QUEUES,
    NAMESPACES,
    NODES,
    PRIORITY_CLASSES,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_FLAVORS,
    RESOURCE_SLICES,
    WORKLOAD_PRIORITY_CLASSES,
    WORKLOADS,
    Resource,
)
from reconciler.integrations import enabled, references_of
from reconciler.kube import DecodeError, Forbidden, KubeClient, NotFound
from reconciler.simulate import InputObject

__all__ = ["fetch_snapshot"]

PAGE = "500"

_ALWAYS = (
    RESOURCE_FLAVORS,
    COHORTS,
    CLUSTER_QUEUES,
    LOCAL_QUEUES,
    WORKLOAD_PRIORITY_CLASSES,
    PRIORITY_CLASSES,
    NAMESPACES,
    DEVICE_CLASSES,
    RESOURCE_CLAIM_TEMPLATES,
    WORKLOADS,
)
_INVENTORY = (RESOURCE_SLICES, NODES)


class _Page(msgspec.Struct):
    items: list[dict[str, Any]] | None = None
    metadata: dict[str, Any] = {}


async def _list(client: KubeClient, resource: Resource, request_timeout: float) -> list[InputObject]:
    query = {"limit": PAGE}
    out: list[InputObject] = []
    while True:
        body = await client.request("GET", resource.list_path(), params=query, timeout=request_timeout)
        try:
            page = msgspec.json.decode(body, type=_Page)
        except msgspec.DecodeError as err:
            raise DecodeError(f"list {resource.list_path()}: {err}") from err
        for item in page.items or ():
            # List items carry no kind of their own.
            item = {**item, "apiVersion": resource.api_version, "kind": resource.kind}
            meta = item.get("metadata") or {}
            name = (
                f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else meta.get("name")
            )
            out.append(InputObject(f"cluster: {resource.kind} {name}", item))
        more = page.metadata.get("continue")
        if not more:
            return out
        query["continue"] = str(more)


async def fetch_snapshot(
    client: KubeClient, *, request_timeout: float, inventory: bool, frameworks: Sequence[str]
) -> tuple[list[InputObject], list[str]]:
    """The objects, queue objects first (the order the dry run feeds them), and what could not be
    read; the objects jobs refer to only for the `frameworks` enabled."""
    resources = [*_ALWAYS, *(_INVENTORY if inventory else ())]
    resources += list({r.resource for i in enabled(frameworks) for r in references_of(i)})
    unreadable: list[str] = []

    async def readable(resource: Resource) -> list[InputObject]:
        try:
            return await _list(client, resource, request_timeout)
        except Forbidden:
            unreadable.append(f"{resource.plural}.{resource.group or 'core'} (forbidden)")
        except NotFound:
            unreadable.append(f"{resource.plural}.{resource.group or 'core'} (not served)")
        return []

    tasks = [asyncio.create_task(readable(r)) for r in resources]
    try:
        lists = await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    return [obj for found in lists for obj in found], unreadable
