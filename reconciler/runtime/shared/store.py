"""The latest known object of every kind the reconciler decides on, with the job <-> Workload index.

Jobs are kept per integration: `by_kind[kind][(namespace, name)]`. A job's Workload name is a
hash of the job's name, UID and kind, and a Workload names its job in an owner reference; both
directions are computed once, when the object is stored, and looked up afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.api import (
    ClusterQueue,
    Cohort,
    LocalQueue,
    PriorityClass,
    ResourceClaimTemplate,
    Workload,
    WorkloadPriorityClass,
)
from reconciler.api.resources import Resource
from reconciler.core.model.workloads import workload_name_for_job
from reconciler.integrations import Integration, ReadsReferences, controller_parent, references_of
from reconciler.integrations.lws.group import COMPONENT_INDEX_ANNOTATION, LWS_KIND, group_name
from reconciler.integrations.pods.group import GROUP_KIND, IS_GROUP_WORKLOAD_ANNOTATION, PodGroup
from reconciler.integrations.prebuilt import prebuilt_name

__all__ = ["JobRef", "Key", "Store", "owner_ref"]

Key = tuple[str, str]
# How many jobs deep a job's controllers are followed (a TrainJob -> its JobSet -> its Jobs).
_MAX_DEPTH = 4
# A job of any integration: (kind, namespace, name).
JobRef = tuple[str, str, str]


def owner_ref(workload: Workload, integrations: Mapping[str, Integration]) -> JobRef | None:
    """The job (of one of `integrations`, by kind) that controls a Workload, from its owner
    references; a LeaderWorkerSet group's Workload (owned, not controlled, by the set, with its
    group index) stands for that group; a pod group's Workload (marked so, owned by each pod)
    stands for the group it is named after."""
    meta = workload.metadata
    index = meta.annotations.get(COMPONENT_INDEX_ANNOTATION)
    if index is not None:
        for ref in meta.owner_references:
            integration = integrations.get(ref.kind)
            if (
                ref.kind == LWS_KIND
                and integration is not None
                and ref.api_version == integration.api_version
            ):
                return (ref.kind, meta.namespace, group_name(ref.name, int(index)))
    for ref in meta.owner_references:  # a set whose one group is named after it (a StatefulSet's)
        integration = integrations.get(ref.kind)
        if (
            integration is not None
            and integration.jobs_from_pods
            and ref.api_version == integration.api_version
        ):
            return (ref.kind, meta.namespace, ref.name)
    if meta.annotations.get(IS_GROUP_WORKLOAD_ANNOTATION) == "true" and GROUP_KIND in integrations:
        return (GROUP_KIND, meta.namespace, meta.name)
    for ref in meta.owner_references:
        integration = integrations.get(ref.kind)
        if integration is not None and ref.api_version == integration.api_version and ref.controller:
            return (ref.kind, meta.namespace, ref.name)
    return None


@dataclass
class Store:
    # The enabled integrations, by kind (the reconciler sets them from integrations.frameworks).
    integrations: dict[str, Integration] = field(default_factory=dict)
    by_kind: dict[str, dict[Key, Any]] = field(default_factory=dict)
    workloads: dict[Key, Workload] = field(default_factory=dict)
    templates: dict[Key, ResourceClaimTemplate] = field(default_factory=dict)
    cluster_queues: dict[str, ClusterQueue] = field(default_factory=dict)
    cohorts: dict[str, Cohort] = field(default_factory=dict)
    local_queues: dict[Key, LocalQueue] = field(default_factory=dict)
    workload_priority_classes: dict[str, WorkloadPriorityClass] = field(default_factory=dict)
    priority_classes: dict[str, PriorityClass] = field(default_factory=dict)
    # Objects jobs are resolved with (a TrainJob's runtime), by resource plural and key.
    references: dict[str, dict[Key, Any]] = field(default_factory=dict)
    # Job -> (its UID, its Workload's key); Workload key -> its owning job.
    _workload_of: dict[JobRef, tuple[str, Key]] = field(default_factory=dict)
    _job_of: dict[Key, JobRef] = field(default_factory=dict)
    # The job that owns a stored Workload: the index's own lookup (no Python call on hot paths).
    owner: Callable[[Key], JobRef | None] = field(init=False, repr=False, compare=False)
    # Told of every Workload version stored (from an event or our own write's response), with
    # the one it replaces.
    on_workload: Callable[[Workload | None, Workload], None] | None = None

    def __post_init__(self) -> None:
        self.owner = self._job_of.get

    def put_cohort(self, name: str, cohort: Cohort | None) -> bool:
        """Keep (or forget) a Cohort object; True when only its status changed."""
        previous = self.cohorts.pop(name, None)
        if cohort is None:
            return False
        self.cohorts[name] = cohort
        return previous is not None and previous.spec == cohort.spec

    def of_kind(self, kind: str) -> dict[Key, Any]:
        return self.by_kind.setdefault(kind, {})

    def job(self, ref: JobRef | None) -> Any | None:
        if ref is None:
            return None
        table = self.by_kind.get(ref[0])
        return None if table is None else table.get((ref[1], ref[2]))

    def put_job(self, key: Key, job: Any | None, kind: str) -> Any | None:
        """Store (or with None, forget) a job of `kind`; returns what was stored before."""
        table = self.by_kind.get(kind)
        if table is None:
            table = self.by_kind[kind] = {}
        if job is None:
            self._workload_of.pop((kind, *key), None)
            return table.pop(key, None)
        integration: object = self.integrations.get(kind)
        if isinstance(integration, ReadsReferences):
            job = integration.resolve(job, self.referenced)
        previous = table.get(key)
        table[key] = job
        return previous

    def referenced(self, resource: Resource, namespace: str, name: str) -> Any | None:
        """A kept object of a kind some job references (`namespace` "" for a cluster-scoped one)."""
        table = self.references.get(resource.plural)
        return None if table is None else table.get((namespace if resource.namespaced else "", name))

    def put_reference(self, plural: str, key: Key, obj: Any | None) -> list[JobRef]:
        """Keep (or forget) an object jobs reference; the jobs of the kinds that read its kind are
        resolved again, and returned."""
        table = self.references.setdefault(plural, {})
        if obj is None:
            table.pop(key, None)
        else:
            table[key] = obj
        refs: list[JobRef] = []
        for kind, integration in self.integrations.items():
            if not isinstance(integration, ReadsReferences) or all(
                r.resource.plural != plural for r in references_of(integration)
            ):
                continue
            jobs = self.of_kind(kind)
            for job_key, job in jobs.items():
                jobs[job_key] = integration.resolve(job, self.referenced)
                refs.append((kind, *job_key))
        return refs

    def put_workload(self, key: Key, workload: Workload | None) -> Workload | None:
        """Store (or with None, forget) a Workload; returns what was stored before."""
        if workload is None:
            self._job_of.pop(key, None)
            return self.workloads.pop(key, None)
        previous = self.workloads.get(key)
        self.workloads[key] = workload
        if self.on_workload is not None:
            self.on_workload(previous, workload)
        if previous is None or previous.metadata.owner_references != workload.metadata.owner_references:
            owner = owner_ref(workload, self.integrations)
            if owner is None:
                self._job_of.pop(key, None)
            else:
                self._job_of[key] = owner
        return previous

    def workload_key(self, job: Any, kind: str) -> Key:
        """The key of the Workload that stands for a job of `kind` (whether it exists yet or not)."""
        meta = job.metadata
        ref = (kind, meta.namespace, meta.name)
        known = self._workload_of.get(ref)  # (never a pod group's: those are not kept below)
        if known is not None and known[0] == meta.uid:
            return known[1]
        if isinstance(job, PodGroup):
            return (job.namespace, job.name)  # named after the group, as Kueue names it
        # A job naming a prebuilt Workload (a MultiKueue worker's) runs under that one.
        name = prebuilt_name(meta)
        if not name:
            group = self.integrations[kind].api_version.rpartition("/")[0]
            name = workload_name_for_job(job.metadata.name, job.metadata.uid, kind, group)
        wl_key = (job.metadata.namespace, name)
        if (ref[1], ref[2]) in self.of_kind(kind):
            self._workload_of[ref] = (job.metadata.uid, wl_key)
        return wl_key

    def parent(self, ref: JobRef, job: Any | None = None) -> JobRef | None:
        """The job of another enabled integration that controls this one (a Job's JobSet);
        `job`: the stored job of `ref`, when the caller has it."""
        if job is None:
            job = self.job(ref)
        if job is None or not job.metadata.owner_references:
            return None  # (a job without owners has no parent)
        integration = self.integrations.get(ref[0])
        if integration is None or integration.top_level:
            return None
        found = controller_parent(job, self.integrations)
        return None if found is None else (found[0].kind, ref[1], found[1])

    def pods_workload(self, ref: JobRef) -> Key | None:
        """The Workload a stored job's pods count for (its parent's, for a JobSet's Job)."""
        table = self.by_kind.get(ref[0])
        job = None if table is None else table.get((ref[1], ref[2]))
        if job is None:
            return None
        for _ in range(_MAX_DEPTH):  # up to the top job (a TrainJob's JobSet's Job: the TrainJob)
            parent = self.parent(ref, job) if job.metadata.owner_references else None
            if parent is None:
                break
            ref, job = parent, self.job(parent)
            if job is None:
                return None
        return self.workload_key(job, ref[0])

    def children(self, ref: JobRef) -> list[JobRef]:
        """The jobs this one controls (a JobSet's Jobs), of the other enabled integrations."""
        integration = self.integrations.get(ref[0])
        if integration is None:
            return []
        found: list[JobRef] = []
        for kind, table in self.by_kind.items():
            if kind == ref[0]:
                continue
            for (namespace, name), job in table.items():
                if namespace != ref[1]:
                    continue
                parent = controller_parent(job, self.integrations)
                if parent is not None and parent[0] is integration and parent[1] == ref[2]:
                    found.append((kind, namespace, name))
        return found

    def descendants(self, ref: JobRef) -> list[JobRef]:
        """The jobs this one controls, and theirs (a TrainJob's JobSet and its Jobs)."""
        found, frontier = [], [ref]
        for _ in range(_MAX_DEPTH):
            frontier = [child for parent in frontier for child in self.children(parent)]
            if not frontier:
                break
            found += frontier
        return found

    def job_key(self, workload_key: Key) -> Key | None:
        """The (namespace, name) of the job that owns a stored Workload."""
        ref = self._job_of.get(workload_key)
        return None if ref is None else (ref[1], ref[2])
