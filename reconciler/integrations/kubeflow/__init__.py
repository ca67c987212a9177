"""Kubeflow's replica-spec jobs, as Kueue v0.18.1's kubeflow and mpijob packages: the shared
rules (replicas.py), webhooks (door.py) and registration (kind.py), and one small module per kind
(the training-operator v1's PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob; mpi-operator's
MPIJob)."""

from . import jaxjob, mpijob, paddlejob, pytorchjob, tfjob, xgboostjob
from .replicas import ReplicaJobIntegration

__all__ = ["ReplicaJobIntegration", "jaxjob", "mpijob", "paddlejob", "pytorchjob", "tfjob", "xgboostjob"]
