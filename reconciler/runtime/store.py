"""The latest known object of every kind the reconciler decides on, with the Job <-> Workload index.

A Job's Workload name is a hash of the Job's name and UID, and a Workload
names its Job in an owner reference; both directions are computed once, when
the object is stored, and looked up afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reconciler.api import (
    ClusterQueue,
    Job,
    LocalQueue,
    PriorityClass,
    ResourceClaimTemplate,
    Workload,
    WorkloadPriorityClass,
)
from reconciler.core.workloads import workload_name_for_job
from reconciler.integrations import BATCH_JOB, Integration

__all__ = ["Key", "Store", "owner_job"]

Key = tuple[str, str]


def owner_job(workload: Workload, integration: Integration = BATCH_JOB) -> Key | None:
    """The job (of `integration`'s kind) that controls a Workload, from its owner references."""
    for ref in workload.metadata.owner_references:
        if ref.kind == integration.kind and ref.api_version == integration.api_version and ref.controller:
            return (workload.metadata.namespace, ref.name)
    return None


@dataclass
class Store:
    jobs: dict[Key, Job] = field(default_factory=dict)
    workloads: dict[Key, Workload] = field(default_factory=dict)
    templates: dict[Key, ResourceClaimTemplate] = field(default_factory=dict)
    cluster_queues: dict[str, ClusterQueue] = field(default_factory=dict)
    local_queues: dict[Key, LocalQueue] = field(default_factory=dict)
    workload_priority_classes: dict[str, WorkloadPriorityClass] = field(default_factory=dict)
    priority_classes: dict[str, PriorityClass] = field(default_factory=dict)
    # Job key -> (its UID, its Workload's key); Workload key -> its owning Job's key.
    _workload_of: dict[Key, tuple[str, Key]] = field(default_factory=dict)
    _job_of: dict[Key, Key] = field(default_factory=dict)

    def put_job(self, key: Key, job: Job | None) -> Job | None:
        """Store (or with None, forget) a Job; returns what was stored before."""
        if job is None:
            self._workload_of.pop(key, None)
            return self.jobs.pop(key, None)
        previous = self.jobs.get(key)
        self.jobs[key] = job
        return previous

    def put_workload(self, key: Key, workload: Workload | None) -> Workload | None:
        """Store (or with None, forget) a Workload; returns what was stored before."""
        if workload is None:
            self._job_of.pop(key, None)
            return self.workloads.pop(key, None)
        previous = self.workloads.get(key)
        self.workloads[key] = workload
        if previous is None or previous.metadata.owner_references != workload.metadata.owner_references:
            owner = owner_job(workload)
            if owner is None:
                self._job_of.pop(key, None)
            else:
                self._job_of[key] = owner
        return previous

    def workload_key(self, job: Job) -> Key:
        """The key of the Workload that stands for a Job (whether it exists yet or not)."""
        key = (job.metadata.namespace, job.metadata.name)
        known = self._workload_of.get(key)
        if known is not None and known[0] == job.metadata.uid:
            return known[1]
        group = BATCH_JOB.api_version.rpartition("/")[0]
        name = workload_name_for_job(job.metadata.name, job.metadata.uid, BATCH_JOB.kind, group)
        wl_key = (job.metadata.namespace, name)
        if key in self.jobs:
            self._workload_of[key] = (job.metadata.uid, wl_key)
        return wl_key

    def job_key(self, workload_key: Key) -> Key | None:
        """The key of the Job that owns a stored Workload."""
        return self._job_of.get(workload_key)
