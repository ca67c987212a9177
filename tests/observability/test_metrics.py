"""The /metrics exposition after driving the reconciler: Kueue's names, types, labels and values."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import msgspec
import pytest

from reconciler.api import ClusterQueue, Job, Workload
from reconciler.api.resources import CLUSTER_QUEUES, JOBS, WORKLOADS
from reconciler.kube import Informer, KubeClient, ServerError
from reconciler.observability.metrics import Metrics, kueue_buckets
from reconciler.runtime.loop.snapshot import state_snapshot
from reconciler.runtime.shared.actions import Create, MergePatch
from reconciler.runtime.shared.writer import WriteDone, Writer
from tests.support.builders import cluster_queue_body
from tests.support.leader_metrics import leader_harness, with_creation
from tests.support.metrics import scrape, value
from tests.support.reconciler_harness import (
    GPU,
    Harness,
    apply_patch,
    created_workload,
    decode,
    gpu_job,
    of,
    queues,
)

CREATED = "2026-01-01T00:00:00Z"


def admitted_pair(h: Harness) -> tuple[Workload, Workload, MergePatch]:
    """Two GPU jobs on a 1-GPU queue: the first is admitted (write answered), the second waits."""
    queues(h)
    h.event(
        "MODIFIED",
        CLUSTER_QUEUES,
        decode(cluster_queue_body("cq", [("t4", {GPU: 1, "cpu": "1500m", "memory": "2Gi"})]), ClusterQueue),
    )
    h.sync_all()
    workloads = []
    for name in ("a", "b"):
        h.event("ADDED", JOBS, gpu_job(h, name))
        (create,) = of(h.take(), "create-workload")
        workloads.append(with_creation(created_workload(h, create), CREATED))
    for workload in workloads:
        h.event("ADDED", WORKLOADS, workload)
    (admit,) = of(h.take(), "admit")
    first = next(w for w in workloads if w.metadata.name == admit.name)
    admitted = apply_patch(h, first, admit)
    h.reconciler.handle(WriteDone(admit, body=msgspec.json.encode(admitted)))
    h.take()
    return first, admitted, admit


def test_admission_counters_wait_time_histograms_and_state_gauges() -> None:
    h, metrics = leader_harness(wait_seconds=7.0)
    admitted_pair(h)
    types, samples = scrape(metrics)
    role = {"replica_role": "leader"}
    cq = {"cluster_queue": "cq", **role}
    cq_prio = {"cluster_queue": "cq", "priority_class": "", **role}

    assert types["kueue_admission_attempts"] == "counter"
    assert value(samples, "kueue_admission_attempts_total", result="success", **role) == 1
    assert value(samples, "kueue_admission_attempt_duration_seconds_count", result="success", **role) == 1
    assert value(samples, "kueue_quota_reserved_workloads_total", **cq_prio) == 1
    assert value(samples, "kueue_admitted_workloads_total", **cq_prio) == 1

    # Waited 7 s since creation: in the 10 s bucket, not in the 5 s one.
    assert types["kueue_admission_wait_time_seconds"] == "histogram"
    for name in ("kueue_quota_reserved_wait_time_seconds", "kueue_admission_wait_time_seconds"):
        assert value(samples, f"{name}_bucket", le="5.0", **cq_prio) == 0
        assert value(samples, f"{name}_bucket", le="10.0", **cq_prio) == 1
        assert value(samples, f"{name}_bucket", le="20.0", **cq_prio) == 1
        assert value(samples, f"{name}_sum", **cq_prio) == pytest.approx(7.0)

    assert types["kueue_pending_workloads"] == "gauge"
    assert value(samples, "kueue_pending_workloads", status="active", **cq) == 0
    assert value(samples, "kueue_pending_workloads", status="inadmissible", **cq) == 1
    assert value(samples, "kueue_reserving_active_workloads", **cq) == 1
    assert value(samples, "kueue_admitted_active_workloads", **cq) == 1
    assert value(samples, "kueue_finished_workloads", **cq) == 0
    for status, expected in (("active", 1), ("pending", 0), ("terminating", 0)):
        assert value(samples, "kueue_cluster_queue_status", status=status, **cq) == expected

    lq = {"name": "lq", "namespace": "ns", **role}
    assert value(samples, "kueue_local_queue_pending_workloads", status="inadmissible", **lq) == 1
    assert value(samples, "kueue_local_queue_pending_workloads", status="active", **lq) == 0
    assert value(samples, "kueue_local_queue_admitted_active_workloads", **lq) == 1

    def fr(resource: str) -> dict[str, str]:
        return {"cohort": "", "cluster_queue": "cq", "flavor": "t4", "resource": resource, **role}

    # Base units: cpu in cores, memory in bytes, GPUs as a count.
    assert value(samples, "kueue_cluster_queue_nominal_quota", **fr(GPU)) == 1
    assert value(samples, "kueue_cluster_queue_nominal_quota", **fr("cpu")) == 1.5
    assert value(samples, "kueue_cluster_queue_nominal_quota", **fr("memory")) == 2 * 2**30
    assert value(samples, "kueue_cluster_queue_resource_usage", **fr(GPU)) == 1
    assert value(samples, "kueue_cluster_queue_resource_reservation", **fr(GPU)) == 1
    assert value(samples, "kueue_cluster_queue_resource_usage", **fr("cpu")) == 0

    build = [k for k in samples if k[0] == "kueue_build_info"]
    assert len(build) == 1
    assert dict(build[0][1])["git_version"] == "1.2.3"
    assert dict(build[0][1])["replica_role"] == "leader"
    assert value(samples, "dra_quota_leader") == 1
    assert value(samples, "dra_quota_ledger_rebuild_seconds") is not None

    # Every kueue_ series says which replica reports it.
    for name, labels in samples:
        if name.startswith("kueue_"):
            assert dict(labels).get("replica_role") == "leader", name


def test_finish_and_eviction_counters() -> None:
    h, metrics = leader_harness()
    _first, admitted, _admit = admitted_pair(h)
    h.event("MODIFIED", WORKLOADS, admitted)
    h.take()
    key = (admitted.metadata.namespace, admitted.metadata.name)
    # The Job completes; the reconciler finishes its Workload.
    owner = h.reconciler.store.job_key(key)
    assert owner is not None
    done_body = msgspec.json.decode(msgspec.json.encode(h.reconciler.store.of_kind("Job")[owner]))
    done_body["spec"]["suspend"] = False
    done_body["status"] = {"conditions": [{"type": "Complete", "status": "True", "message": "done"}]}
    done_body["metadata"]["resourceVersion"] = h.next_rv()
    h.event("MODIFIED", JOBS, decode(done_body, Job))
    (finish,) = of(h.take(), "finish")
    assert isinstance(finish, MergePatch)
    written = apply_patch(h, h.reconciler.workloads[key], finish)
    h.reconciler.handle(WriteDone(finish, body=msgspec.json.encode(written)))
    metrics.workload_evicted("cq", "PodsReadyTimeout")
    _types, samples = scrape(metrics)
    cq_prio = {"cluster_queue": "cq", "priority_class": "", "replica_role": "leader"}
    assert value(samples, "kueue_finished_workloads_total", **cq_prio) == 1
    assert value(samples, "kueue_finished_workloads", cluster_queue="cq", replica_role="leader") == 1
    assert (
        value(
            samples,
            "kueue_evicted_workloads_total",
            reason="PodsReadyTimeout",
            underlying_cause="",
            **cq_prio,
        )
        == 1
    )


def test_a_follower_reports_its_role_and_no_queue_state() -> None:
    metrics = Metrics("follower")
    _types, samples = scrape(metrics)
    assert value(samples, "dra_quota_leader") == 0
    assert not [k for k in samples if k[0] == "kueue_pending_workloads"]
    (build,) = [dict(k[1]) for k in samples if k[0] == "kueue_build_info"]
    assert build["replica_role"] == "follower"
    metrics.set_role("leader")
    _types, samples = scrape(metrics)
    (build,) = [dict(k[1]) for k in samples if k[0] == "kueue_build_info"]
    assert build["replica_role"] == "leader"
    assert value(samples, "dra_quota_leader") == 1


def test_kueue_buckets() -> None:
    assert kueue_buckets(6) == [1.0, 2.5, 5.0, 10.0, 20.0, 40.0]
    assert len(kueue_buckets()) == 14


def test_watch_counters_and_inbox_depth_come_from_the_informers() -> None:
    h, metrics = leader_harness()
    client = KubeClient("http://127.0.0.1:9")
    informer: Informer[Any] = Informer(client, WORKLOADS, Workload, lambda e: None)
    informer.stats.watch_restarts = 3
    informer.stats.relists = 2
    informer.stats.events.update({"ADDED": 5, "MODIFIED": 4, "DELETED": 1, "BOOKMARK": 7})
    metrics.state_source = lambda: state_snapshot(h.reconciler, [informer], inbox_depth=11)
    types, samples = scrape(metrics)
    assert types["dra_quota_watch_restarts"] == "counter"
    assert value(samples, "dra_quota_watch_restarts_total", kind="Workload") == 3
    assert value(samples, "dra_quota_watch_relists_total", kind="Workload") == 2
    assert value(samples, "dra_quota_watch_events_total", kind="Workload") == 10
    assert value(samples, "dra_quota_inbox_depth") == 11


class _AnsweringClient:
    async def create(self, resource: Any, namespace: Any, body: bytes) -> bytes:
        return body

    async def merge_patch(self, *args: Any, **kwargs: Any) -> bytes:
        raise ServerError(503, "ServiceUnavailable", "try later")


@pytest.mark.asyncio
async def test_the_writer_times_writes_and_counts_errors_by_code() -> None:
    metrics = Metrics()
    results: list[WriteDone] = []
    writer = Writer(cast(KubeClient, _AnsweringClient()), results.append, metrics=metrics)
    writer.submit(Create("create-workload", WORKLOADS, "ns", "a", b"{}"))
    writer.submit(MergePatch("workload-status", WORKLOADS, "ns", "a", b"{}", subresource="status"))
    for _ in range(100):
        if len(results) == 2:
            break
        await asyncio.sleep(0.01)
    _types, samples = scrape(metrics)
    create = {"verb": "create", "resource": "workloads"}
    patch = {"verb": "patch", "resource": "workloads"}
    assert value(samples, "dra_quota_api_request_duration_seconds_count", **create) == 1
    assert value(samples, "dra_quota_api_request_duration_seconds_count", **patch) == 1
    assert value(samples, "dra_quota_api_request_errors_total", code="503", **patch) == 1
    assert value(samples, "dra_quota_api_request_errors_total", code="503", **create) is None
