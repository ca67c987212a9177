"""TrainJob (trainer.kubeflow.org/v1alpha1) behind the integration protocol, as Kueue v0.18.1's
`trainer.kubeflow.org/trainjob` framework treats it.

Its pod sets are those of the JobSet the trainer makes from the referenced TrainingRuntime or
ClusterTrainingRuntime (build.py): one per replicated job, named after it, counting replicas x
pods per Job. Starting writes each pod set's node labels, tolerations, labels and annotations
into Kueue's own runtime patch (`spec.runtimePatches[manager=kueue.x-k8s.io/manager]`, one
replicated-job entry per pod set; added when missing, where Kueue would fail to start the job)
and unsuspends the TrainJob in the same write (the trainer's
webhook allows patches to change while the TrainJob is suspended before or after the write);
the trainer then makes the JobSet with them. Stopping suspends it; restoring empties Kueue's
patch once none of its Jobs is active (the trainer refuses a patch change while they are).
Finished is the TrainJob's `Complete` or `Failed` condition; PodsReady and the reclaimable
pods come from its `status.jobsStatus` (Jobs ready or succeeded per replicated job).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from reconciler.api import PodSet
from reconciler.api.resources import Resource
from reconciler.api.trainer import (
    CLUSTER_TRAINING_RUNTIME_KIND,
    CLUSTER_TRAINING_RUNTIMES,
    TRAINER_API_VERSION,
    TRAINING_RUNTIMES,
    TRAINJOBS,
    ResolvedRuntime,
    TrainingRuntime,
    TrainJob,
)

from ..base import Lookup, Outcome, Patch, PodSetStart, Reference, SuspendableJob
from .build import KUEUE_PATCH_MANAGER, kueue_patch, replicated_jobs, unsupported_policy

__all__ = ["TRAINJOB", "TrainJobIntegration", "pods_per_replica", "runtime_of"]

# The value of spec.managedBy that leaves a TrainJob to the trainer (its default).
TRAINER_CONTROLLER = "trainer.kubeflow.org/trainjob-controller"
Obj = dict[str, Any]


def pods_per_replica(rj: Obj) -> int:
    """A replicated job's pods per Job: its parallelism (1 when unset), lowered to its completions."""
    spec = (rj.get("template") or {}).get("spec") or {}
    parallelism = spec.get("parallelism")
    parallelism = 1 if parallelism is None else int(parallelism)
    completions = spec.get("completions")
    return int(completions) if completions is not None and completions < parallelism else parallelism


def _replicas(rj: Obj) -> int:
    replicas = rj.get("replicas")
    return 1 if replicas is None else int(replicas)


def runtime_of(job: TrainJob) -> tuple[Resource, str, str]:
    """Where the runtime a TrainJob names is (resource, namespace, name): a ClusterTrainingRuntime
    when `runtimeRef.kind` says so, else a TrainingRuntime in its namespace (as the trainer)."""
    ref = job.spec.runtime_ref
    if ref.kind == CLUSTER_TRAINING_RUNTIME_KIND:
        return CLUSTER_TRAINING_RUNTIMES, "", ref.name
    return TRAINING_RUNTIMES, job.metadata.namespace, ref.name


def _start_entry(start: PodSetStart) -> Obj:
    meta: Obj = {}
    if start.annotations:
        meta["annotations"] = dict(start.annotations)
    if start.labels:
        meta["labels"] = dict(start.labels)
    spec: Obj = {}
    if start.node_selector:
        spec["nodeSelector"] = dict(start.node_selector)
    if start.tolerations:
        spec["tolerations"] = msgspec.to_builtins(list(start.tolerations))
    return {"name": start.name, "template": {"spec": {"template": {"metadata": meta, "spec": spec}}}}


def _with_kueue_jobs(job: TrainJob, entries: list[Obj] | None) -> list[Obj]:
    """Every runtime patch as read, Kueue's with `entries` as its replicated jobs (None: none);
    Kueue's added last when the TrainJob has none (created while its webhook was off)."""
    patches: list[Obj] = [msgspec.json.decode(raw) for raw in job.spec.runtime_patches]
    found = kueue_patch(job)
    if found is None and entries:
        patches.append({"manager": KUEUE_PATCH_MANAGER})
        found = (len(patches) - 1, patches[-1])
    if found is not None:
        runtime = patches[found[0]].setdefault("trainingRuntimeSpec", {})
        spec = runtime.setdefault("template", {}).setdefault("spec", {})
        if entries:
            spec["replicatedJobs"] = entries
        else:
            spec.pop("replicatedJobs", None)
    return patches


