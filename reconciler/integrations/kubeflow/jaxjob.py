"""JAXJob (kubeflow.org/v1, the training-operator's) as Kueue v0.18.1's `kubeflow.org/jaxjob`
framework: a pod set per replica type
of `spec.jaxReplicaSpecs`, in the order
Worker (see replicas.py)."""

from __future__ import annotations

from reconciler.api.kubeflow import JAXJOBS, JAXJob

from .kind import replica_job_kind

__all__ = ["JAXJOB", "REGISTRATION"]

JAXJOB, DOOR, REGISTRATION = replica_job_kind(
    "kubeflow.org/jaxjob", JAXJOBS, JAXJob, "jaxReplicaSpecs", ("Worker",)
)
