"""An offline admission run over plain objects: what `reconciler simulate` shows.

Objects are admitted in creation order: by `metadata.creationTimestamp`
where present, otherwise in the order given (file order). Each job (of any
integration the Configuration enables: batch/v1 Jobs, JobSets, pod groups,
LeaderWorkerSets) or Workload arrives in turn and the scheduler runs after each arrival, as the controller
would do when they are created one by one. The result is what the
API would show afterwards: Workloads with conditions, admission and resource
requests, and ClusterQueues with usage and counts.

With the device inventory on (``inventory_mode`` Report or Enforce), DeviceClass,
ResourceSlice and Node objects in the input make the inventory: ClusterQueues get
the DevicesCoverQuota condition, and in Enforce mode admission also waits for free
devices.

Topology objects and the input's Nodes give topology-aware scheduling its domains (`topology`).

A LeaderWorkerSet arrives as its groups, one Workload each (a `leader` and a `worker` pod
set, owned by the set, with the group's index), group 0 first, as the controller makes them.

The objects reach the engine through the feed (`reconciler.feed`), as the controller's do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import msgspec

from reconciler.api import Job, PodSet, Workload, WorkloadStatus
from reconciler.api.pods import ManagedPod
from reconciler.core.devices.dra_extended import ExtendedResources
from reconciler.core.devices.inventory import DeviceInventory
from reconciler.core.engine import Engine
from reconciler.core.eviction_status import evicted_workload_status
from reconciler.core.model.workloads import (
    DEVICE_CHARGES_ANNOTATION,
    FIRST_AVAILABLE_ANNOTATION,
    QUEUE_NAME_LABEL,
    WorkloadInfo,
    workload_for_object,
)
from reconciler.core.primitives.ordering import EVICTION_TIMESTAMP, queue_order_timestamp
from reconciler.core.primitives.priority import (
    MissingPriorityClass,
    ResolvedPriority,
    resolve_priority,
    resolve_priority_of,
)
from reconciler.core.primitives.quantity import QuantityError
from reconciler.core.queueing.admission_fair_sharing import AfsSettings
from reconciler.core.quota.cache import after_reclaim
from reconciler.core.quota.inventory_admission import InventoryGate
from reconciler.core.quota.inventory_report import DEVICES_COVER_QUOTA, devices_cover_quota
from reconciler.core.scheduling.preemption import victim_message
from reconciler.core.scheduling.scheduler import Admit, Decision, Pending, Preempt
from reconciler.core.status import (
    PREEMPTED,
    admitted_workload_status,
    cluster_queue_status,
    condition,
    pending_workload_status,
    resource_requests,
    set_condition,
)
from reconciler.feed import WorkloadSources, compile_for, inventory_index
from reconciler.integrations import BATCH_JOB, POD, REGISTRY, GroupedSets, Integration, ReadsReferences
from reconciler.integrations.batchjob import workload_for_job
from reconciler.integrations.pods.group import group_workload, make_group
from reconciler.integrations.pods.group_plan import GroupKnown, plan_group
from reconciler.integrations.pods.pod import group_name

from .inputs import Collected, InputObject, SimulationError, SimulationResult, collect, decode, describe
from .topology import place_nodes

__all__ = ["FairSharing", "Preempted", "Prepared", "Step", "admit_in_turn", "prepare", "simulate"]

WORKLOAD_API = "kueue.x-k8s.io/v1beta2"
Key = tuple[str, str]


def _api_dict(struct: msgspec.Struct, api_version: str, kind: str) -> dict[str, Any]:
    body: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(struct))
    body.pop("apiVersion", None)
    body.pop("kind", None)
    return {"apiVersion": api_version, "kind": kind, **body}


def _is_admitted(workload: Workload) -> bool:
    reserved = condition(workload.status.conditions, "QuotaReserved")
    return workload.status.admission is not None and reserved is not None and reserved.status == "True"


@dataclass(frozen=True, slots=True)
class FairSharing:
    """The Configuration's fair sharing: cohort fair sharing's preemption strategies (None: off)
    and Admission Fair Sharing's settings (None: off). Usage starts from each LocalQueue's status;
    no time passes during a run, so only the entry penalties of its admissions add to it."""

    strategies: tuple[str, ...] | None = None
    admission: AfsSettings | None = None


@dataclass
class Prepared:
    """Every object fed: queue objects, admitted workloads charged; `waiting` not added yet."""

    collected: Collected
    inventory: DeviceInventory | None
    workloads: dict[Key, Workload] = field(default_factory=dict)
    infos: dict[Key, WorkloadInfo] = field(default_factory=dict)
    waiting: list[WorkloadInfo] = field(default_factory=list)


def _inventory(
    collected: Collected,
    mappings: Mapping[str, str],
    inventory_mode: str,
    capacities: Mapping[str, Sequence[tuple[str, str]]],
) -> DeviceInventory | None:
    if inventory_mode == "Off":
        return None
    index = inventory_index(collected.device_classes, collected.slices, collected.nodes)
    names = {cls: [name for name, _ in caps] for cls, caps in capacities.items()}
    inventory = index.compute(collected.engine.flavors, mappings, lambda pod: False, names)
    collected.engine.scheduler.sizes = inventory
    for name, sl in index.slices.items():
        if sl.spec.node_name and sl.spec.node_name not in index.nodes:
            collected.warnings.append(
                f"ResourceSlice {name}: spec.nodeName: Node {sl.spec.node_name} is not in the input; "
                "its devices count for no flavor"
            )
    if inventory_mode == "Enforce":
        collected.engine.scheduler.gate = InventoryGate(inventory)
    return inventory


def _integration(obj: InputObject) -> Integration | None:
    """The registered integration of an arriving job (by kind and apiVersion), other than batch/v1."""
    body = obj.body
    for integration in REGISTRY.values():
        if (integration.kind, integration.api_version) == (body.get("kind"), body.get("apiVersion")):
            return None if integration is BATCH_JOB else integration
    return None


def _other_job(
    obj: InputObject, integration: Integration, collected: Collected, frameworks: Sequence[str]
) -> list[Workload]:
    """The Workloads of a job of another integration (a JobSet: one with its pod sets, owned by
    it; a LeaderWorkerSet: one per group)."""
    if integration.framework not in frameworks:
        collected.warnings.append(
            f"{describe(obj)}: integrations.frameworks does not enable {integration.framework}; not managed"
        )
        return []
    job = decode(obj, integration.projection)
    if QUEUE_NAME_LABEL not in job.metadata.labels:
        collected.warnings.append(f"{describe(obj)}: no {QUEUE_NAME_LABEL} label; not managed")
        return []
    if integration.jobs_from_pods:
        return _set_groups(obj, cast(GroupedSets, integration), job, collected)
    if integration is POD and group_name(job.metadata.labels, job.metadata.annotations):
        workload = _group_pod(obj, job, collected)
        return [] if workload is None else [workload]
    if isinstance(integration, ReadsReferences):  # its pod sets come from what it names
        job = integration.resolve(job, collected.lookup)
        why = integration.unresolved(job)
        if why is not None:
            raise SimulationError(f"{describe(obj)}: {why}")
    pod_sets = integration.pod_sets(job)
    priority = _priority(obj, job.metadata.labels, pod_sets, collected)
    return [workload_for_object(job.metadata, integration.api_version, integration.kind, pod_sets, priority)]


def _priority(
    obj: InputObject, labels: Mapping[str, str], pod_sets: list[PodSet], collected: Collected
) -> ResolvedPriority:
    """The priority of a job with these labels and pod sets; a class it names that does not
    exist is the simulation's error."""
    priority = resolve_priority_of(
        labels, [ps.template for ps in pod_sets], collected.workload_classes, collected.pod_classes
    )
    if isinstance(priority, MissingPriorityClass):
        raise SimulationError(f"{describe(obj)}: {priority.message}")
    return priority


