"""JobSet (jobset.x-k8s.io/v1alpha2) behind the integration protocol, as Kueue v0.18.1's
`jobset.x-k8s.io/jobset` framework treats it.

One pod set per replicated job, named after it, counting replicas x pods per replica (a Job's
parallelism, lowered to its completions). Starting unsuspends the JobSet and injects each pod
set's node labels, tolerations and labels into its replicated job's pod template in the same
write; stopping suspends it, and restoring gives each pod template back the labels,
annotations, node selector, tolerations and scheduling gates its Workload recorded (the fields
the JobSet's own webhook lets change while it is suspended). The JobSet counts Jobs, not pods,
in its status: PodsReady is every Job ready or succeeded, as Kueue reads it.

A merge patch replaces a list whole, so each write carries every replicated job back as it was
read, with only its pod template changed.

Topology-aware scheduling, as Kueue's: each replicated job's pod template may ask for a placement
(``kueue.x-k8s.io/podset-required-topology``, ``-preferred-topology``, ``-unconstrained-topology``);
a pod set admitted with a topology assignment starts with Kueue's gate ``kueue.x-k8s.io/topology``
in its template, and the ungater ranks its pods by the Job's index within the replicated job
(``jobset.sigs.k8s.io/job-index``, of ``replicas`` Jobs) and the pod's completion index.

At the door, as Kueue's JobSet webhook: a JobSet without a queue name gets
``kueue.x-k8s.io/queue-name: default`` when its namespace has a LocalQueue named ``default``; a
JobSet the controller manages is stored with ``spec.suspend: true``, so the JobSet controller
creates no running Job before its Workload is admitted; validation is the queue-name rules of
any job.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from reconciler.admission.queue_rules import JobPolicy
from reconciler.admission.review import PatchOp
from reconciler.admission.suspendable import SuspendableKind
from reconciler.api import PodSet
from reconciler.api.jobset import JobSet, ReplicatedJob, replicated_job
from reconciler.api.pods import JOB_INDEX_LABEL
from reconciler.api.resources import JOBSETS, Resource
from reconciler.core.model.jobs import PODSET_LABEL

from .base import Outcome, Patch, PodSetStart, SuspendableJob, TopologyPlacement
from .registration import Access, Registration

__all__ = ["JOBSET", "REGISTRATION", "JobSetIntegration", "default_jobset", "pods_per_replica"]

_PODSET_LABEL_BYTES = PODSET_LABEL.encode()
# What the JobSet webhook lets change in a suspended JobSet's pod templates (and Kueue restores).
_RESTORED_META = ("labels", "annotations")
_RESTORED_SPEC = ("nodeSelector", "tolerations", "schedulingGates")
# The label the JobSet controller gives each Job's pods: the Job's index within its replicated job.
JOB_INDEX_IN_JOBSET = "jobset.sigs.k8s.io/job-index"


def pods_per_replica(rj: ReplicatedJob) -> int:
    """A replicated job's pods per Job: its parallelism (1 when unset), lowered to its completions."""
    parallelism = 1 if rj.parallelism is None else rj.parallelism
    if rj.completions is not None and rj.completions < parallelism:
        return rj.completions
    return parallelism


def _replicated(obj: JobSet) -> list[ReplicatedJob]:
    return [replicated_job(raw) for raw in obj.spec.replicated_jobs]


def _replicas(obj: JobSet, name: str) -> int:
    """The number of Jobs of the replicated job `name` (0 when there is none)."""
    return next((rj.replicas for rj in _replicated(obj) if rj.name == name), 0)


def _with_pod_template(raw: msgspec.Raw, change: Any) -> dict[str, Any]:
    """A replicated job as read, its pod template passed through `change` (dict -> None)."""
    decoded: dict[str, Any] = msgspec.json.decode(raw)
    job_spec = decoded.setdefault("template", {}).setdefault("spec", {})
    template = job_spec.setdefault("template", {})
    change(template)
    return decoded


