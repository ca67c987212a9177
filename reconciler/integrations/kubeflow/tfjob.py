"""TFJob (kubeflow.org/v1, the training-operator's) as Kueue v0.18.1's `kubeflow.org/tfjob`
framework: a pod set per replica type
of `spec.tfReplicaSpecs`, in the order
Chief, Master, PS, Worker, Evaluator (see replicas.py)."""

from __future__ import annotations

from reconciler.api.kubeflow import TFJOBS, TFJob

from .kind import replica_job_kind

__all__ = ["REGISTRATION", "TFJOB"]

TFJOB, DOOR, REGISTRATION = replica_job_kind(
    "kubeflow.org/tfjob", TFJOBS, TFJob, "tfReplicaSpecs", ("Chief", "Master", "PS", "Worker", "Evaluator")
)
