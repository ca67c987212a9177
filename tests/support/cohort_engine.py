"""Set-ups for hierarchical cohorts: Cohort objects, an engine with cohorts, submitted GPU jobs."""

from __future__ import annotations

from typing import Any

from reconciler.api import Cohort
from reconciler.core.engine import Engine
from reconciler.core.quota.cohorts import compile_cohort
from tests.support.builders import cohort_body, decode, t4_group
from tests.support.preemption_engine import GPU, gpu_job


def cohort(name: str, gpus: int | None = None, parent: str | None = None, **limits: int) -> Cohort:
    spec: dict[str, Any] = {}
    if parent:
        spec["parentName"] = parent
    if gpus is not None:
        quota = {"name": GPU, "nominalQuota": gpus, **limits}
        spec["resourceGroups"] = t4_group(quota)
    result: Cohort = decode(cohort_body(name, spec), Cohort)
    return result


def with_cohorts(state: Engine, *cohorts: Cohort) -> Engine:
    for c in cohorts:
        state.set_cohort(compile_cohort(c))
    return state


def submit(state: Engine, queue: str, *names: str, gpus: int = 1, priority: int = 0) -> None:
    for name in names:
        state.add_workload(gpu_job(name, queue=f"lq-{queue}", gpus=gpus, priority=priority))
