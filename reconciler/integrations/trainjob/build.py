"""A TrainJob's JobSet replicated jobs as the trainer builds them from the referenced runtime,
for the pod sets Kueue v0.18.1 charges (it builds them with the trainer's own runtime code).

In order: each runtime patch of `spec.runtimePatches` merged into the replicated jobs it names
(a strategic merge of the Job template); each replicated job's node count: its parallelism (1
when unset), or for the trainer step (label ``trainer.kubeflow.org/trainjob-ancestor-step:
trainer``) the runtime's `mlPolicy.numNodes` (1 when unset) when it has an `mlPolicy`, and the
TrainJob's `spec.trainer.numNodes` when set (the first trainer step only), never below 1: its
Jobs get that parallelism and completions. The trainer and initializer steps run one Job
(replicas 1). The trainer step's `node` container takes the TrainJob's image, command, args,
env and `resourcesPerNode` (its limits and requests replace the container's resources).
"""

from __future__ import annotations

from typing import Any

import msgspec

from reconciler.api.trainer import TrainJob

from .merge import strategic_merge

__all__ = [
    "ANCESTOR_LABEL",
    "KUEUE_PATCH_MANAGER",
    "NODE_CONTAINER",
    "TRAINER_STEP",
    "kueue_patch",
    "replicated_jobs",
    "unsupported_policy",
]

ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER_STEP = "trainer"
_ONE_JOB_STEPS = frozenset({TRAINER_STEP, "dataset-initializer", "model-initializer"})
NODE_CONTAINER = "node"
# The runtime patch Kueue's TrainJob webhook adds at creation and fills when it starts the job.
KUEUE_PATCH_MANAGER = "kueue.x-k8s.io/manager"
Obj = dict[str, Any]


def kueue_patch(job: TrainJob) -> tuple[int, Obj] | None:
    """The index and content of the runtime patch Kueue manages (None: there is none)."""
    for i, raw in enumerate(job.spec.runtime_patches):
        patch: Obj = msgspec.json.decode(raw)
        if patch.get("manager") == KUEUE_PATCH_MANAGER:
            return i, patch
    return None


def unsupported_policy(job: TrainJob) -> str | None:
    """The runtime's ML policy, when its pod counts are not made as here (MPI's launcher, Flux)."""
    if job.resolved is None or job.resolved.spec.ml_policy is None:
        return None
    policy = job.resolved.spec.ml_policy
    for name, source in (("mpi", policy.mpi), ("flux", policy.flux)):
        if source is not None:
            return name
    return None


def _patched(jobs: list[Obj], patches: list[msgspec.Raw]) -> None:
    for raw in patches:
        patch: Obj = msgspec.json.decode(raw)
        template = ((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}
        for rj_patch in template.get("replicatedJobs") or []:
            if not rj_patch.get("template"):
                continue
            for rj in jobs:
                if rj.get("name") == rj_patch.get("name"):
                    rj["template"] = strategic_merge(rj.get("template") or {}, rj_patch["template"])


def _node_container(rj: Obj, job: TrainJob) -> None:
    trainer = job.spec.trainer
    if trainer is None:
        return
    pod = rj["template"].setdefault("spec", {}).setdefault("template", {}).setdefault("spec", {})
    for container in pod.get("containers") or []:
        if container.get("name") != NODE_CONTAINER:
            continue
        for name, value in (("image", trainer.image), ("command", trainer.command), ("args", trainer.args)):
            if value is not None:
                container[name] = value
        if trainer.resources_per_node is not None:
            wanted = trainer.resources_per_node
            kept = {k: wanted[k] for k in ("limits", "requests") if wanted.get(k) is not None}
            if kept:
                container["resources"] = kept
        env: list[Obj] = container.get("env") or []
        for var in (msgspec.json.decode(raw) for raw in trainer.env):
            env = [e for e in env if e.get("name") != var.get("name")] + [var]
        if env:
            container["env"] = env


def replicated_jobs(job: TrainJob) -> list[Obj]:
    """The TrainJob's JobSet replicated jobs (decoded; empty while its runtime is not known)."""
    if job.resolved is None:
        return []
    spec = job.resolved.spec
    jobs: list[Obj] = [msgspec.json.decode(raw) for raw in spec.template.spec.replicated_jobs]
    _patched(jobs, job.spec.runtime_patches)
    trainer_seen = False
    for rj in jobs:
        template = rj.setdefault("template", {})
        step = ((template.get("metadata") or {}).get("labels") or {}).get(ANCESTOR_LABEL)
        job_spec = template.setdefault("spec", {})
        count = job_spec.get("parallelism")
        count = 1 if count is None else int(count)
        if step == TRAINER_STEP and spec.ml_policy is not None:
            count = spec.ml_policy.num_nodes if spec.ml_policy.num_nodes is not None else 1
        if step == TRAINER_STEP and not trainer_seen:
            trainer_seen = True
            if job.spec.trainer is not None and job.spec.trainer.num_nodes is not None:
                count = job.spec.trainer.num_nodes
        job_spec["parallelism"] = job_spec["completions"] = max(count, 1)
        if step in _ONE_JOB_STEPS:
            rj["replicas"] = 1
        if step == TRAINER_STEP:
            _node_container(rj, job)
    return jobs
