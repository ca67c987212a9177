"""Jobs become Workloads, and Workloads become what admission reasons about.

`workload_for_object` builds the Workload object Kueue would create for a job
of any kind, from its pod sets. `compile_workload` turns a Workload into a `WorkloadInfo`: its
pod sets with per-pod requests (containers plus DRA claims charged through
`deviceClassMappings`), or the problem that keeps it from being charged.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

import msgspec

from reconciler.api import (
    ObjectMeta,
    OwnerReference,
    PodSet,
    PodSpecView,
    ResourceClaimTemplate,
    Workload,
    WorkloadSpec,
    pod_template_view,
)

from ..devices.dra import (
    Capacities,
    ClaimCharge,
    ClaimLookup,
    Covered,
    DeviceAsk,
    DeviceDemand,
    DraProblem,
    MatchConstraint,
    claim_charges,
)
from ..devices.dra_devices import Charging
from ..devices.dra_extended import ExtendedResources, charge_extended
from ..primitives.podrequests import Amounts, add_amounts, pod_requests, scale_amounts
from ..primitives.priority import ResolvedPriority
from ..primitives.selectors import PodPlacement
from ..topology.requests import TOPOLOGY_UNSUPPORTED, TopologyRequest, topology_request
from .clusterqueues import ClusterQueueModel

__all__ = [
    "DEVICE_CHARGES_ANNOTATION",
    "FIRST_AVAILABLE_ANNOTATION",
    "JOB_POD_SET",
    "JOB_UID_LABEL",
    "MAX_EXEC_TIME_LABEL",
    "QUEUE_NAME_LABEL",
    "RESOURCE_IN_USE_FINALIZER",
    "TOPOLOGY_REFUSAL",
    "TOPOLOGY_UNSUPPORTED",
    "DeviceSizes",
    "PodSetInfo",
    "WorkloadInfo",
    "compile_workload",
    "covered_by",
    "max_exec_seconds",
    "with_copied_labels",
    "workload_for_object",
    "workload_name_for_job",
]

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
_INT32_MAX = 2**31 - 1
_DIGITS = re.compile(r"[+-]?[0-9]+")
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
RESOURCE_IN_USE_FINALIZER = "kueue.x-k8s.io/resource-in-use"
# Which firstAvailable subrequest each device request is charged for (absent when none).
FIRST_AVAILABLE_ANNOTATION = "dra-quota-reconciler/first-available"
# What the charges the flavor decided (allocationMode All, device capacities) came to at admission.
DEVICE_CHARGES_ANNOTATION = "dra-quota-reconciler/device-charges"
TOPOLOGY_REFUSAL = (
    "topology-aware scheduling is supported for batch/v1 Jobs and JobSets only by this controller: remove "
    "the topology annotations from the pod template (the job is then admitted without a topology placement)"
)

NOT_COUNTED_YET = "the device inventory has not been counted yet"


class DeviceSizes(Protocol):
    """The device inventory as flavor assignment sees it (`DeviceInventory`)."""

    def size(self, flavor: str, demand: DeviceDemand) -> tuple[int, str] | str: ...


_NOTHING: Mapping[str, int] = MappingProxyType({})
_NO_RESOURCES: frozenset[str] = frozenset()
_MAX_NAME = 253
_HASH_LEN = 5
# The pod set of a job with one, named as Kueue names it.
JOB_POD_SET = "main"


def workload_name_for_job(job_name: str, job_uid: str, kind: str, group: str) -> str:
    """`job-<name>-<5 hex>`: the prefix truncated to fit 253, hash of kind, group, name, uid."""
    prefix = f"{kind.lower()}-{job_name}"[: _MAX_NAME - 1 - _HASH_LEN]
    digest = hashlib.sha1(f"{kind}\n{group}\n{job_name}\n{job_uid}".encode()).hexdigest()
    return f"{prefix}-{digest[:_HASH_LEN]}"


def max_exec_seconds(labels: Mapping[str, str]) -> int | None:
    """The Workload's maximumExecutionTimeSeconds from its job's labels: a positive int32, else None."""
    text = labels.get(MAX_EXEC_TIME_LABEL)
    if text is None:
        return None
    if _DIGITS.fullmatch(text) is None:  # (as Go's ParseInt reads it: no spaces, no underscores)
        return None
    value = int(text)
    return value if 0 < value <= _INT32_MAX else None


def workload_for_object(
    meta: ObjectMeta,
    api_version: str,
    kind: str,
    pod_sets: list[PodSet],
    priority: ResolvedPriority | None = None,
) -> Workload:
    """The Workload Kueue creates for a job of any kind: its pod sets, owned by the job."""
    group = api_version.rpartition("/")[0]
    return Workload(
        metadata=ObjectMeta(
            name=workload_name_for_job(meta.name, meta.uid, kind, group),
            namespace=meta.namespace,
            labels={JOB_UID_LABEL: meta.uid} if meta.uid else {},
            finalizers=[RESOURCE_IN_USE_FINALIZER],
            owner_references=[
                OwnerReference(
                    api_version=api_version,
                    kind=kind,
                    name=meta.name,
                    uid=meta.uid,
                    controller=True,
                    block_owner_deletion=True,
                )
            ],
            creation_timestamp=meta.creation_timestamp,
        ),
        spec=WorkloadSpec(
            pod_sets=pod_sets,
            queue_name=meta.labels.get(QUEUE_NAME_LABEL, ""),
            priority=priority.value if priority is not None else None,
            priority_class_ref=priority.ref if priority is not None else None,
            maximum_execution_time_seconds=max_exec_seconds(meta.labels),
        ),
    )


def with_copied_labels(workload: Workload, labels: Mapping[str, str], keys: Sequence[str]) -> Workload:
    """The Workload with the job's labels named in integrations.labelKeysToCopy (those the job
    has), as Kueue copies them when it creates the Workload."""
    copied = {key: labels[key] for key in keys if key in labels}
    if not copied:
        return workload
    meta = msgspec.structs.replace(workload.metadata, labels={**workload.metadata.labels, **copied})
    return msgspec.structs.replace(workload, metadata=meta)


@dataclass(slots=True)
class PodSetInfo:
    name: str
    count: int
    placement: PodPlacement
    per_pod: Amounts
    # Charged once for the Workload whatever the count: the shared claims this pod set names first.
    once: Mapping[str, int] = field(default_factory=lambda: _NOTHING)
    # Charges the flavor decides (allocationMode All, device capacities): per pod, and once.
    demands: tuple[DeviceDemand, ...] = ()
    demands_once: tuple[DeviceDemand, ...] = ()
    # What a pod needs from the devices (classes, counts, selectors, tolerations) and its claims'
    # matchAttribute constraints: the device inventory's checks (deviceInventory Enforce).
    asks: tuple[DeviceAsk, ...] = ()
    constraints: tuple[MatchConstraint, ...] = ()
    # Its topology request (Kueue's TAS), from spec.podSets[].topologyRequest or the annotations.
    topology: TopologyRequest | None = None
    # Partial admission: the fewest pods it may be admitted with (None: all or nothing).
    min_count: int | None = None

    def total(self) -> Amounts:
        """What is charged whatever the flavor (without the charges the flavor decides)."""
        total = scale_amounts(self.per_pod, self.count)
        add_amounts(total, self.once)
        return total

    @property
    def demanded(self) -> frozenset[str]:
        """The resources some charge the flavor decides is for."""
        if not self.demands and not self.demands_once:
            return _NO_RESOURCES
        return frozenset(d.resource for d in (*self.demands, *self.demands_once))

    def base_requests(self) -> Amounts:
        """`total()`, with a 0 for each resource a charge the flavor decides is for."""
        total = self.total()
        for resource in self.demanded:
            total.setdefault(resource, 0)
        return total

    def requests_in(
        self, base: Amounts, flavor: str, sizes: DeviceSizes | None
    ) -> tuple[Amounts, tuple[tuple[str, str], ...]] | str:
        """`base` (from `base_requests`) with the amounts `flavor` decides for the demanded
        resources, and how each was reckoned (see `total_in`); or why the flavor cannot take it."""
        resolved = self.total_in(flavor, sizes)
        if isinstance(resolved, str):
            return resolved
        amounts, lines = resolved
        return {**base, **{r: amounts.get(r, 0) for r in self.demanded}}, lines

    def total_in(
        self, flavor: str, sizes: DeviceSizes | None
    ) -> tuple[Amounts, tuple[tuple[str, str], ...]] | str:
        """The whole charge in `flavor`, with (resource, how) per charge the flavor decided; or
        why the flavor cannot take this pod set."""
        total = self.total()
        if not self.demands and not self.demands_once:
            return total, ()
        if sizes is None:
            return NOT_COUNTED_YET
        lines: list[tuple[str, str]] = []
        for demand, times in [*((d, self.count) for d in self.demands), *((d, 1) for d in self.demands_once)]:
            sized = sizes.size(flavor, demand)
            if isinstance(sized, str):
                return sized
            amount, how = sized
            total[demand.resource] = total.get(demand.resource, 0) + amount * times
            pods = f"{times} pod(s) x " if times != 1 else ""
            lines.append((demand.resource, f"{demand.label}: {pods}{how}"))
        return total, tuple(lines)


@dataclass(slots=True)
class WorkloadInfo:
    """What admission needs to know about one Workload."""

    namespace: str
    name: str
    uid: str
    queue_name: str
    priority: int
    created: str
    pod_sets: list[PodSetInfo] = field(default_factory=list)
    problem: DraProblem | None = None
    # Everything flavor assignment depends on: equal shapes get equal verdicts.
    shape: bytes = b""
    # Which firstAvailable subrequests were charged, one readable line each.
    choices: tuple[str, ...] = ()
    # (DeviceClass, devices, claims) for the whole Workload, for metrics; a tuple, as it is kept
    # for every pending workload.
    device_classes: tuple[tuple[str, int, int], ...] = ()
    # Its controller owner's (apiVersion, kind), ("", "") for none.
    owner: tuple[str, str] = ("", "")

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    def total_requests(self) -> list[tuple[str, Amounts]]:
        return [(ps.name, ps.total()) for ps in self.pod_sets]

    @property
    def devices_by_class(self) -> Amounts:
        return {name: devices for name, devices, _ in self.device_classes}

    @property
    def claims_by_class(self) -> Amounts:
        return {name: claims for name, _, claims in self.device_classes}


TemplateLookup = Callable[[str, str], ResourceClaimTemplate | None]


def compile_workload(
    workload: Workload,
    *,
    lookup_template: TemplateLookup,
    mappings: Mapping[str, str],
    created: str = "",
    lookup_claim: ClaimLookup | None = None,
    covered: Covered | None = None,
    capacities: Capacities | None = None,
    sized: bool = False,
    extended: ExtendedResources | None = None,
) -> WorkloadInfo:
    """Compute requests (including DRA charges) for every pod set of a Workload.

    With `lookup_claim`, shared claims (`resourceClaimName`) are charged once per
    Workload (see dra.py); without it they are refused as Kueue refuses them. `covered`:
    the resources the Workload's ClusterQueue has quota for (see `covered_by`). `capacities` and
    `sized`: see `claim_charges` (device capacities charged, device inventory on). `extended`: the
    extended resources DeviceClasses serve, charged through their class (None: the rule is off)."""
    meta = workload.metadata
    info = WorkloadInfo(
        namespace=meta.namespace,
        name=meta.name,
        uid=meta.uid,
        queue_name=workload.spec.queue_name,
        priority=workload.spec.priority or 0,
        created=meta.creation_timestamp or created,
        owner=next(((r.api_version, r.kind) for r in meta.owner_references if r.controller), ("", "")),
    )
    charged_claims: set[str] = set()
    choices: list[str] = []
    devices: Amounts = {}
    claims: Amounts = {}
    for index, pod_set in enumerate(workload.spec.pod_sets):
        view = pod_template_view(pod_set.template)
        spec = view.spec
        topology = topology_request(index, pod_set, view.metadata.annotations)
        if isinstance(topology, str):
            info.problem = DraProblem(topology)
            break
        per_pod = pod_requests(spec)
        count = 1 if pod_set.count is None else pod_set.count
        charge: ClaimCharge | DraProblem | None = None
        if spec.resource_claims:
            charge = claim_charges(
                pod_set_index=index,
                pod_set_name=pod_set.name,
                spec=spec,
                namespace=meta.namespace,
                lookup_template=lookup_template,
                mappings=mappings,
                lookup_claim=lookup_claim,
                charged_claims=charged_claims,
                covered=covered,
                capacities=capacities or {},
                sized=sized,
            )
        if extended is not None and not isinstance(charge, DraProblem):
            charging = Charging(mappings, capacities or {}, sized)
            charge = charge_extended(
                per_pod,
                charge,
                resources=extended,
                pod_set_index=index,
                pod_set_name=pod_set.name,
                charging=charging,
            )
        if isinstance(charge, DraProblem):
            info.problem, charge = charge, None
        elif charge is not None:
            choices.extend(charge.choices)
            _count_devices(devices, claims, charge, count)
        info.pod_sets.append(_pod_set_info(pod_set.name, count, spec, per_pod, charge, topology))
        info.pod_sets[-1].min_count = pod_set.min_count
        if info.problem is not None:
            break
    info.choices = tuple(choices)
    info.device_classes = tuple((name, devices[name], claims.get(name, 0)) for name in sorted(devices))
    info.shape = _shape(info.pod_sets) + "|".join(info.owner).encode()  # (TAS is for some kinds)
    return info


def covered_by(
    local_queues: Mapping[tuple[str, str], str],
    cluster_queues: Mapping[str, ClusterQueueModel],
    workload: Workload,
) -> Covered | None:
    """The resources the ClusterQueue of a Workload's LocalQueue has quota for (None: not known)."""
    name = local_queues.get((workload.metadata.namespace, workload.spec.queue_name))
    model = cluster_queues.get(name) if name is not None else None
    if model is None:
        return None
    return model.group_of.__contains__


