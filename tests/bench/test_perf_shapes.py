"""bench/perf_shapes: Kueue's performance-suite shapes and their scaling, and the runner's decisions
(finish an admitted Workload after its runtime, end an evicted one's reservation)."""

from __future__ import annotations

from typing import Any

import pytest

from bench.perf_shapes_figures import class_figures
from bench.perf_shapes_runner import Action, Tracked, UsageRecorder, finish_patch, observe, unset_patch
from bench.perf_shapes_shape import CLASS_LABEL, RUNTIME_LABEL, SHAPES, scaled, workload

Obj = dict[str, Any]


def test_unscaled_shapes_have_the_counts_of_kueues_configs() -> None:
    baseline, large = SHAPES["baseline"], SHAPES["large"]
    assert (baseline.cohorts, baseline.cluster_queues, baseline.workloads) == (5, 30, 15_000)
    assert [s.count for s in baseline.sets] == [350, 100, 50]
    assert (large.cohorts, large.cluster_queues, large.workloads) == (10, 1000, 50_000)
    assert [s.count for s in large.sets] == [35, 11, 4]


@pytest.mark.parametrize("factor", [2.0, 5.0, 10.0, 50.0])
def test_scaling_divides_the_counts_and_keeps_everything_else(factor: float) -> None:
    base = SHAPES["baseline"]
    shape = scaled(base, factor)
    assert shape.cohorts == max(1, -(-base.cohorts // int(factor)))
    assert shape.queues_per_cohort == max(1, -(-base.queues_per_cohort // int(factor)))
    for small, big in zip(shape.sets, base.sets, strict=True):
        assert small.count == max(1, -(-big.count // int(factor)))
        assert (small.cpu, small.runtime_ms, small.priority, small.interval_ms) == (
            big.cpu,
            big.runtime_ms,
            big.priority,
            big.interval_ms,
        )
    assert (shape.nominal_cpu, shape.borrowing_limit_cpu) == (20, 100)
    assert shape.workloads == shape.cluster_queues * sum(s.count for s in shape.sets)


def test_an_exact_division_keeps_the_ratio_of_the_sets() -> None:
    shape = scaled(SHAPES["baseline"], 5)
    assert [s.count for s in shape.sets] == [70, 20, 10]  # 7 : 2 : 1 as 350 : 100 : 50
    assert (shape.cohorts, shape.queues_per_cohort, shape.workloads) == (1, 2, 200)
    with pytest.raises(ValueError, match="at least 1"):
        scaled(SHAPES["baseline"], 0.5)


def test_objects_are_what_kueues_runner_creates() -> None:
    shape = scaled(SHAPES["baseline"], 5)
    objects = shape.setup_objects()
    kinds = [o["kind"] for o in objects]
    assert kinds.count("ClusterQueue") == kinds.count("LocalQueue") == kinds.count("Namespace") == 2
    assert kinds.count("Cohort") == 1
    assert kinds.count("ResourceFlavor") == 1
    cq = next(o for o in objects if o["kind"] == "ClusterQueue")
    quota = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert quota == {"name": "cpu", "nominalQuota": "20", "borrowingLimit": "100"}
    assert cq["spec"]["preemption"] == {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
    w = workload("perf-0-1", "large-2-3", shape.sets[2])
    assert w["spec"]["priority"] == 200
    assert w["spec"]["queueName"] == "perf-0-1"
    (pod_set,) = w["spec"]["podSets"]
    assert pod_set["count"] == 1
    assert pod_set["template"]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "20"}
    assert w["metadata"]["labels"] == {CLASS_LABEL: "large", RUNTIME_LABEL: "1000"}


def _wl(*conditions: tuple[str, str], rv: str = "7") -> Obj:
    return {
        "metadata": {"name": "w", "namespace": "ns", "resourceVersion": rv, "generation": 1},
        "status": {
            "conditions": [
                {
                    "type": t,
                    "status": s,
                    "reason": "R",
                    "message": "",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
                for t, s in conditions
            ],
            "admission": {"clusterQueue": "cq"},
        },
    }


def test_an_admitted_workload_is_finished_its_runtime_after_it_was_first_seen_admitted() -> None:
    t = Tracked("small", 200, sent=100.0)
    assert observe(t, _wl(("QuotaReserved", "True")), 100.5) is Action.NONE
    assert observe(t, _wl(("QuotaReserved", "True"), ("Admitted", "True")), 101.0) is Action.FINISH
    # a later version of the same admission keeps its start
    assert observe(t, _wl(("QuotaReserved", "True"), ("Admitted", "True")), 101.1) is Action.FINISH
    assert t.finish_due() == pytest.approx(101.2)
    assert t.admitted_at == 101.0
    assert observe(t, _wl(("Admitted", "True"), ("Finished", "True")), 101.3) is Action.NONE
    assert t.finished_at == 101.3


def test_an_evicted_workload_gets_its_reservation_ended_and_its_next_admission_starts_afresh() -> None:
    t = Tracked("medium", 500, sent=0.0)
    observe(t, _wl(("Admitted", "True")), 1.0)
    assert observe(t, _wl(("Admitted", "True"), ("Evicted", "True")), 1.2) is Action.UNSET
    assert observe(t, _wl(("Admitted", "False"), ("Evicted", "True")), 1.3) is Action.NONE
    assert observe(t, _wl(("Admitted", "True"), ("Evicted", "False")), 4.0) is Action.FINISH
    assert t.finish_due() == pytest.approx(4.5)
    assert (t.admitted_at, t.evictions) == (1.0, 1)
    (figures,) = class_figures([t])
    assert (figures.mean_s, figures.evictions) == (1.0, 1)


def test_the_patches_keep_the_other_conditions_and_carry_the_resource_version() -> None:
    obj = _wl(("QuotaReserved", "True"), ("Admitted", "True"), ("Evicted", "True"))
    finish = finish_patch(obj, 0.0)
    assert finish["metadata"] == {"resourceVersion": "7"}
    assert [(c["type"], c["status"]) for c in finish["status"]["conditions"]] == [
        ("QuotaReserved", "True"),
        ("Admitted", "True"),
        ("Evicted", "True"),
        ("Finished", "True"),
    ]
    unset = unset_patch(obj, 0.0)
    by_type = {c["type"]: (c["status"], c["reason"]) for c in unset["status"]["conditions"]}
    assert by_type == {
        "QuotaReserved": ("False", "Pending"),
        "Admitted": ("False", "NoReservation"),
        "Evicted": ("True", "R"),
    }
    assert unset["status"]["admission"] is None


def test_usage_is_kueues_checker_cpu_used_over_quota_times_span() -> None:
    rec = UsageRecorder()

    def cq(usage: str) -> Obj:
        flavor = {"name": "rf", "resources": [{"name": "cpu", "nominalQuota": "20"}]}
        return {
            "metadata": {"name": "a"},
            "spec": {"resourceGroups": [{"flavors": [flavor]}]},
            "status": {"flavorsUsage": [{"name": "rf", "resources": [{"name": "cpu", "total": usage}]}]},
        }

    rec.observe(cq("0"), 0.0)
    rec.observe(cq("20"), 1.0)  # 0 cpu for 1 s
    rec.observe(cq("10500m"), 3.0)  # 20 cpu for 2 s
    rec.observe(cq("0"), 4.0)  # 10.5 cpu for 1 s
    assert rec.usage_percent() == pytest.approx((20 * 2 + 10.5) * 100 / (20 * 4))
