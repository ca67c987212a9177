"""Kubeflow's replica-spec jobs: the training-operator v1 kinds (kubeflow.org/v1 PyTorchJob,
TFJob, XGBoostJob, PaddleJob, JAXJob) and mpi-operator's MPIJob (kubeflow.org/v2beta1), the
fields their integrations read.

They share one shape: `spec.runPolicy` (suspend, the scheduling policy's priority class),
a map of replica specs by replica type under a field named per kind (`pytorchReplicaSpecs`,
`tfReplicaSpecs`, ...), each with `replicas` and a pod `template` (kept raw: it becomes a pod
set's template as it came), and a status of conditions (Created, Running, Restarting,
Succeeded, Suspended, Failed) and replica statuses by replica type.
"""

from __future__ import annotations

import msgspec

from .meta import ApiStruct, ObjectMeta
from .resources import Resource

__all__ = [
    "JAXJOBS",
    "MPIJOBS",
    "PADDLEJOBS",
    "PYTORCHJOBS",
    "TFJOBS",
    "XGBOOSTJOBS",
    "JAXJob",
    "JobCondition",
    "MPIJob",
    "PaddleJob",
    "PyTorchJob",
    "ReplicaJob",
    "ReplicaJobSpec",
    "ReplicaJobStatus",
    "ReplicaSpec",
    "ReplicaStatus",
    "RunPolicy",
    "SchedulingPolicy",
    "TFJob",
    "XGBoostJob",
]

PYTORCHJOBS = Resource("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob", namespaced=True)
TFJOBS = Resource("kubeflow.org", "v1", "tfjobs", "TFJob", namespaced=True)
XGBOOSTJOBS = Resource("kubeflow.org", "v1", "xgboostjobs", "XGBoostJob", namespaced=True)
PADDLEJOBS = Resource("kubeflow.org", "v1", "paddlejobs", "PaddleJob", namespaced=True)
JAXJOBS = Resource("kubeflow.org", "v1", "jaxjobs", "JAXJob", namespaced=True)
MPIJOBS = Resource("kubeflow.org", "v2beta1", "mpijobs", "MPIJob", namespaced=True)


class SchedulingPolicy(ApiStruct):
    priority_class: str = ""


class RunPolicy(ApiStruct):
    suspend: bool | None = None
    scheduling_policy: SchedulingPolicy | None = None
    managed_by: str | None = None


class ReplicaSpec(ApiStruct):
    replicas: int | None = None
    template: msgspec.Raw = msgspec.Raw(b"{}")

    @property
    def count(self) -> int:
        """Pods of this replica type (1 when unset, as the operators default it)."""
        return 1 if self.replicas is None else self.replicas


class ReplicaJobSpec(ApiStruct):
    """What every kind's spec has; each kind adds its map of replica specs."""

    run_policy: RunPolicy | None = None

    @property
    def suspend(self) -> bool | None:
        return None if self.run_policy is None else self.run_policy.suspend

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return {}


class JobCondition(ApiStruct):
    type: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""


class ReplicaStatus(ApiStruct):
    active: int = 0
    succeeded: int = 0
    failed: int = 0


class ReplicaJobStatus(ApiStruct):
    conditions: list[JobCondition] = []
    replica_statuses: dict[str, ReplicaStatus] = {}


class PyTorchJobSpec(ReplicaJobSpec):
    pytorch_replica_specs: dict[str, ReplicaSpec] = {}

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.pytorch_replica_specs


class TFJobSpec(ReplicaJobSpec):
    tf_replica_specs: dict[str, ReplicaSpec] = {}

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.tf_replica_specs


class XGBoostJobSpec(ReplicaJobSpec):
    xgb_replica_specs: dict[str, ReplicaSpec] = {}

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.xgb_replica_specs


class PaddleJobSpec(ReplicaJobSpec):
    paddle_replica_specs: dict[str, ReplicaSpec] = {}

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.paddle_replica_specs


class JAXJobSpec(ReplicaJobSpec):
    jax_replica_specs: dict[str, ReplicaSpec] = {}

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.jax_replica_specs


class MPIJobSpec(ReplicaJobSpec):
    mpi_replica_specs: dict[str, ReplicaSpec] = {}
    run_launcher_as_worker: bool | None = None

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.mpi_replica_specs


class ReplicaJob(ApiStruct, kw_only=True):
    """A job of any of these kinds (each kind's projection narrows `spec`)."""

    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta
    spec: ReplicaJobSpec = msgspec.field(default_factory=ReplicaJobSpec)
    status: ReplicaJobStatus = msgspec.field(default_factory=ReplicaJobStatus)


class PyTorchJob(ReplicaJob, kw_only=True):
    api_version: str = "kubeflow.org/v1"
    kind: str = "PyTorchJob"
    spec: PyTorchJobSpec = msgspec.field(default_factory=PyTorchJobSpec)


class TFJob(ReplicaJob, kw_only=True):
    api_version: str = "kubeflow.org/v1"
    kind: str = "TFJob"
    spec: TFJobSpec = msgspec.field(default_factory=TFJobSpec)


class XGBoostJob(ReplicaJob, kw_only=True):
    api_version: str = "kubeflow.org/v1"
    kind: str = "XGBoostJob"
    spec: XGBoostJobSpec = msgspec.field(default_factory=XGBoostJobSpec)


class PaddleJob(ReplicaJob, kw_only=True):
    api_version: str = "kubeflow.org/v1"
    kind: str = "PaddleJob"
    spec: PaddleJobSpec = msgspec.field(default_factory=PaddleJobSpec)


class JAXJob(ReplicaJob, kw_only=True):
    api_version: str = "kubeflow.org/v1"
    kind: str = "JAXJob"
    spec: JAXJobSpec = msgspec.field(default_factory=JAXJobSpec)


class MPIJob(ReplicaJob, kw_only=True):
    api_version: str = "kubeflow.org/v2beta1"
    kind: str = "MPIJob"
    spec: MPIJobSpec = msgspec.field(default_factory=MPIJobSpec)