def _set_groups(obj: InputObject, sets: GroupedSets, job: Any, collected: Collected) -> list[Workload]:
    """The Workloads of a set whose jobs are groups (a LeaderWorkerSet's, one per group; a
    StatefulSet's one), as the controller makes them."""
    out = []
    for group in sets.groups_of(job, ()):
        pod_sets = sets.pod_sets(group)
        priority = _priority(obj, group.metadata.labels, pod_sets, collected)
        made = workload_for_object(group.metadata, sets.api_version, sets.kind, pod_sets, priority)
        out.append(cast(Workload, sets.group_workload_shape(group, made)))
    return out


def _group_pod(obj: InputObject, pod: ManagedPod, collected: Collected) -> Workload | None:
    """A pod of a group: kept with its group's pods; the group's one Workload arrives with the
    pod that completes it (as the controller makes it only then; pods beyond the total count
    are excess, which Kueue deletes)."""
    meta = pod.metadata
    key = (meta.namespace, group_name(meta.labels, meta.annotations))
    if key in collected.groups_done:
        collected.warnings.append(f"{describe(obj)}: pod group {key[0]}/{key[1]} is complete: an excess pod")
        return None
    members = collected.groups.setdefault(key, [])
    members.append(pod)
    group = make_group(*key, members)
    assert group is not None
    plan = plan_group(group, None, GroupKnown(), {}, now="")
    if plan.create is None:
        collected.group_problems[key] = f"{describe(obj)}: pod group {key[0]}/{key[1]}: {plan.problem}"
        return None
    del collected.groups[key]
    collected.group_problems.pop(key, None)
    collected.groups_done.add(key)
    kept, pod_sets = plan.create
    priority = resolve_priority_of(
        group.metadata.labels,
        [ps.template for ps in pod_sets],
        collected.workload_classes,
        collected.pod_classes,
    )
    if isinstance(priority, MissingPriorityClass):
        raise SimulationError(f"{describe(obj)}: {priority.message}")
    return group_workload(group, kept, pod_sets, priority)


