"""The input of `reconciler simulate`: manifests' objects, decoded and sorted by what they feed.

Each object is decoded into its API type with a message naming the object and the field
when it does not fit; queue objects go straight into the engine through the feed (in the
order given), Jobs and Workloads wait for their turn (creation order), the rest is kept
for compiling workloads and for the device inventory.
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
    LocalQueue,
    Namespace,
    PriorityClass,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceFlavor,
    Topology,
    WorkloadPriorityClass,
)
from reconciler.api.resources import Resource
from reconciler.api.slices import Node, ResourceSlice
from reconciler.core.engine import Engine
from reconciler.feed import feed_cluster_queue, feed_cohort, feed_flavor, feed_local_queue, feed_namespace
from reconciler.feed.queues import METADATA_NAME_LABEL
from reconciler.integrations import REGISTRY, references_of

# The kinds of every registered integration: they arrive as jobs.
_JOB_KINDS = frozenset(i.kind for i in REGISTRY.values())
# The kinds jobs read (a TrainJob's runtimes), by kind: kept to resolve those jobs with.
_REFERENCED = {r.resource.kind: r for i in REGISTRY.values() for r in references_of(i)}

__all__ = ["Collected", "InputObject", "SimulationError", "SimulationResult", "collect", "decode", "describe"]

_KUEUE_GROUP = "kueue.x-k8s.io/"
_AT_PATH = re.compile(r"^(?P<what>.*?)(?: - at `\$\.?(?P<path>[^`]*)`)?$")
T = TypeVar("T")
Key = tuple[str, str]


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


def describe(obj: InputObject) -> str:
    meta = obj.body.get("metadata") or {}
    name = meta.get("name", "<no name>") if isinstance(meta, Mapping) else "<no name>"
    namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
    ident = f"{namespace}/{name}" if namespace else str(name)
    return f"{obj.source}: {obj.body.get('kind', '<no kind>')} {ident}"


def decode(obj: InputObject, kind: type[T]) -> T:
    try:
        return msgspec.json.decode(msgspec.json.encode(obj.body), type=kind)
    except msgspec.ValidationError as err:
        match = _AT_PATH.match(str(err))
        assert match is not None
        what = match["what"].replace("`", "")
        what = what[:1].lower() + what[1:]
        path = match["path"] or "(object)"
        raise SimulationError(f"{describe(obj)}: {path}: {what}") from None


@dataclass
class Collected:
    """The engine with every queue object fed, and what the rest of the run needs."""

    engine: Engine = field(default_factory=Engine)
    cluster_queues: list[tuple[ClusterQueue, Mapping[str, Any]]] = field(default_factory=list)
    arrivals: list[tuple[str, int, InputObject]] = field(default_factory=list)  # (created, seq, obj)
    templates: dict[Key, ResourceClaimTemplate] = field(default_factory=dict)
    claims: dict[Key, ResourceClaim] = field(default_factory=dict)
    workload_classes: dict[str, WorkloadPriorityClass] = field(default_factory=dict)
    pod_classes: dict[str, PriorityClass] = field(default_factory=dict)
    device_classes: list[DeviceClass] = field(default_factory=list)
    slices: list[ResourceSlice] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # Pod groups: the pods of each incomplete group so far, why it has no Workload yet, and the
    # groups whose Workload has arrived.
    groups: dict[Key, list[Any]] = field(default_factory=dict)
    group_problems: dict[Key, str] = field(default_factory=dict)
    groups_done: set[Key] = field(default_factory=set)
    # Objects jobs reference, by (resource plural, namespace or "", name).
    referenced: dict[tuple[str, str, str], Any] = field(default_factory=dict)

    def lookup(self, resource: Resource, namespace: str, name: str) -> Any | None:
        return self.referenced.get((resource.plural, namespace if resource.namespaced else "", name))


def _queue_object(obj: InputObject, kind: str, out: Collected) -> bool:
    """Feed a Kueue queue object to the engine; False when it is not one."""
    engine, reason = out.engine, None
    if kind == "ResourceFlavor":
        flavor = decode(obj, ResourceFlavor)
        feed_flavor(engine, flavor.metadata.name, flavor)
    elif kind == "ClusterQueue":
        cq = decode(obj, ClusterQueue)
        reason = feed_cluster_queue(engine, cq.metadata.name, cq)
        out.cluster_queues.append((cq, obj.body))
    elif kind == "Cohort":
        cohort = decode(obj, Cohort)
        reason = feed_cohort(engine, cohort.metadata.name, cohort)
    elif kind == "LocalQueue":
        lq = decode(obj, LocalQueue)
        if not lq.metadata.namespace:
            raise SimulationError(
                f"{describe(obj)}: metadata.namespace: a LocalQueue is namespaced; set metadata.namespace"
            )
        feed_local_queue(engine, lq.metadata.namespace, lq.metadata.name, lq)
    elif kind == "WorkloadPriorityClass":
        wpc = decode(obj, WorkloadPriorityClass)
        out.workload_classes[wpc.metadata.name] = wpc
    elif kind == "Topology":
        engine.set_topology(decode(obj, Topology))
    else:
        return False
    if reason is not None:
        raise SimulationError(f"{describe(obj)}: {reason}")
    return True


def _other_object(obj: InputObject, kind: str, seq: int, inventory_on: bool, out: Collected) -> None:
    if kind == "Namespace":
        feed_namespace(out.engine, decode(obj, Namespace))
    elif kind == "ResourceClaimTemplate":
        rct = decode(obj, ResourceClaimTemplate)
        out.templates[(rct.metadata.namespace, rct.metadata.name)] = rct
    elif kind == "ResourceClaim":
        claim = decode(obj, ResourceClaim)
        out.claims[(claim.metadata.namespace, claim.metadata.name)] = claim
    elif kind == "PriorityClass":
        pc = decode(obj, PriorityClass)
        out.pod_classes[pc.metadata.name] = pc
    elif kind == "Workload" or kind in _JOB_KINDS:
        meta = obj.body.get("metadata") or {}
        stamp = str(meta.get("creationTimestamp") or "") if isinstance(meta, Mapping) else ""
        out.arrivals.append((stamp, seq, obj))
    elif kind in _REFERENCED:
        ref = _REFERENCED[kind]
        kept = decode(obj, ref.projection)
        namespace = kept.metadata.namespace if ref.resource.namespaced else ""
        out.referenced[(ref.resource.plural, namespace, kept.metadata.name)] = kept
    elif kind == "DeviceClass":  # for the inventory, and the extended resources classes serve
        out.device_classes.append(decode(obj, DeviceClass))
    elif inventory_on and kind == "ResourceSlice":
        out.slices.append(decode(obj, ResourceSlice))
    elif kind == "Node":  # for the inventory, and topology-aware scheduling
        out.nodes.append(decode(obj, Node))
    elif kind not in ("DeviceClass", "Configuration"):
        out.warnings.append(f"{describe(obj)}: ignored (not used for admission)")


def collect(objects: Sequence[InputObject], inventory_on: bool, engine: Engine | None = None) -> Collected:
    """Every object decoded and sorted; queue objects fed to the engine in the order given (a
    fresh one, or `engine` set up beforehand, e.g. with admission fair sharing on)."""
    out = Collected() if engine is None else Collected(engine=engine)
    for seq, obj in enumerate(objects):
        kind = str(obj.body.get("kind"))
        kueue = str(obj.body.get("apiVersion", "")).startswith(_KUEUE_GROUP)
        if not (kueue and _queue_object(obj, kind, out)):
            _other_object(obj, kind, seq, inventory_on, out)
    engine = out.engine
    # A LocalQueue's namespace not given as an object: as the API server would have it.
    for ns_name in {ns for ns, _ in engine.queues.local_queues} - engine.cache.namespaces.keys():
        engine.set_namespace(ns_name, {METADATA_NAME_LABEL: ns_name})
    return out
