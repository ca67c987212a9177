"""Set-ups for fair-sharing tests: a fresh engine, its cohorts and ClusterQueues of GPUs."""

from __future__ import annotations

from typing import Any

from reconciler.api import ClusterQueue, Cohort
from reconciler.core.engine import Engine
from reconciler.core.model.clusterqueues import compile_cluster_queue
from reconciler.core.quota.cohorts import compile_cohort
from tests.support.builders import cluster_queue_body, cohort_body, decode, flavor, t4_group

GPU = "nvidia.com/gpu"


def add_cq(
    state: Engine, name: str, quotas: dict[str, int], cohort: str | None = "org", weight: Any = None
) -> None:
    body = cluster_queue_body(name, [("t4", quotas)], cohort=cohort)
    if weight is not None:
        body["spec"]["fairSharing"] = {"weight": weight}
    state.set_cluster_queue(compile_cluster_queue(decode(body, ClusterQueue)))
    state.set_local_queue("ns", f"lq-{name}", name)


def add_cohort(
    state: Engine, name: str, parent: str | None = None, gpus: int = 0, weight: Any = None
) -> None:
    spec: dict[str, Any] = {"resourceGroups": t4_group({"name": GPU, "nominalQuota": gpus})}
    if parent:
        spec["parentName"] = parent
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    state.set_cohort(compile_cohort(decode(cohort_body(name, spec), Cohort)))


def fresh() -> Engine:
    state = Engine()
    state.set_flavor(flavor("t4"))
    state.set_namespace("ns", {})
    return state