def _workloads(obj: InputObject, collected: Collected, frameworks: Sequence[str]) -> list[Workload]:
    """The Workloads an arriving object stands for, in order (none: a job this controller
    leaves alone)."""
    integration = _integration(obj)
    if integration is not None:
        return _other_job(obj, integration, collected, frameworks)
    if obj.body.get("kind") != "Job":
        return [decode(obj, Workload)]
    job = decode(obj, Job)
    if QUEUE_NAME_LABEL not in job.metadata.labels:
        collected.warnings.append(f"{describe(obj)}: no {QUEUE_NAME_LABEL} label; not managed")
        return []
    priority = resolve_priority(job, collected.workload_classes, collected.pod_classes)
    if isinstance(priority, MissingPriorityClass):
        raise SimulationError(f"{describe(obj)}: {priority.message}")
    return [workload_for_job(job, priority)]


def prepare(
    objects: Sequence[InputObject],
    mappings: Mapping[str, str],
    inventory_mode: str = "Off",
    requeuing_timestamp: str = EVICTION_TIMESTAMP,
    capacities: Mapping[str, Sequence[tuple[str, str]]] | None = None,
    frameworks: Sequence[str] = ("batch/job",),
    fair: FairSharing | None = None,
    extended_resources: bool = False,
) -> Prepared:
    capacities = capacities or {}
    engine = Engine()
    if fair is not None:
        engine.scheduler.fair_sharing = fair.strategies
        if fair.admission is not None:
            engine.enable_admission_fair_sharing(fair.admission)
    collected = collect(objects, inventory_mode != "Off", engine)
    prepared = Prepared(collected, _inventory(collected, mappings, inventory_mode, capacities))
    place_nodes(collected, frameworks, mappings, inventory_mode != "Off")
    engine = collected.engine
    extended = ExtendedResources.of(collected.device_classes) if extended_resources else None
    sources = WorkloadSources(
        mappings, collected.templates, collected.claims, capacities, prepared.inventory is not None, extended
    )
    for _, seq, obj in sorted(collected.arrivals, key=lambda a: (a[0], a[1])):
        for n, workload in enumerate(_workloads(obj, collected, frameworks)):
            _arrive(
                prepared, obj, workload, sources, f"~{seq:08d}" + (f"-{n}" if n else ""), requeuing_timestamp
            )
    collected.warnings += collected.group_problems.values()  # groups never complete: no Workload
    return prepared


def _arrive(
    prepared: Prepared,
    obj: InputObject,
    workload: Workload,
    sources: WorkloadSources,
    uid: str,
    requeuing_timestamp: str,
) -> None:
    """One Workload fed: charged at once when already admitted, else waiting for its turn."""
    engine = prepared.collected.engine
    if not workload.metadata.namespace:
        raise SimulationError(f"{describe(obj)}: metadata.namespace: set the namespace")
    try:
        info = compile_for(engine, workload, sources)
    except (QuantityError, msgspec.ValidationError) as err:
        raise SimulationError(f"{describe(obj)}: spec.podSets: {err}") from None
    info.uid = info.uid or uid
    if info.choices:
        # As the controller records it: which firstAvailable subrequests are charged.
        workload.metadata.annotations[FIRST_AVAILABLE_ANNOTATION] = "; ".join(info.choices)
    info.created = queue_order_timestamp(workload, requeuing_timestamp) or info.created
    prepared.workloads[info.key] = workload
    prepared.infos[info.key] = info
    if _is_admitted(workload):
        # Already admitted: it holds its quota before anything new is considered.
        charged = after_reclaim(workload)  # less the pods its job finished (reclaimablePods)
        assert charged is not None
        engine.add_workload(info, charged)
    else:
        prepared.waiting.append(info)


@dataclass(frozen=True, slots=True)
class Preempted:
    """One preemption of a workload: the message and reason of its victim's conditions, and the
    workload it made room for."""

    message: str
    reason: str
    by: Key = ("", "")


