"""PyTorchJob (kubeflow.org/v1, the training-operator's) as Kueue v0.18.1's `kubeflow.org/pytorchjob`
framework: a pod set per replica type
of `spec.pytorchReplicaSpecs`, in the order
Master, Worker (see replicas.py)."""

from __future__ import annotations

from reconciler.api.kubeflow import PYTORCHJOBS, PyTorchJob

from .kind import replica_job_kind

__all__ = ["PYTORCHJOB", "REGISTRATION"]

PYTORCHJOB, DOOR, REGISTRATION = replica_job_kind(
    "kubeflow.org/pytorchjob", PYTORCHJOBS, PyTorchJob, "pytorchReplicaSpecs", ("Master", "Worker")
)