def _pod_set_info(
    name: str,
    count: int,
    spec: PodSpecView,
    per_pod: Amounts,
    charge: ClaimCharge | None,
    topology: TopologyRequest | None = None,
) -> PodSetInfo:
    """A pod set's info: its containers' requests per pod, with what its DRA charge adds."""
    if charge is None:
        return PodSetInfo(name, count, PodPlacement.of(spec), per_pod, topology=topology)
    add_amounts(per_pod, charge.per_pod)
    return PodSetInfo(
        name,
        count,
        PodPlacement.of(spec),
        per_pod,
        charge.once or _NOTHING,
        tuple(charge.demands_per_pod),
        tuple(charge.demands_once),
        tuple(charge.asks),
        tuple(charge.constraints),
        topology,
    )


def _count_devices(devices: Amounts, claims: Amounts, charge: ClaimCharge, count: int) -> None:
    add_amounts(devices, scale_amounts(charge.devices_per_pod, count))
    add_amounts(devices, charge.devices_once)
    add_amounts(claims, scale_amounts(charge.claims_per_pod, count))
    add_amounts(claims, charge.claims_once)


def _shape(pod_sets: list[PodSetInfo]) -> bytes:
    return msgspec.json.encode(
        [
            [
                ps.name,
                ps.count,
                ps.min_count,
                sorted(ps.per_pod.items()),
                sorted(ps.once.items()),
                ps.placement.node_selector,
                ps.placement.affinity,
                ps.placement.tolerations,
                [_demand_key(d) for d in ps.demands],
                [_demand_key(d) for d in ps.demands_once],
                [[a.device_class, a.count, list(a.selectors), list(a.tolerations)] for a in ps.asks],
                [
                    [c.attribute, [[a.request, a.device_class, a.count] for a in c.asks]]
                    for c in ps.constraints
                ],
                None
                if ps.topology is None
                else [ps.topology.required, ps.topology.preferred, ps.topology.unconstrained],
            ]
            for ps in pod_sets
        ]
    )


def _demand_key(demand: DeviceDemand) -> list[object]:
    return [
        demand.resource,
        demand.device_class,
        demand.count,
        demand.capacity,
        demand.per_device,
        list(demand.selectors),
    ]
