"""A GPU engine for preemption tests: GPU jobs by priority, decisions by type."""

from __future__ import annotations

from typing import Any

from reconciler.core.engine import Engine
from reconciler.core.model.workloads import WorkloadInfo, compile_workload
from reconciler.core.scheduling.scheduler import Decision
from reconciler.integrations.batchjob import workload_for_job
from tests.support.builders import cluster_queue_body, decode, flavor, job

GPU = "nvidia.com/gpu"


def gpu_job(
    name: str, queue: str = "lq-a", gpus: int = 1, priority: int = 0, created: str = ""
) -> WorkloadInfo:
    spec = job(name, queue=queue, uid=f"uid-{name}", requests={GPU: str(gpus)})
    info = compile_workload(workload_for_job(spec), lookup_template=lambda ns, n: None, mappings={})
    info.name = name
    info.priority = priority
    info.created = created or f"2026-01-01T00:00:{len(name):02d}Z"
    return info


def engine(*queues: tuple[str, int, dict[str, Any]]) -> Engine:
    from reconciler.api import ClusterQueue
    from reconciler.core.model.clusterqueues import compile_cluster_queue

    state = Engine()
    state.set_flavor(flavor("t4"))
    state.set_namespace("ns", {})
    for name, gpus, extra in queues:
        preemption = extra.pop("preemption", None)
        body = cluster_queue_body(name, [("t4", {GPU: gpus})], **extra)
        if preemption:
            body["spec"]["preemption"] = preemption
        state.set_cluster_queue(compile_cluster_queue(decode(body, ClusterQueue)))
        state.set_local_queue("ns", f"lq-{name}", name)
    return state


def of_type(decisions: list[Decision], kind: type[Any]) -> list[Any]:
    return [d for d in decisions if isinstance(d, kind)]
