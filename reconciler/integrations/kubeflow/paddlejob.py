"""PaddleJob (kubeflow.org/v1, the training-operator's) as Kueue v0.18.1's `kubeflow.org/paddlejob`
framework: a pod set per replica type
of `spec.paddleReplicaSpecs`, in the order
Master, Worker (see replicas.py)."""

from __future__ import annotations

from reconciler.api.kubeflow import PADDLEJOBS, PaddleJob

from .kind import replica_job_kind

__all__ = ["PADDLEJOB", "REGISTRATION"]

PADDLEJOB, DOOR, REGISTRATION = replica_job_kind(
    "kubeflow.org/paddlejob", PADDLEJOBS, PaddleJob, "paddleReplicaSpecs", ("Master", "Worker")
)
