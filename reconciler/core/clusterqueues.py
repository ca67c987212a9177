"""ClusterQueues compiled for admission, and their Active condition."""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field

from reconciler.api import ClusterQueue, LabelSelector

from .quantity import QuantityError, parse_quantity, to_amount

__all__ = [
    "ClusterQueueModel",
    "FlavorQuota",
    "InvalidClusterQueueError",
    "ResourceGroupModel",
    "active_condition",
    "compile_cluster_queue",
]


class InvalidClusterQueueError(ValueError):
    """A ClusterQueue spec that cannot be used; the message names the field."""


@dataclass(frozen=True, slots=True)
class FlavorQuota:
    name: str
    nominal: dict[str, int]


@dataclass(frozen=True, slots=True)
class ResourceGroupModel:
    covered: tuple[str, ...]
    flavors: tuple[FlavorQuota, ...]


@dataclass(slots=True)
class ClusterQueueModel:
    name: str
    groups: list[ResourceGroupModel]
    namespace_selector: LabelSelector | None
    strategy: str = "BestEffortFIFO"
    stopped: bool = False
    terminating: bool = False  # being deleted: admits nothing new while its workloads finish
    group_of: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.group_of = {r: i for i, g in enumerate(self.groups) for r in g.covered}

    def flavor_names(self) -> list[str]:
        return [f.name for g in self.groups for f in g.flavors]

    def nominal(self, flavor: str, resource: str) -> int:
        index = self.group_of.get(resource)
        if index is None:
            return 0
        for quota in self.groups[index].flavors:
            if quota.name == flavor:
                return quota.nominal.get(resource, 0)
        return 0


def compile_cluster_queue(cq: ClusterQueue) -> ClusterQueueModel:
    groups: list[ResourceGroupModel] = []
    seen_resources: set[str] = set()
    for gi, group in enumerate(cq.spec.resource_groups):
        path = f"spec.resourceGroups[{gi}]"
        for resource in group.covered_resources:
            if resource in seen_resources:
                raise InvalidClusterQueueError(
                    f"{path}.coveredResources: resource {resource} is covered by more than one "
                    "resource group; list each resource in one group only"
                )
            seen_resources.add(resource)
        flavors: list[FlavorQuota] = []
        for fi, flavor in enumerate(group.flavors):
            nominal: dict[str, int] = {}
            for ri, quota in enumerate(flavor.resources):
                where = f"{path}.flavors[{fi}].resources[{ri}].nominalQuota"
                if quota.name not in group.covered_resources:
                    raise InvalidClusterQueueError(
                        f"{path}.flavors[{fi}].resources[{ri}].name: {quota.name} is not in "
                        f"coveredResources; add it there or remove it from flavor {flavor.name}"
                    )
                try:
                    nominal[quota.name] = to_amount(quota.name, parse_quantity(quota.nominal_quota))
                except QuantityError as err:
                    raise InvalidClusterQueueError(f"{where}: {err}") from None
                if nominal[quota.name] < 0:
                    raise InvalidClusterQueueError(
                        f'{where}: Invalid value: "{quota.nominal_quota}": must be greater than or equal '
                        "to 0; give a quota of 0 or more"
                    )
            flavors.append(FlavorQuota(flavor.name, nominal))
        groups.append(ResourceGroupModel(tuple(group.covered_resources), tuple(flavors)))
    return ClusterQueueModel(
        name=cq.metadata.name,
        groups=groups,
        namespace_selector=cq.spec.namespace_selector,
        strategy=cq.spec.queueing_strategy or "BestEffortFIFO",
        stopped=cq.spec.stop_policy in ("Hold", "HoldAndDrain"),
        terminating=bool(cq.metadata.deletion_timestamp),
    )


def active_condition(model: ClusterQueueModel, flavors: Container[str]) -> tuple[str, str, str]:
    """(status, reason, message) of the ClusterQueue's Active condition, as Kueue words it."""
    if model.terminating:
        return "False", "Terminating", "Can't admit new workloads; clusterQueue is terminating"
    reasons: list[str] = []
    messages: list[str] = []
    if model.stopped:
        reasons.append("Stopped")
        messages.append("is stopped")
    missing = [name for name in dict.fromkeys(model.flavor_names()) if name not in flavors]
    if missing:
        reasons.append("FlavorNotFound")
        messages.append(f"references missing ResourceFlavor(s): {','.join(missing)}")
    if reasons:
        return "False", reasons[0], f"Can't admit new workloads: {', '.join(messages)}."
    return "True", "Ready", "Can admit new workloads"
