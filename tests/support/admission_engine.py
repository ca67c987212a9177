"""Set-ups for admission tests: workload infos and engine states with GPU queues."""

from __future__ import annotations

from typing import Any

from reconciler.core.engine import Engine
from reconciler.core.model.workloads import WorkloadInfo, compile_workload
from reconciler.integrations.batchjob import workload_for_job
from tests.support.builders import cluster_queue, flavor, job

GPU = "nvidia.com/gpu"


def info(
    name: str,
    created: str = "",
    priority: int = 0,
    namespace: str = "ns",
    queue: str = "lq",
    **job_kwargs: Any,
) -> WorkloadInfo:
    wl = workload_for_job(job(name, namespace=namespace, queue=queue, uid=f"uid-{name}", **job_kwargs))
    result = compile_workload(wl, lookup_template=lambda ns, n: None, mappings={})
    result.name = name  # keyed by the job name to keep the tests short
    result.created = created or f"2026-01-01T00:00:{len(name):02d}Z"
    result.priority = priority
    return result


def state_with(
    *flavors_quota: tuple[str, dict[str, str | int]],
    strategy: str | None = None,
    labels: dict[str, dict[str, str]] | None = None,
    namespace_selector: dict[str, Any] | None = None,
) -> Engine:
    state = Engine()
    for name, _ in flavors_quota:
        state.set_flavor(flavor(name, (labels or {}).get(name, {})))
    state.set_cluster_queue(
        cluster_queue("cq", list(flavors_quota), strategy=strategy, namespace_selector=namespace_selector)
    )
    state.set_local_queue("ns", "lq", "cq")
    state.set_namespace("ns", {"kubernetes.io/metadata.name": "ns", "team": "a"})
    return state
