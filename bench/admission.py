"""Benchmark: admission decisions per second and memory per pending workload.

100,000 pending workloads (Jobs with a DRA ResourceClaimTemplate and CPU
requests) across 100 ClusterQueues, each with room for a tenth of its queue.
Prints figures; asserts nothing. Run: .venv/bin/python bench/admission.py
"""

from __future__ import annotations

import argparse
import gc
import random
import resource
import time
import tracemalloc
from typing import TypeVar

import msgspec

from reconciler.api import ClusterQueue, Job, LocalQueue, Namespace, ResourceClaimTemplate, ResourceFlavor
from reconciler.core.engine import Engine
from reconciler.core.model.workloads import WorkloadInfo
from reconciler.core.scheduling.scheduler import Admit
from reconciler.feed import QueueObjects, WorkloadSources, compile_for, feed_queue_objects
from reconciler.integrations.batchjob import workload_for_job

MAPPINGS = {"gpu.nvidia.com": "nvidia.com/gpu"}


T = TypeVar("T")


def _decode(body: object, kind: type[T]) -> T:
    return msgspec.json.decode(msgspec.json.encode(body), type=kind)


def job_json(i: int, namespace: str) -> bytes:
    return msgspec.json.encode(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": f"job-{i}",
                "namespace": namespace,
                "uid": f"uid-{i:08d}",
                "creationTimestamp": f"2026-01-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z",
                "labels": {"kueue.x-k8s.io/queue-name": "lq"},
            },
            "spec": {
                "parallelism": 1,
                "completions": 1,
                "suspend": True,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
                        "containers": [
                            {
                                "name": "main",
                                "image": "busybox",
                                "resources": {
                                    "requests": {"cpu": "500m", "memory": "1Gi"},
                                    "claims": [{"name": "gpu"}],
                                },
                            }
                        ],
                    }
                },
            },
        }
    )


def build_state(queues: int, per_queue_gpus: int, cohorts: int = 0) -> tuple[Engine, ResourceClaimTemplate]:
    """The queue objects, fed to a new engine as the controller feeds them (reconciler.feed)."""
    flavor = {"metadata": {"name": "t4"}, "spec": {"nodeLabels": {"nvidia.com/gpu.product": "Tesla-T4"}}}
    objects = QueueObjects(flavors=[_decode(flavor, ResourceFlavor)])
    cluster_queues: list[ClusterQueue] = []
    local_queues: list[LocalQueue] = []
    namespaces: list[Namespace] = []
    for q in range(queues):
        cq = _decode(
            {
                "metadata": {"name": f"cq-{q}"},
                "spec": {
                    "namespaceSelector": {},
                    **({"cohortName": f"pool-{q % cohorts}"} if cohorts else {}),
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                            "flavors": [
                                {
                                    "name": "t4",
                                    "resources": [
                                        {"name": "cpu", "nominalQuota": str(per_queue_gpus)},
                                        {"name": "memory", "nominalQuota": f"{per_queue_gpus * 2}Gi"},
                                        {"name": "nvidia.com/gpu", "nominalQuota": per_queue_gpus},
                                    ],
                                }
                            ],
                        }
                    ],
                },
            },
            ClusterQueue,
        )
        assert isinstance(cq, ClusterQueue)
        cluster_queues.append(cq)
        namespaces.append(_decode({"metadata": {"name": f"ns-{q}"}}, Namespace))
        local_queues.append(
            _decode(
                {"metadata": {"name": "lq", "namespace": f"ns-{q}"}, "spec": {"clusterQueue": f"cq-{q}"}},
                LocalQueue,
            )
        )
    objects.cluster_queues, objects.local_queues, objects.namespaces = (
        cluster_queues,
        local_queues,
        namespaces,
    )
    state = Engine()
    broken = feed_queue_objects(state, objects)
    assert not broken, broken
    template = _decode(
        {
            "metadata": {"name": "single-gpu"},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "gpu",
                                "exactly": {
                                    "deviceClassName": "gpu.nvidia.com",
                                    "allocationMode": "ExactCount",
                                    "count": 1,
                                },
                            }
                        ]
                    }
                }
            },
        },
        ResourceClaimTemplate,
    )
    assert isinstance(template, ResourceClaimTemplate)
    return state, template