# What happened to a workload during the run, in order: admitted, left pending, preempted.
Step = Admit | Pending | Preempted


def _record(trails: dict[Key, list[Step]], key: Key, step: Step) -> None:
    trail = trails.setdefault(key, [])
    if isinstance(step, Pending) and trail and isinstance(trail[-1], Pending):
        trail[-1] = step  # verdicts in a row: each replaces the one before in the API
    else:
        trail.append(step)


def admit_in_turn(prepared: Prepared) -> dict[Key, list[Step]]:
    """Each waiting workload arrives, then a cycle runs; what each workload went through."""
    engine = prepared.collected.engine
    trails: dict[Key, list[Step]] = {}
    for info in prepared.waiting:
        engine.add_workload(info)
        decisions: list[Decision] = engine.schedule()
        while decisions:
            preempts = [d for d in decisions if isinstance(d, Preempt)]
            for decision in decisions:
                if not isinstance(decision, Preempt):
                    _record(trails, decision.key, decision)
            # Offline, an eviction lands at once: the victims go back to their queues.
            for preempt in preempts:
                preemptor = prepared.workloads[preempt.key]
                for target in preempt.targets:
                    message = victim_message(engine.cache, preemptor, preempt.cluster_queue, target)
                    _record(trails, target.key, Preempted(message, target.reason, preempt.key))
                    engine.release(target.key)
            decisions = engine.schedule() if preempts else []
    return trails


def _final_status(workload: Workload, info: WorkloadInfo, trail: Sequence[Step], now: str) -> WorkloadStatus:
    """The workload's status after its steps, each written as the controller writes it."""
    status, generation = workload.status, workload.metadata.generation or None
    annotations = workload.metadata.annotations
    for step in trail:
        if isinstance(step, Admit):
            status = admitted_workload_status(status, step, now, generation)
        elif isinstance(step, Pending):
            status = pending_workload_status(status, info, step, now, generation)
        else:
            status = evicted_workload_status(
                status,
                reason=PREEMPTED,
                message=step.message,
                requeue_state=status.requeue_state,
                requests=resource_requests(info),
                now=now,
                generation=generation,
                preempted_reason=step.reason,
            )
        if isinstance(step, Admit) and step.charged:
            # As the controller records it: what the charges the flavors decided came to.
            annotations[DEVICE_CHARGES_ANNOTATION] = "; ".join(step.charged)
        elif not isinstance(step, Preempted):
            annotations.pop(DEVICE_CHARGES_ANNOTATION, None)
    return status


def simulate(
    objects: Sequence[InputObject],
    mappings: Mapping[str, str],
    now: str,
    inventory_mode: str = "Off",
    requeuing_timestamp: str = EVICTION_TIMESTAMP,
    capacities: Mapping[str, Sequence[tuple[str, str]]] | None = None,
    frameworks: Sequence[str] = ("batch/job",),
    fair: FairSharing | None = None,
    extended_resources: bool = False,
) -> SimulationResult:
    """`capacities`: per DeviceClass, the (device capacity, quota resource) pairs its mapping
    charges (the Configuration's `class_capacities`); `frameworks`: the integrations enabled
    (integrations.frameworks), whose jobs get Workloads; `fair`: fair sharing, as configured;
    `extended_resources`: Kueue's gate KueueDRAIntegrationExtendedResource (the DeviceClasses given
    say which class serves an extended resource)."""
    prepared = prepare(
        objects,
        mappings,
        inventory_mode,
        requeuing_timestamp,
        capacities,
        frameworks,
        fair,
        extended_resources,
    )
    collected, engine, inventory = prepared.collected, prepared.collected.engine, prepared.inventory
    result = SimulationResult(warnings=collected.warnings)
    trails = admit_in_turn(prepared)
    for key, workload in prepared.workloads.items():
        workload.status = _final_status(workload, prepared.infos[key], trails.get(key, ()), now)
        result.workloads.append(_api_dict(workload, WORKLOAD_API, "Workload"))
    for cq, body in collected.cluster_queues:
        status_obj = cluster_queue_status(engine, cq.metadata.name, cq.status, now)
        model = engine.cache.cluster_queues.get(cq.metadata.name)
        if inventory is not None and model is not None:
            covered = devices_cover_quota(model, inventory)
            conditions = set_condition(status_obj.conditions, DEVICES_COVER_QUOTA, *covered, now)
            status_obj = msgspec.structs.replace(status_obj, conditions=conditions)
        out = {k: v for k, v in body.items() if k != "status"}
        out["apiVersion"] = WORKLOAD_API
        out["status"] = msgspec.to_builtins(status_obj)
        result.cluster_queues.append(out)
    return result
