"""Every metric Kueue v0.18.1 registers by default is served here with the same label names, or
is in EXCEPTIONS with the reason it is not.

KUEUE is copied from sigs.k8s.io/kueue@v0.18.1 pkg/metrics/metrics.go: `Register()` (and
`RegisterLQMetrics()`, which it calls with the LocalQueueMetrics gate, on by default in v0.18;
`WorkloadCreationLatency` with MetricForWorkloadCreationLatency, also on by default), each
metric's label names as `InitMetricVectors` declares them (no custom labels configured)."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from reconciler.api import ObjectMeta, Workload
from reconciler.observability.metrics import (
    ClusterQueueSample,
    CohortSample,
    CohortTreeSample,
    LocalQueueSample,
    Metrics,
    StateSnapshot,
)

CQ_PRIO = ("cluster_queue", "priority_class", "replica_role")
LQ_PRIO = ("name", "namespace", "priority_class", "replica_role")
CQ_FR = ("cohort", "cluster_queue", "flavor", "resource", "replica_role")
COHORT_FR = ("cohort", "flavor", "resource", "replica_role")
EVICTION = ("cluster_queue", "reason", "underlying_cause", "priority_class", "replica_role")

KUEUE: dict[str, tuple[str, ...]] = {
    "kueue_build_info": ("git_version", "git_commit", "build_date", "go_version", "compiler", "platform"),
    "kueue_admission_attempts_total": ("result", "replica_role"),
    "kueue_admission_attempt_duration_seconds": ("result", "replica_role"),
    "kueue_admission_cycle_preemption_skips": ("cluster_queue", "replica_role"),
    "kueue_pending_workloads": ("cluster_queue", "status", "replica_role"),
    "kueue_finished_workloads": ("cluster_queue", "replica_role"),
    "kueue_quota_reserved_workloads_total": CQ_PRIO,
    "kueue_finished_workloads_total": CQ_PRIO,
    "kueue_quota_reserved_wait_time_seconds": CQ_PRIO,
    "kueue_pods_ready_to_evicted_time_seconds": (
        "cluster_queue",
        "reason",
        "underlying_cause",
        "replica_role",
    ),
    "kueue_admitted_workloads_total": CQ_PRIO,
    "kueue_admission_wait_time_seconds": CQ_PRIO,
    "kueue_admission_checks_wait_time_seconds": CQ_PRIO,
    "kueue_ready_wait_time_seconds": CQ_PRIO,
    "kueue_admitted_until_ready_wait_time_seconds": CQ_PRIO,
    "kueue_evicted_workloads_total": EVICTION,
    "kueue_evicted_workloads_once_total": EVICTION,
    "kueue_preempted_workloads_total": ("preempting_cluster_queue", "reason", "replica_role"),
    "kueue_workload_eviction_latency_seconds": ("cluster_queue", "reason", "replica_role"),
    "kueue_reserving_active_workloads": ("cluster_queue", "replica_role"),
    "kueue_admitted_active_workloads": ("cluster_queue", "replica_role"),
    "kueue_cluster_queue_status": ("cluster_queue", "status", "replica_role"),
    "kueue_cluster_queue_resource_reservation": CQ_FR,
    "kueue_cluster_queue_resource_pending": ("cluster_queue", "resource", "replica_role"),
    "kueue_cluster_queue_resource_usage": CQ_FR,
    "kueue_cluster_queue_nominal_quota": CQ_FR,
    "kueue_cluster_queue_borrowing_limit": CQ_FR,
    "kueue_cluster_queue_lending_limit": CQ_FR,
    "kueue_cluster_queue_weighted_share": ("cluster_queue", "cohort", "replica_role"),
    "kueue_cluster_queue_info": ("cluster_queue", "parent_cohort", "root_cohort", "replica_role"),
    "kueue_cohort_info": ("cohort", "parent_cohort", "root_cohort", "replica_role"),
    "kueue_cohort_weighted_share": ("cohort", "replica_role"),
    "kueue_cohort_subtree_quota": COHORT_FR,
    "kueue_cohort_subtree_admitted_workloads_total": ("cohort", "priority_class", "replica_role"),
    "kueue_cohort_subtree_resource_reservations": COHORT_FR,
    "kueue_cohort_subtree_admitted_active_workloads": ("cohort", "replica_role"),
    "kueue_workload_creation_latency_seconds": ("job_kind", "replica_role"),
    "kueue_local_queue_pending_workloads": ("name", "namespace", "status", "replica_role"),
    "kueue_local_queue_finished_workloads": ("name", "namespace", "replica_role"),
    "kueue_local_queue_quota_reserved_workloads_total": LQ_PRIO,
    "kueue_local_queue_finished_workloads_total": LQ_PRIO,
    "kueue_local_queue_quota_reserved_wait_time_seconds": LQ_PRIO,
    "kueue_local_queue_admitted_workloads_total": LQ_PRIO,
    "kueue_local_queue_admission_wait_time_seconds": LQ_PRIO,
    "kueue_local_queue_admission_checks_wait_time_seconds": LQ_PRIO,
    "kueue_local_queue_ready_wait_time_seconds": LQ_PRIO,
    "kueue_local_queue_admitted_until_ready_wait_time_seconds": LQ_PRIO,
    "kueue_local_queue_evicted_workloads_total": (
        "name",
        "namespace",
        "reason",
        "underlying_cause",
        "priority_class",
        "replica_role",
    ),
    "kueue_local_queue_reserving_active_workloads": ("name", "namespace", "replica_role"),
    "kueue_local_queue_admitted_active_workloads": ("name", "namespace", "replica_role"),
    "kueue_local_queue_status": ("name", "namespace", "active", "replica_role"),
    "kueue_local_queue_resource_reservation": ("name", "namespace", "flavor", "resource", "replica_role"),
    "kueue_local_queue_resource_usage": ("name", "namespace", "flavor", "resource", "replica_role"),
}

_LQ_OFF = (
    "Kueue registers it but records series only with Configuration metrics.localQueueMetrics.enable "
    "(off by default), so a default Kueue serves no sample of it; not implemented here"
)
# Served with one more label than Kueue's.
EXTRA_LABELS = {
    "kueue_build_info": (
        ("replica_role",),
        "every kueue_ series here carries replica_role, build information included (docs/metrics.md)",
    ),
}
# Not served.
EXCEPTIONS = {
    **{
        name: _LQ_OFF
        for name in KUEUE
        if name.startswith("kueue_local_queue_")
        and name not in ("kueue_local_queue_pending_workloads", "kueue_local_queue_admitted_active_workloads")
    },
}

STAMP, LATER = "2026-01-01T00:00:00Z", "2026-01-01T00:00:30Z"


def served() -> dict[str, set[str]]:
    """Family name (counters with _total) -> label names, from a registry with a sample of everything."""
    metrics = Metrics("leader")
    fr = ("t4", "gpu")
    cq = ClusterQueueSample(
        "cq", "active", nominal={fr: 1}, reserved={fr: 1}, used={fr: 1}, borrowing_limit={fr: 1},
        lending_limit={fr: 1}, weighted_share=0.0, parent_cohort="c", root_cohort="c",
        pending_requests={"gpu": 0.0}, preemption_skips=1,
    )  # fmt: skip
    tree = CohortTreeSample("c", "", "c", {fr: 1.0}, {fr: 1.0}, 1)
    snapshot = StateSnapshot(
        [cq], [LocalQueueSample("ns", "lq")], cohorts=[CohortSample("c", 0.0)], cohort_trees=[tree]
    )
    metrics.state_source = lambda: snapshot
    metrics.admission_attempt(True, 0.1)
    metrics.quota_reserved("cq", STAMP)
    metrics.admitted_in_cohorts(["c"])
    metrics.workload_finished("cq")
    metrics.workload_evicted("cq", "Preempted", workload_uid="u", pods_ready_since=STAMP, evicted_at=LATER)
    metrics.workload_preempted("cq", "InClusterQueue")
    metrics.workload_ready("cq", STAMP, STAMP)
    metrics.eviction_released("cq", "Preempted", STAMP)
    job = ObjectMeta(name="j", namespace="ns", creation_timestamp=STAMP)
    metrics.jobs.workload_created("Job", job, Workload(metadata=ObjectMeta(creation_timestamp=LATER)))
    out: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        name = family.name + ("_total" if family.type == "counter" else "")
        labels = out.setdefault(name, set())
        for sample in family.samples:
            labels.update(k for k in sample.labels if k != "le")
    return out


def test_every_default_kueue_metric_is_served_with_its_labels_or_excepted() -> None:
    got = served()
    wrong = {}
    for name, labels in KUEUE.items():
        if name in EXCEPTIONS:
            assert name not in got, f"{name} is served now: take it out of EXCEPTIONS"
            continue
        extra = EXTRA_LABELS.get(name, ((), ""))[0]
        if got.get(name) != {*labels, *extra}:
            wrong[name] = (sorted(labels), sorted(got.get(name, ())))
    # Never observed here (no admission checks): served with no sample, so its labels are checked
    # by naming them to its histogram (prometheus_client refuses other names).
    assert "kueue_admission_checks_wait_time_seconds" in got
    wrong.pop("kueue_admission_checks_wait_time_seconds", None)
    assert not wrong, f"(Kueue's labels, served labels) differ: {wrong}"


def test_the_admission_checks_histogram_has_kueues_labels_and_no_observation() -> None:
    metrics = Metrics("leader")
    text = metrics.render().decode()
    assert "# TYPE kueue_admission_checks_wait_time_seconds histogram" in text
    assert "kueue_admission_checks_wait_time_seconds_count" not in text
    labels = dict.fromkeys(KUEUE["kueue_admission_checks_wait_time_seconds"], "x")
    metrics.evictions.checks_wait.labels(**labels)
    with pytest.raises(ValueError, match="Incorrect label names"):
        metrics.evictions.checks_wait.labels(**labels, extra="x")


def test_every_exception_has_a_reason() -> None:
    assert set(EXCEPTIONS) <= set(KUEUE)
    assert all(EXCEPTIONS.values())
    assert all(reason for _labels, reason in EXTRA_LABELS.values())


def test_the_admission_wait_histogram_has_kueues_sixteen_buckets() -> None:
    metrics = Metrics("leader")
    metrics.quota_reserved("cq", STAMP)
    text = metrics.render().decode()
    bounds = {
        line.split('le="')[1].split('"')[0]
        for line in text.splitlines()
        if line.startswith("kueue_admission_wait_time_seconds_bucket")
    }
    assert len(bounds) == 17  # 1, 2.5, 5, ... 40960 and +Inf
    assert "40960.0" in bounds