def compile_all(n: int, queues: int, state: Engine, template: ResourceClaimTemplate) -> list[WorkloadInfo]:
    """Each Job's Workload compiled through the feed (against its ClusterQueue, as the controller does)."""
    templates = {(f"ns-{q}", template.metadata.name): template for q in range(queues)}
    sources = WorkloadSources(MAPPINGS, templates)
    infos = []
    for i in range(n):
        job = msgspec.json.decode(job_json(i, f"ns-{i % queues}"), type=Job)
        infos.append(compile_for(state, workload_for_job(job), sources))
    return infos


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workloads", type=int, default=100_000)
    parser.add_argument("--queues", type=int, default=100)
    parser.add_argument("--churn", type=int, default=2_000, help="finish/admit cycles to time")
    parser.add_argument("--cohorts", type=int, default=0, help="spread the ClusterQueues over N cohorts")
    parser.add_argument(
        "--fair-sharing", action="store_true", help="cohort fair sharing on (both preemption strategies)"
    )
    args = parser.parse_args()
    n, queues = args.workloads, args.queues
    per_queue = n // queues
    gpus = max(1, per_queue // 10)

    # Time: decode + compile of Jobs, then decisions.
    state, template = build_state(queues, gpus, args.cohorts)
    if args.fair_sharing:
        state.scheduler.fair_sharing = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    infos = compile_all(n, queues, state, template)
    compile_s = time.perf_counter() - started
    for info in infos:
        state.add_workload(info)
    rss_per = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) * 1024 / n
    started = time.perf_counter()
    decisions = state.schedule()
    first_s = time.perf_counter() - started
    admitted = [d.key for d in decisions if isinstance(d, Admit)]
    first_decisions, first_admits = len(decisions), len(admitted)

    # Churn: a running workload finishes, the scheduler admits the next one in its queue
    # (BestEffortFIFO re-evaluates the queue's set-aside workloads).
    rng = random.Random(7)
    churn_decisions = 0
    started = time.perf_counter()
    for _ in range(args.churn):
        key = admitted.pop(rng.randrange(len(admitted)))
        state.remove_workload(key)
        for d in state.schedule():
            churn_decisions += 1
            if isinstance(d, Admit):
                admitted.append(d.key)
    churn_s = time.perf_counter() - started
    del state, infos, decisions, admitted
    gc.collect()

    # Memory: what the controller holds per pending workload (compiled info + queue entry).
    tracemalloc.start()
    state, template = build_state(queues, gpus)
    base_current, _ = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    infos = compile_all(n, queues, state, template)
    for info in infos:
        state.add_workload(info)
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    held = (current - base_current) / n
    peak_per = (peak - base_current) / n

    in_cohorts = f", in {args.cohorts} cohorts" if args.cohorts else ""
    in_cohorts += ", fair sharing on" if args.fair_sharing else ""
    print(f"workloads: {n:,} pending across {queues} ClusterQueues{in_cohorts} ({gpus} GPUs of quota each)")
    print(f"decode+compile Jobs (incl. DRA charge): {n / compile_s:,.0f} workloads/s")
    print(
        f"first pass: {first_decisions:,} decisions ({first_admits:,} admit) in {first_s:.2f} s "
        f"= {first_decisions / first_s:,.0f} decisions/s"
    )
    print(
        f"churn: {args.churn:,} finish+admit cycles, {churn_decisions:,} decisions in {churn_s:.2f} s "
        f"= {churn_decisions / churn_s:,.0f} decisions/s, {args.churn / churn_s:,.0f} admissions/s"
    )
    print(
        f"memory per pending workload: {held:,.0f} B held, {peak_per:,.0f} B at peak (tracemalloc); "
        f"{rss_per:,.0f} B of peak RSS growth"
    )


if __name__ == "__main__":
    main()
