"""An offline admission run over plain objects: what `reconciler simulate` shows.

Objects are admitted in creation order: by `metadata.creationTimestamp`
where present, otherwise in the order given (file order). Each Job or
Workload arrives in turn and the scheduler runs after each arrival, as the
controller would do when they are created one by one. The result is what the
API would show afterwards: Workloads with conditions, admission and resource
requests, and ClusterQueues with usage and counts.

With the device inventory on (``inventory_mode`` Report or Enforce), DeviceClass,
ResourceSlice, Node and ResourceClaim objects in the input make the inventory:
ClusterQueues get the DevicesCoverQuota condition, and in Enforce mode admission
also waits for free devices (claims given count as allocated to others).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec

from reconciler.api import (
    ClusterQueue,
    Cohort,
    DeviceClass,
    Job,
    LocalQueue,
    Namespace,
    PriorityClass,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceFlavor,
    Workload,
    WorkloadPriorityClass,
    WorkloadStatus,
)
from reconciler.api.slices import Node, ResourceSlice

from .clusterqueues import InvalidClusterQueueError, compile_cluster_queue
from .cohorts import compile_cohort
from .engine import Engine
from .inventory import InventoryIndex
from .inventory_admission import InventoryGate
from .inventory_report import DEVICES_COVER_QUOTA, devices_cover_quota
from .ordering import EVICTION_TIMESTAMP, queue_order_timestamp
from .priority import MissingPriorityClass, resolve_priority
from .quantity import QuantityError
from .scheduler import Admit, Decision, Pending, Preempt
from .status import (
    admitted_workload_status,
    cluster_queue_status,
    condition,
    pending_workload_status,
    set_condition,
)
from .workloads import (
    DEVICE_CHARGES_ANNOTATION,
    FIRST_AVAILABLE_ANNOTATION,
    QUEUE_NAME_LABEL,
    WorkloadInfo,
    compile_workload,
    covered_by,
    workload_for_job,
)

__all__ = ["InputObject", "SimulationError", "SimulationResult", "simulate"]

WORKLOAD_API = "kueue.x-k8s.io/v1beta2"
_KUEUE_GROUP = "kueue.x-k8s.io/"
_AT_PATH = re.compile(r"^(?P<what>.*?)(?: - at `\$\.?(?P<path>[^`]*)`)?$")
T = TypeVar("T")


class SimulationError(ValueError):
    """Input that cannot be simulated; the message names the object and field."""


@dataclass(frozen=True, slots=True)
class InputObject:
    source: str  # e.g. "30-job.yaml#1", for error messages
    body: Mapping[str, Any]


@dataclass
class SimulationResult:
    workloads: list[dict[str, Any]] = field(default_factory=list)
    cluster_queues: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _describe(obj: InputObject) -> str:
    meta = obj.body.get("metadata") or {}
    name = meta.get("name", "<no name>") if isinstance(meta, Mapping) else "<no name>"
    namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
    ident = f"{namespace}/{name}" if namespace else str(name)
    return f"{obj.source}: {obj.body.get('kind', '<no kind>')} {ident}"


def _decode(obj: InputObject, kind: type[T]) -> T:
    try:
        return msgspec.json.decode(msgspec.json.encode(obj.body), type=kind)
    except msgspec.ValidationError as err:
        match = _AT_PATH.match(str(err))
        assert match is not None
        what = match["what"].replace("`", "")
        what = what[:1].lower() + what[1:]
        path = match["path"] or "(object)"
        raise SimulationError(f"{_describe(obj)}: {path}: {what}") from None


def _api_dict(struct: msgspec.Struct, api_version: str, kind: str) -> dict[str, Any]:
    body: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(struct))
    body.pop("apiVersion", None)
    body.pop("kind", None)
    return {"apiVersion": api_version, "kind": kind, **body}


def _is_admitted(workload: Workload) -> bool:
    reserved = condition(workload.status.conditions, "QuotaReserved")
    return workload.status.admission is not None and reserved is not None and reserved.status == "True"


def simulate(
    objects: Sequence[InputObject],
    mappings: Mapping[str, str],
    now: str,
    inventory_mode: str = "Off",
    requeuing_timestamp: str = EVICTION_TIMESTAMP,
    capacities: Mapping[str, Sequence[tuple[str, str]]] | None = None,
) -> SimulationResult:
    """`capacities`: per DeviceClass, the (device capacity, quota resource) pairs its mapping
    charges (the Configuration's `class_capacities`)."""
    capacities = capacities or {}
    result = SimulationResult()
    state = Engine()
    index = InventoryIndex()
    inventory_on = inventory_mode != "Off"
    templates: dict[tuple[str, str], ResourceClaimTemplate] = {}
    claims: dict[tuple[str, str], ResourceClaim] = {}
    workload_classes: dict[str, WorkloadPriorityClass] = {}
    pod_classes: dict[str, PriorityClass] = {}
    cluster_queues: list[tuple[ClusterQueue, Mapping[str, Any]]] = []
    arrivals: list[tuple[str, int, InputObject]] = []
    for seq, obj in enumerate(objects):
        kind = obj.body.get("kind")
        api_version = str(obj.body.get("apiVersion", ""))
        if kind == "ResourceFlavor" and api_version.startswith(_KUEUE_GROUP):
            state.set_flavor(_decode(obj, ResourceFlavor))
        elif kind == "ClusterQueue" and api_version.startswith(_KUEUE_GROUP):
            cq = _decode(obj, ClusterQueue)
            try:
                state.set_cluster_queue(compile_cluster_queue(cq))
            except (InvalidClusterQueueError, QuantityError) as err:
                raise SimulationError(f"{_describe(obj)}: {err}") from None
            cluster_queues.append((cq, obj.body))
        elif kind == "Cohort" and api_version.startswith(_KUEUE_GROUP):
            try:
                state.set_cohort(compile_cohort(_decode(obj, Cohort)))
            except (InvalidClusterQueueError, QuantityError) as err:
                raise SimulationError(f"{_describe(obj)}: {err}") from None
        elif kind == "LocalQueue" and api_version.startswith(_KUEUE_GROUP):
            lq = _decode(obj, LocalQueue)
            if not lq.metadata.namespace:
                raise SimulationError(
                    f"{_describe(obj)}: metadata.namespace: a LocalQueue is "
                    "namespaced; set metadata.namespace"
                )
            state.set_local_queue(lq.metadata.namespace, lq.metadata.name, lq.spec.cluster_queue)
        elif kind == "Namespace":
            ns = _decode(obj, Namespace)
            labels = {**ns.metadata.labels, "kubernetes.io/metadata.name": ns.metadata.name}
            state.set_namespace(ns.metadata.name, labels)
        elif kind == "ResourceClaimTemplate":
            rct = _decode(obj, ResourceClaimTemplate)
            templates[(rct.metadata.namespace, rct.metadata.name)] = rct
        elif kind == "ResourceClaim":
            claim = _decode(obj, ResourceClaim)
            claims[(claim.metadata.namespace, claim.metadata.name)] = claim
        elif kind == "WorkloadPriorityClass" and api_version.startswith(_KUEUE_GROUP):
            wpc = _decode(obj, WorkloadPriorityClass)
            workload_classes[wpc.metadata.name] = wpc
        elif kind == "PriorityClass":
            pc = _decode(obj, PriorityClass)
            pod_classes[pc.metadata.name] = pc
        elif kind in ("Job", "Workload"):
            meta = obj.body.get("metadata") or {}
            stamp = str(meta.get("creationTimestamp") or "") if isinstance(meta, Mapping) else ""
            arrivals.append((stamp, seq, obj))
        elif inventory_on and kind == "DeviceClass":
            index.set_class(str(obj.body.get("metadata", {}).get("name", "")), _decode(obj, DeviceClass))
        elif inventory_on and kind == "ResourceSlice":
            rs = _decode(obj, ResourceSlice)
            index.set_slice(rs.metadata.name, rs)
        elif inventory_on and kind == "Node":
            node = _decode(obj, Node)
            index.set_node(node.metadata.name, node.metadata.labels)
        elif inventory_on and kind == "ResourceClaim":
            rc = _decode(obj, ResourceClaim)
            index.set_claim((rc.metadata.namespace, rc.metadata.name), rc)
        elif kind not in ("DeviceClass", "Configuration"):
            result.warnings.append(f"{_describe(obj)}: ignored (not used for admission)")

    for ns_name in {ns for ns, _ in state.queues.local_queues} - state.cache.namespaces.keys():
        state.set_namespace(ns_name, {"kubernetes.io/metadata.name": ns_name})

    names = {cls: [name for name, _ in caps] for cls, caps in capacities.items()}
    inventory = index.compute(state.flavors, mappings, lambda pod: False, names) if inventory_on else None
    if inventory is not None:
        state.scheduler.sizes = inventory
        for name, sl in index.slices.items():
            if sl.spec.node_name and sl.spec.node_name not in index.nodes:
                result.warnings.append(
                    f"ResourceSlice {name}: spec.nodeName: Node {sl.spec.node_name} is not in the input; "
                    "its devices count for no flavor"
                )
        if inventory_mode == "Enforce":
            state.scheduler.gate = InventoryGate(inventory)

    def lookup(namespace: str, name: str) -> ResourceClaimTemplate | None:
        return templates.get((namespace, name))

    workloads: dict[tuple[str, str], Workload] = {}
    infos: dict[tuple[str, str], WorkloadInfo] = {}
    waiting: list[WorkloadInfo] = []
    for _, seq, obj in sorted(arrivals, key=lambda a: (a[0], a[1])):
        if obj.body.get("kind") == "Job":
            job = _decode(obj, Job)
            if QUEUE_NAME_LABEL not in job.metadata.labels:
                result.warnings.append(f"{_describe(obj)}: no {QUEUE_NAME_LABEL} label; not managed")
                continue
            priority = resolve_priority(job, workload_classes, pod_classes)
            if isinstance(priority, MissingPriorityClass):
                raise SimulationError(f"{_describe(obj)}: {priority.message}")
            workload = workload_for_job(job, priority)
        else:
            workload = _decode(obj, Workload)
        if not workload.metadata.namespace:
            raise SimulationError(f"{_describe(obj)}: metadata.namespace: set the namespace")
        try:
            info = compile_workload(
                workload,
                lookup_template=lookup,
                lookup_claim=lambda ns, name: claims.get((ns, name)),
                mappings=mappings,
                covered=covered_by(state.queues.local_queues, state.cache.cluster_queues, workload),
                capacities=capacities,
                sized=inventory_on,
            )
        except (QuantityError, msgspec.ValidationError) as err:
            raise SimulationError(f"{_describe(obj)}: spec.podSets: {err}") from None
        info.uid = info.uid or f"~{seq:08d}"
        if info.choices:
            # As the controller records it: which firstAvailable subrequests are charged.
            workload.metadata.annotations[FIRST_AVAILABLE_ANNOTATION] = "; ".join(info.choices)
        info.created = queue_order_timestamp(workload, requeuing_timestamp) or info.created
        workloads[info.key] = workload
        infos[info.key] = info
        if _is_admitted(workload):
            # Already admitted: it holds its quota before anything new is considered.
            assert workload.status.admission is not None
            state.add_workload(info, workload.status.admission)
        else:
            waiting.append(info)

    last: dict[tuple[str, str], Decision] = {}
    for info in waiting:
        state.add_workload(info)
        decisions = state.schedule()
        while decisions:
            preempts = [d for d in decisions if isinstance(d, Preempt)]
            for decision in decisions:
                if not isinstance(decision, Preempt):
                    last[decision.key] = decision
            # Offline, an eviction lands at once: the victims go back to their queues.
            for preempt in preempts:
                for target in preempt.targets:
                    state.release(target.key)
            decisions = state.schedule() if preempts else []

    for key, workload in workloads.items():
        outcome = last.get(key)
        status: WorkloadStatus = workload.status
        if isinstance(outcome, Admit):
            status = admitted_workload_status(status, outcome, now)
            if outcome.charged:
                # As the controller records it: what the charges the flavors decided came to.
                workload.metadata.annotations[DEVICE_CHARGES_ANNOTATION] = "; ".join(outcome.charged)
        elif isinstance(outcome, Pending):
            status = pending_workload_status(status, infos[key], outcome, now)
        workload.status = status
        result.workloads.append(_api_dict(workload, WORKLOAD_API, "Workload"))

    for cq, body in cluster_queues:
        status_obj = cluster_queue_status(state, cq.metadata.name, cq.status, now)
        model = state.cache.cluster_queues.get(cq.metadata.name)
        if inventory is not None and model is not None:
            covered = devices_cover_quota(model, inventory)
            conditions = set_condition(status_obj.conditions, DEVICES_COVER_QUOTA, *covered, now)
            status_obj = msgspec.structs.replace(status_obj, conditions=conditions)
        out = {k: v for k, v in body.items() if k != "status"}
        out["apiVersion"] = WORKLOAD_API
        out["status"] = msgspec.to_builtins(status_obj)
        result.cluster_queues.append(out)
    return result
