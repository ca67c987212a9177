"""Reading what an explanation needs from the API server: the only I/O of `reconciler explain`.

The asked-for object first (a Job or a Workload, and the other of the pair), then
every list at once, each paged and each request with a timeout. Lists the user may
not read (403) are left empty and named in the state, so the answer says it may be
incomplete rather than failing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine, Mapping
from typing import Any, TypeVar

import msgspec

from reconciler.api import (
    CLUSTER_QUEUES,
    DEVICE_CLASSES,
    EVENTS,
    JOBS,
    LOCAL_QUEUES,
    NAMESPACES,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_FLAVORS,
    WORKLOADS,
    ClusterQueue,
    Cohort,
    DeviceClass,
    Job,
    LocalQueue,
    Namespace,
    ObjectMeta,
    Pod,
    Resource,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceFlavor,
    Workload,
)
from reconciler.api.meta import ApiStruct
from reconciler.api.resources import COHORTS, NODES, RESOURCE_SLICES
from reconciler.api.slices import Node, ResourceSlice
from reconciler.core.model.jobs import PODSET_LABEL
from reconciler.integrations import Integration
from reconciler.integrations.pods.group import IS_GROUP_WORKLOAD_ANNOTATION
from reconciler.integrations.pods.pod import GROUP_NAME_LABEL
from reconciler.kube import DecodeError, Forbidden, KubeClient, NotFound
from reconciler.kube.watchwire import ListPage

from .state import ClusterState, Event, OtherJob, Target, explainable

__all__ = ["ExplainError", "fetch_state"]

T = TypeVar("T")
PAGE = "500"


class _Meta(ApiStruct):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)


class ExplainError(RuntimeError):
    """The asked-for object cannot be read; the message names it and why."""


async def _get(
    client: KubeClient, resource: Resource, namespace: str, name: str, kind: type[T], request_timeout: float
) -> T:
    body = await client.request("GET", resource.item_path(namespace, name), timeout=request_timeout)
    try:
        return msgspec.json.decode(body, type=kind)
    except msgspec.DecodeError as err:  # ValidationError included
        raise DecodeError(f"{resource.kind} {namespace}/{name}: {err}") from err


async def _list(
    client: KubeClient,
    resource: Resource,
    kind: type[T],
    request_timeout: float,
    namespace: str | None = None,
    params: Mapping[str, str] | None = None,
) -> list[T]:
    """Every item of a (paged) list; items that do not decode are skipped."""
    query = {**(params or {}), "limit": PAGE}
    items: list[T] = []
    while True:
        body = await client.request(
            "GET", resource.list_path(namespace), params=query, timeout=request_timeout
        )
        try:
            page = msgspec.json.decode(body, type=ListPage)
        except msgspec.DecodeError as err:
            raise DecodeError(f"list {resource.list_path(namespace)}: {err}") from err
        for raw in page.items or ():
            try:
                items.append(msgspec.json.decode(raw, type=kind))
            except msgspec.DecodeError:
                continue  # one object the projection cannot read does not hide the others
        if not page.metadata.continue_:
            return items
        query["continue"] = page.metadata.continue_


def _start(what: str, unreadable: list[str], call: Coroutine[Any, Any, list[T]]) -> asyncio.Task[list[T]]:
    return asyncio.create_task(_readable(what, unreadable, call))


async def _readable(what: str, unreadable: list[str], call: Awaitable[list[T]]) -> list[T]:
    try:
        return await call
    except Forbidden:
        unreadable.append(f"{what} (forbidden)")
    except NotFound:
        unreadable.append(f"{what} (not served: are the CRDs installed?)")
    return []


async def _other(
    client: KubeClient, integration: Integration, namespace: str, name: str, request_timeout: float
) -> OtherJob:
    resource = integration.resource
    path = resource.item_path(namespace, name)
    body = await client.request("GET", path, timeout=request_timeout)
    try:
        meta = msgspec.json.decode(body, type=_Meta).metadata
        return OtherJob(integration, meta, msgspec.json.decode(body, type=integration.projection))
    except msgspec.DecodeError as err:
        raise DecodeError(f"{resource.kind} {namespace}/{name}: {err}") from err


async def _target(
    client: KubeClient, target: Target, request_timeout: float
) -> tuple[Job | None, Workload | None, OtherJob | None]:
    others = explainable()
    try:
        if target.kind == "job":
            return await _get(client, JOBS, target.namespace, target.name, Job, request_timeout), None, None
        if target.kind in others:
            integration = others[target.kind]
            return (
                None,
                None,
                await _other(client, integration, target.namespace, target.name, request_timeout),
            )
        workload = await _get(client, WORKLOADS, target.namespace, target.name, Workload, request_timeout)
    except NotFound:
        raise ExplainError(f"{target} not found") from None
    except Forbidden as err:
        raise ExplainError(f"{target}: not allowed to read it: {err}") from None
    by_kind = {(i.kind, i.api_version): i for i in others.values()}
    for ref in workload.metadata.owner_references:
        try:
            if ref.kind == "Job":
                job = await _get(client, JOBS, target.namespace, ref.name, Job, request_timeout)
                return job, workload, None
            owner = by_kind.get((ref.kind, ref.api_version))
            if owner is not None and not owner.jobs_from_pods:
                other = await _other(client, owner, target.namespace, ref.name, request_timeout)
                return None, workload, other
        except (NotFound, Forbidden):
            return None, workload, None
    return None, workload, None


async def fetch_state(
    client: KubeClient, target: Target, *, now: str, request_timeout: float
) -> ClusterState:
    """Everything `analyze.explain` looks at; raises ExplainError when the target cannot be read."""
    job, workload, other = await _target(client, target, request_timeout)
    state = ClusterState(target=target, now=now, job=job, workload=workload, other=other)
    ns = target.namespace
    missing = state.unreadable
    pods_query = {"labelSelector": f"batch.kubernetes.io/job-name={job.metadata.name}"} if job else None
    if workload is not None and workload.metadata.annotations.get(IS_GROUP_WORKLOAD_ANNOTATION) == "true":
        # A pod group's Workload: its pods are the group's (Kueue's label selector for them).
        pods_query = {"labelSelector": f"{GROUP_NAME_LABEL}={workload.metadata.name}"}
    elif other is not None:
        # The pods the controller started carry the pod-set label; those the job controls are its.
        pods_query = {"labelSelector": PODSET_LABEL}
    # Every list at once; the first error (other than 403/404) cancels the rest.
    workloads = _start("Workloads", missing, _list(client, WORKLOADS, Workload, request_timeout))
    cluster_queues = _start(
        "ClusterQueues", missing, _list(client, CLUSTER_QUEUES, ClusterQueue, request_timeout)
    )
    cohorts = _start("Cohorts", missing, _list(client, COHORTS, Cohort, request_timeout))
    local_queues = _start("LocalQueues", missing, _list(client, LOCAL_QUEUES, LocalQueue, request_timeout))
    flavors = _start(
        "ResourceFlavors", missing, _list(client, RESOURCE_FLAVORS, ResourceFlavor, request_timeout)
    )
    namespaces = _start("Namespaces", missing, _list(client, NAMESPACES, Namespace, request_timeout))
    templates = _start(
        "ResourceClaimTemplates",
        missing,
        _list(client, RESOURCE_CLAIM_TEMPLATES, ResourceClaimTemplate, request_timeout),
    )
    classes = _start("DeviceClasses", missing, _list(client, DEVICE_CLASSES, DeviceClass, request_timeout))
    claims = _start(
        f"ResourceClaims in {ns}", missing, _list(client, RESOURCE_CLAIMS, ResourceClaim, request_timeout, ns)
    )
    # What the DRA drivers publish: sizes allocationMode All and device capacities per flavor.
    slices = _start("ResourceSlices", missing, _list(client, RESOURCE_SLICES, ResourceSlice, request_timeout))
    nodes = _start("Nodes", missing, _list(client, NODES, Node, request_timeout))
    warnings = {"fieldSelector": "type=Warning"}
    events = _start(f"Events in {ns}", missing, _list(client, EVENTS, Event, request_timeout, ns, warnings))
    pods = (
        _start(f"Pods in {ns}", missing, _list(client, PODS, Pod, request_timeout, ns, pods_query))
        if pods_query is not None
        else None
    )
    tasks: list[asyncio.Task[Any]] = [workloads, cluster_queues, cohorts, local_queues, flavors, namespaces]
    tasks += [templates, classes, claims, slices, nodes, events, *([pods] if pods is not None else [])]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)  # collected: no "never retrieved" noise
        raise
    state.workloads = await workloads
    state.cluster_queues = await cluster_queues
    state.cohorts = await cohorts
    state.local_queues = await local_queues
    state.flavors = await flavors
    state.namespaces = await namespaces
    state.templates = await templates
    state.device_classes = await classes
    state.claims = await claims
    state.resource_slices = await slices
    state.nodes = await nodes
    state.events = await events
    state.pods = await pods if pods is not None else []
    return state  # a Job's Workload is found among state.workloads (analyze.find_workload)