def _inject(start: PodSetStart) -> Any:
    def change(template: dict[str, Any]) -> None:
        spec = template.setdefault("spec", {})
        if start.node_selector:
            spec["nodeSelector"] = {**spec.get("nodeSelector", {}), **start.node_selector}
        current: list[Any] = spec.get("tolerations", [])
        added = [t for t in msgspec.to_builtins(list(start.tolerations)) if t not in current]
        if added:
            spec["tolerations"] = [*current, *added]
        gates: list[Any] = spec.get("schedulingGates", [])
        new_gates = [{"name": g} for g in start.scheduling_gates if {"name": g} not in gates]
        if new_gates:
            spec["schedulingGates"] = [*gates, *new_gates]
        if start.labels or start.annotations:
            meta = template.setdefault("metadata", {})
            if start.labels:
                meta["labels"] = {**meta.get("labels", {}), **start.labels}
            if start.annotations:
                meta["annotations"] = {**meta.get("annotations", {}), **start.annotations}

    return change


def _restore(recorded: dict[str, Any]) -> Any:
    def change(template: dict[str, Any]) -> None:
        for section, fields in (("metadata", _RESTORED_META), ("spec", _RESTORED_SPEC)):
            wanted = recorded.get(section) or {}
            current = template.get(section)
            if current is None:
                current = {k: wanted[k] for k in fields if k in wanted}
                if current:
                    template[section] = current
                continue
            for name in fields:
                if name in wanted:
                    current[name] = wanted[name]
                else:
                    current.pop(name, None)
            if not current and section not in recorded:
                del template[section]

    return change


class JobSetIntegration(SuspendableJob):
    """Kueue's `jobset.x-k8s.io/jobset` framework."""

    framework: str = "jobset.x-k8s.io/jobset"
    kind: str = "JobSet"
    api_version: str = "jobset.x-k8s.io/v1alpha2"
    resource: Resource = JOBSETS
    projection: type[Any] = JobSet
    topology_placement: TopologyPlacement | None = TopologyPlacement(
        JOB_INDEX_LABEL, JOB_INDEX_IN_JOBSET, lambda obj, name: _replicas(obj, name)
    )

    def pod_sets(self, obj: JobSet) -> list[PodSet]:
        return [
            PodSet(name=rj.name, template=rj.pod_template, count=rj.replicas * pods_per_replica(rj))
            for rj in _replicated(obj)
        ]

    def is_suspended(self, obj: JobSet) -> bool:
        return bool(obj.spec.suspend)

    def start_patch(self, obj: JobSet, starts: Sequence[PodSetStart]) -> bytes:
        by_name = {s.name: s for s in starts}
        jobs = []
        for raw in obj.spec.replicated_jobs:
            name = replicated_job(raw).name
            jobs.append(_with_pod_template(raw, _inject(by_name.get(name, PodSetStart(name)))))
        return msgspec.json.encode({"spec": {"suspend": False, "replicatedJobs": jobs}})

    def suspend_patch(self, obj: JobSet) -> bytes:
        return b'{"spec":{"suspend":true}}'

    def restore_pending(self, obj: JobSet) -> bool:
        return any(_PODSET_LABEL_BYTES in bytes(rj.pod_template) for rj in _replicated(obj))

    def restore_patch(self, obj: JobSet, recorded: Sequence[PodSet]) -> Patch | None:
        templates = {ps.name: msgspec.json.decode(ps.template) for ps in recorded}
        jobs, changed = [], False
        for raw in obj.spec.replicated_jobs:
            name = replicated_job(raw).name
            if name not in templates:
                return None  # not the Workload's pod sets: nothing to restore from
            restored = _with_pod_template(raw, _restore(templates[name]))
            changed = changed or restored != msgspec.json.decode(raw)
            jobs.append(restored)
        return Patch(msgspec.json.encode({"spec": {"replicatedJobs": jobs}})) if changed else None

    def is_active(self, obj: JobSet) -> bool:
        return any(s.active > 0 for s in obj.status.replicated_jobs_status)

    def pods_ready(self, obj: JobSet) -> bool:
        wanted = sum(rj.replicas for rj in _replicated(obj))
        ready = sum(s.ready + s.succeeded for s in obj.status.replicated_jobs_status)
        return ready == wanted

    def pods_ready_count(self, obj: JobSet) -> int:
        """Pods of the Jobs that are ready or succeeded (a Job is ready when all its pods are):
        all of the Workload's pods exactly when every Job is, Kueue's PodsReady for a JobSet."""
        per_replica = {rj.name: pods_per_replica(rj) for rj in _replicated(obj)}
        return sum(
            (s.ready + s.succeeded) * per_replica.get(s.name, 0) for s in obj.status.replicated_jobs_status
        )

    def finished(self, obj: JobSet) -> Outcome | None:
        for kind, succeeded in (("Completed", True), ("Failed", False)):
            for c in obj.status.conditions:
                if c.type == kind and c.status == "True":
                    return Outcome(succeeded, c.message)
        return None

    def reclaimable_pods(self, obj: JobSet) -> Mapping[str, int]:
        """Per replicated job, the pods of its succeeded Jobs (Kueue's ReclaimablePods)."""
        statuses = {s.name: s for s in obj.status.replicated_jobs_status}
        out: dict[str, int] = {}
        for rj in _replicated(obj):
            status = statuses.get(rj.name)
            if status is not None and 0 < status.succeeded <= rj.replicas:
                out[rj.name] = status.succeeded * pods_per_replica(rj)
        return out

    def owns(self, obj: JobSet, owner_kind: str, owner_api_version: str, owner_name: str) -> bool:
        return (owner_kind, owner_api_version, owner_name) == (self.kind, self.api_version, obj.metadata.name)


