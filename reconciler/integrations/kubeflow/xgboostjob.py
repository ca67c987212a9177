"""XGBoostJob (kubeflow.org/v1, the training-operator's) as Kueue v0.18.1's `kubeflow.org/xgboostjob`
framework: a pod set per replica type
of `spec.xgbReplicaSpecs`, in the order
Master, Worker (see replicas.py)."""

from __future__ import annotations

from reconciler.api.kubeflow import XGBOOSTJOBS, XGBoostJob

from .kind import replica_job_kind

__all__ = ["REGISTRATION", "XGBOOSTJOB"]

XGBOOSTJOB, DOOR, REGISTRATION = replica_job_kind(
    "kubeflow.org/xgboostjob", XGBOOSTJOBS, XGBoostJob, "xgbReplicaSpecs", ("Master", "Worker")
)
