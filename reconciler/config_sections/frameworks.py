"""Kueue's framework names (``integrations.frameworks``): the vocabulary of Kueue v0.18.1's
Configuration, and its default. Which of them this build implements is the integrations'
registry's to say (`reconciler.integrations.check_frameworks`).
"""

from __future__ import annotations

__all__ = ["DEFAULT_FRAMEWORKS", "KNOWN_FRAMEWORKS"]

DEFAULT_FRAMEWORKS: tuple[str, ...] = ("batch/job",)

KNOWN_FRAMEWORKS = frozenset(
    {
        "batch/job",
        "kubeflow.org/mpijob",
        "ray.io/rayjob",
        "ray.io/rayservice",
        "ray.io/raycluster",
        "jobset.x-k8s.io/jobset",
        "kubeflow.org/paddlejob",
        "kubeflow.org/pytorchjob",
        "kubeflow.org/tfjob",
        "kubeflow.org/xgboostjob",
        "kubeflow.org/jaxjob",
        "trainer.kubeflow.org/trainjob",
        "workload.codeflare.dev/appwrapper",
        "sparkoperator.k8s.io/sparkapplication",
        "pod",
        "deployment",
        "statefulset",
        "leaderworkerset.x-k8s.io/leaderworkerset",
    }
)