JOBSET = JobSetIntegration()


_DOOR = SuspendableKind(
    "jobset.x-k8s.io/jobset",
    JobSet,
    JOBSETS.group,
    JOBSETS.version,
    JOBSETS.plural,
    "jobset",
    size=lambda obj: sum(1 if ps.count is None else ps.count for ps in JOBSET.pod_sets(obj)),
    size_field="spec.replicatedJobs",
    topology=True,
)


def default_jobset(jobset: JobSet, policy: JobPolicy, *, default_queue_exists: bool) -> list[PatchOp]:
    """The JSON patch that defaults a JobSet being created (empty when nothing changes)."""
    return _DOOR.default(jobset, policy, default_queue_exists=default_queue_exists)


REGISTRATION = Registration(
    JOBSET,
    webhooks=_DOOR.routes(
        mutate_why="Suspends a JobSet that names a queue (and sets the default LocalQueue) when it is\n"
        "created (integrations.frameworks: jobset.x-k8s.io/jobset; otherwise it leaves JobSets as they are).",
        validate_why="Kueue's queue-name rules for JobSets\n"
        "(integrations.frameworks: jobset.x-k8s.io/jobset).",
    ),
    access=(
        Access(
            JOBSETS.group,
            (JOBSETS.plural,),
            ("get", "list", "watch", "patch"),
            "JobSets (integrations.frameworks: jobset.x-k8s.io/jobset): suspended, started and their\n"
            "pod templates restored with a merge patch; read by the pod webhook when they control a pod.",
        ),
        Access(
            JOBSETS.group,
            (f"{JOBSETS.plural}/finalizers",),
            ("update",),
            "Their Workloads block their deletion (OwnerReferencesPermissionEnforcement).",
        ),
        Access(
            "",
            ("pods",),
            ("patch",),
            "The pods of a JobSet placed in topology domains: the scheduling gate kueue.x-k8s.io/topology\n"
            "removed and the node selector of the pod's domain added with a merge patch.",
        ),
    ),
)