class TrainJobIntegration(SuspendableJob):
    """Kueue's `trainer.kubeflow.org/trainjob` framework."""

    framework: str = "trainer.kubeflow.org/trainjob"
    kind: str = "TrainJob"
    api_version: str = TRAINER_API_VERSION
    resource: Resource = TRAINJOBS
    projection: type[Any] = TrainJob
    top_level: bool = True
    references: tuple[Reference, ...] = (
        Reference(TRAINING_RUNTIMES, TrainingRuntime),
        Reference(CLUSTER_TRAINING_RUNTIMES, TrainingRuntime),
    )

    def resolve(self, obj: TrainJob, lookup: Lookup) -> TrainJob:
        resource, namespace, name = runtime_of(obj)
        found: TrainingRuntime | None = lookup(resource, namespace, name)
        resolved = None if found is None else ResolvedRuntime(resource.kind, name, found.spec)
        return obj if resolved == obj.resolved else msgspec.structs.replace(obj, resolved=resolved)

    def unresolved(self, obj: TrainJob) -> str | None:
        managed_by = obj.spec.managed_by
        if managed_by is not None and managed_by != TRAINER_CONTROLLER:
            return f"spec.managedBy is {managed_by!r}: MultiKueue is not handled by this controller"
        resource, namespace, name = runtime_of(obj)
        if obj.resolved is None:
            where = f"{namespace}/{name}" if namespace else name
            return f"spec.runtimeRef: {resource.kind} {where} not found (create it, or name an existing one)"
        policy = unsupported_policy(obj)
        if policy is not None:
            return (
                f"{resource.kind} {name}: spec.mlPolicy.{policy} is not handled by this controller "
                "(its pod counts differ from the runtime's template); use a torch, jax, xgboost or plain "
                "runtime"
            )
        return None

    def pod_sets(self, obj: TrainJob) -> list[PodSet]:
        return [
            PodSet(
                name=str(rj.get("name", "")),
                template=msgspec.Raw(
                    msgspec.json.encode((rj.get("template") or {}).get("spec", {}).get("template", {}))
                ),
                count=_replicas(rj) * pods_per_replica(rj),
            )
            for rj in replicated_jobs(obj)
        ]

    def is_suspended(self, obj: TrainJob) -> bool:
        return bool(obj.spec.suspend)

    def start_patch(self, obj: TrainJob, starts: Sequence[PodSetStart]) -> bytes:
        patches = _with_kueue_jobs(obj, [_start_entry(s) for s in starts])
        return msgspec.json.encode({"spec": {"suspend": False, "runtimePatches": patches}})

    def suspend_patch(self, obj: TrainJob) -> bytes:
        return b'{"spec":{"suspend":true}}'

    def restore_pending(self, obj: TrainJob) -> bool:
        found = kueue_patch(obj)
        if found is None:
            return False
        spec = ((found[1].get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}
        return bool(spec.get("replicatedJobs"))

    def restore_patch(self, obj: TrainJob, recorded: Sequence[PodSet]) -> Patch | None:
        if not self.restore_pending(obj) or self.is_active(obj):
            return None  # the trainer refuses a patch change while the JobSet's Jobs are active
        return Patch(msgspec.json.encode({"spec": {"runtimePatches": _with_kueue_jobs(obj, None)}}))

    def is_active(self, obj: TrainJob) -> bool:
        return any(s.active > 0 for s in obj.status.jobs_status)

    def pods_ready(self, obj: TrainJob) -> bool:
        jobs = replicated_jobs(obj)
        ready = sum(s.ready + s.succeeded for s in obj.status.jobs_status)
        return bool(jobs) and ready == sum(_replicas(rj) for rj in jobs)

    def pods_ready_count(self, obj: TrainJob) -> int:
        per_replica = {rj.get("name"): pods_per_replica(rj) for rj in replicated_jobs(obj)}
        return sum((s.ready + s.succeeded) * per_replica.get(s.name, 0) for s in obj.status.jobs_status)

    def finished(self, obj: TrainJob) -> Outcome | None:
        for kind, succeeded in (("Complete", True), ("Failed", False)):
            for c in obj.status.conditions:
                if c.type == kind and c.status == "True":
                    return Outcome(succeeded, c.message)
        return None

    def reclaimable_pods(self, obj: TrainJob) -> Mapping[str, int]:
        """Per replicated job, the pods of its succeeded Jobs (Kueue's ReclaimablePods)."""
        if not obj.status.jobs_status:
            return {}
        statuses = {s.name: s for s in obj.status.jobs_status}
        out: dict[str, int] = {}
        for rj in replicated_jobs(obj):
            status = statuses.get(str(rj.get("name")))
            if status is not None and 0 < status.succeeded <= _replicas(rj):
                out[str(rj.get("name"))] = status.succeeded * pods_per_replica(rj)
        return out

    def owns(self, obj: TrainJob, owner_kind: str, owner_api_version: str, owner_name: str) -> bool:
        return (owner_kind, owner_api_version, owner_name) == (self.kind, self.api_version, obj.metadata.name)


TRAINJOB = TrainJobIntegration()
