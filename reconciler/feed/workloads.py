"""Workloads into the engine's terms: compiled against what the engine knows of their queue."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from reconciler.api import ResourceClaim, ResourceClaimTemplate, Workload
from reconciler.core.devices.dra_extended import ExtendedResources
from reconciler.core.engine import Engine
from reconciler.core.model.workloads import WorkloadInfo, compile_workload, covered_by

__all__ = ["WorkloadSources", "compile_for"]

Key = tuple[str, str]


@dataclass(frozen=True)
class WorkloadSources:
    """What a Workload's requests are computed from besides the Workload itself.

    `templates` and `claims` by (namespace, name); `mappings` DeviceClass -> quota resource;
    `capacities` per DeviceClass the (device capacity, quota resource) pairs charged; `sized`:
    the device inventory is on, so charges the flavor decides are sized from it; `extended`: the
    extended resources the known DeviceClasses serve, charged through them (None: Kueue's gate
    KueueDRAIntegrationExtendedResource is off)."""

    mappings: Mapping[str, str]
    templates: Mapping[Key, ResourceClaimTemplate] = field(default_factory=dict)
    claims: Mapping[Key, ResourceClaim] | None = None
    capacities: Mapping[str, Sequence[tuple[str, str]]] = field(default_factory=dict)
    sized: bool = False
    extended: ExtendedResources | None = None


def compile_for(engine: Engine, workload: Workload, sources: WorkloadSources) -> WorkloadInfo:
    """The Workload compiled as the controller compiles it: only the resources its ClusterQueue
    covers are charged where a mapping leaves a choice. Raises QuantityError or
    msgspec.ValidationError for requests that cannot be read."""
    templates, claims = sources.templates, sources.claims
    return compile_workload(
        workload,
        lookup_template=lambda ns, name: templates.get((ns, name)),
        lookup_claim=(lambda ns, name: claims.get((ns, name))) if claims is not None else None,
        mappings=sources.mappings,
        covered=covered_by(engine.queues.local_queues, engine.cache.cluster_queues, workload),
        capacities=sources.capacities,
        sized=sources.sized,
        extended=sources.extended,
    )
