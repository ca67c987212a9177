"""Kubeflow Trainer v2 (trainer.kubeflow.org/v1alpha1): the fields the TrainJob integration reads.

A TrainJob names a TrainingRuntime (namespaced) or a ClusterTrainingRuntime whose JobSet template
the trainer's controller turns into the TrainJob's JobSet. The template's replicated jobs and the
TrainJob's runtime patches are kept raw: they are merged as the trainer merges them
(integrations/trainjob/), and written back whole.

`resolved` is not an API field: the controller fills it with the referenced runtime's spec (or
leaves it None while that runtime is not known), so everything asked of a TrainJob is answered
from the TrainJob alone.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .meta import ApiStruct, Condition, ObjectMeta
from .resources import Resource

__all__ = [
    "CLUSTER_TRAINING_RUNTIMES",
    "CLUSTER_TRAINING_RUNTIME_KIND",
    "TRAINER_API_VERSION",
    "TRAINER_GROUP",
    "TRAINING_RUNTIMES",
    "TRAINING_RUNTIME_KIND",
    "TRAINJOBS",
    "MLPolicy",
    "ResolvedRuntime",
    "RuntimeRef",
    "RuntimeTemplate",
    "TemplateMeta",
    "TrainJob",
    "TrainJobSpec",
    "TrainJobStatus",
    "TrainJobTrainer",
    "TrainerJobStatus",
    "TrainingRuntime",
    "TrainingRuntimeSpec",
]

TRAINER_GROUP = "trainer.kubeflow.org"
TRAINER_API_VERSION = "trainer.kubeflow.org/v1alpha1"
TRAINING_RUNTIME_KIND = "TrainingRuntime"
CLUSTER_TRAINING_RUNTIME_KIND = "ClusterTrainingRuntime"
TRAINJOBS = Resource(TRAINER_GROUP, "v1alpha1", "trainjobs", "TrainJob", namespaced=True)
TRAINING_RUNTIMES = Resource(
    TRAINER_GROUP, "v1alpha1", "trainingruntimes", TRAINING_RUNTIME_KIND, namespaced=True
)
CLUSTER_TRAINING_RUNTIMES = Resource(
    TRAINER_GROUP, "v1alpha1", "clustertrainingruntimes", CLUSTER_TRAINING_RUNTIME_KIND, namespaced=False
)


class TemplateMeta(ApiStruct):
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}


class _JobSetTemplateSpec(ApiStruct):
    replicated_jobs: list[msgspec.Raw] = []


class RuntimeTemplate(ApiStruct):
    """The runtime's JobSet template: its metadata and its replicated jobs (raw)."""

    metadata: TemplateMeta = msgspec.field(default_factory=TemplateMeta)
    spec: _JobSetTemplateSpec = msgspec.field(default_factory=_JobSetTemplateSpec)


class MLPolicy(ApiStruct):
    """Which ML framework the runtime runs, and its default number of nodes."""

    num_nodes: int | None = None
    torch: dict[str, Any] | None = None
    mpi: dict[str, Any] | None = None
    flux: dict[str, Any] | None = None
    jax: dict[str, Any] | None = None
    xgboost: dict[str, Any] | None = None


class TrainingRuntimeSpec(ApiStruct):
    ml_policy: MLPolicy | None = None
    pod_group_policy: dict[str, Any] | None = None
    template: RuntimeTemplate = msgspec.field(default_factory=RuntimeTemplate)


class TrainingRuntime(ApiStruct, kw_only=True):
    """A TrainingRuntime or a ClusterTrainingRuntime (the same spec)."""

    api_version: str = TRAINER_API_VERSION
    kind: str = TRAINING_RUNTIME_KIND
    metadata: ObjectMeta
    spec: TrainingRuntimeSpec = msgspec.field(default_factory=TrainingRuntimeSpec)


class RuntimeRef(ApiStruct):
    name: str = ""
    api_group: str | None = None
    kind: str | None = None


class TrainJobTrainer(ApiStruct):
    """`spec.trainer`: what the TrainJob overrides in the runtime's trainer node."""

    image: str | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    env: list[msgspec.Raw] = []
    num_nodes: int | None = None
    resources_per_node: dict[str, Any] | None = None
    num_proc_per_node: int | None = None


class TrainJobSpec(ApiStruct):
    runtime_ref: RuntimeRef = msgspec.field(default_factory=RuntimeRef)
    initializer: dict[str, Any] | None = None
    trainer: TrainJobTrainer | None = None
    runtime_patches: list[msgspec.Raw] = []
    suspend: bool | None = None
    managed_by: str | None = None


class TrainerJobStatus(ApiStruct):
    """`status.jobsStatus[]`: one replicated job's Jobs, counted by state."""

    name: str = ""
    ready: int = 0
    succeeded: int = 0
    failed: int = 0
    active: int = 0
    suspended: int = 0


class TrainJobStatus(ApiStruct):
    conditions: list[Condition] = []
    jobs_status: list[TrainerJobStatus] = []


class ResolvedRuntime(msgspec.Struct, frozen=True):
    """The runtime a TrainJob names, as found (kind, name and its spec)."""

    kind: str
    name: str
    spec: TrainingRuntimeSpec


class TrainJob(ApiStruct, kw_only=True):
    api_version: str = TRAINER_API_VERSION
    kind: str = "TrainJob"
    metadata: ObjectMeta
    spec: TrainJobSpec = msgspec.field(default_factory=TrainJobSpec)
    status: TrainJobStatus = msgspec.field(default_factory=TrainJobStatus)
    # Not an API field: the referenced runtime, filled in by the controller (None: not known).
    resolved: ResolvedRuntime | None = None
