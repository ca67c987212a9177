"""bench/kueue_perf_summary: reading Kueue's runner summary, its Workload states, its generator config
and range spec; the checker's command stats and verdict; the side-by-side table."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import yaml

from bench.kueue_perf_summary import (
    Run,
    Verdict,
    checker_verdict,
    cmd_stats_yaml,
    expected_workloads,
    generation_lines,
    generation_spans,
    go_duration_ms,
    go_time,
    parse_range,
    parse_summary,
    side_by_side,
    with_cohorts,
    workload_counts,
)

# As the runner writes it (sigs.k8s.io/yaml of recorder.Summary), figures made up.
SUMMARY = """\
clusterQueueClasses:
  cq:
    cpuAverageUsage: 67000
    cpuUsed: 20100000000
    firstEventTime: "2026-12-07T12:00:00.123456789Z"
    lastEventTime: "2026-12-07T12:05:00.123999999Z"
    nominalQuota: 600000
droppedWorkloadEvents: 3
workloadClasses:
  large:
    averageTimeToAdmissionMs: 16501
    averageTimeToFinishMs: 17800
    count: 1500
    totalEvictions: 12
  small:
    averageTimeToAdmissionMs: 215468
    averageTimeToFinishMs: 215900
    count: 10500
    totalEvictions: 0
"""

RANGE = """\
cmd:
  maxWallMs: 425_000
clusterQueueClassesMinUsage:
  cq: 50 #%
wlClassesMaxAvgTimeToAdmissionMs:
  large: 23_000
  small: 260_000
"""

BASELINE_GENERATOR = """\
cohorts:
  - className: cohort
    count: 5
    queuesSets:
    - className: cq
      count: 6
      workloadsSets:
      - count: 350
        workloads: [{className: small}]
      - count: 100
        workloads: [{className: medium}]
      - count: 50
        workloads: [{className: large}]
"""


def test_go_times_with_nanoseconds_and_zones_are_read() -> None:
    assert go_time("2026-12-07T12:00:00.123456789Z") == datetime(2026, 12, 7, 12, 0, 0, 123456, UTC)
    assert go_time("2026-12-07T13:00:00+01:00") == datetime(2026, 12, 7, 12, 0, 0, tzinfo=UTC)
    with pytest.raises(ValueError, match="RFC 3339"):
        go_time("yesterday")


def test_the_summary_gives_classes_and_the_checkers_usage() -> None:
    summary = parse_summary(SUMMARY)
    assert summary.dropped_events == 3
    assert summary.classes["large"].admission_ms == 16501
    assert summary.classes["large"].evictions == 12
    assert summary.classes["small"].count == 10500
    cq = summary.queues["cq"]
    # the checker: cpuUsed * 100 / (nominalQuota * whole ms between the first and last event)
    assert cq.usage_percent() == pytest.approx(20_100_000_000 * 100 / (600_000 * 300_000))


def test_usage_of_a_class_never_observed_is_zero() -> None:
    doc = yaml.safe_load(SUMMARY)
    doc["clusterQueueClasses"]["cq"]["lastEventTime"] = doc["clusterQueueClasses"]["cq"]["firstEventTime"]
    assert parse_summary(yaml.safe_dump(doc)).queues["cq"].usage_percent() == 0.0


def test_workload_states_count_admitted_and_finished() -> None:
    text = (
        "id,class name,namespace,name,ms to admitted,ms to finish,num evictions\n"
        "0,small,cq-0-0-cohort-0,small-0-0-0,120,330,0\n"
        "1,large,cq-0-0-cohort-0,large-2-0-0,5000,0,1\n"
        "2,large,cq-0-0-cohort-0,large-2-1-0,0,0,0\n"
    )
    counts = workload_counts(text)
    assert (counts.seen, counts.admitted, counts.finished) == (3, 2, 1)
    assert counts.admitted_means == {"large": (1, 5000.0), "small": (1, 120.0)}


def test_the_generator_of_baseline_makes_15000_workloads() -> None:
    assert expected_workloads(yaml.safe_load(BASELINE_GENERATOR)) == 5 * 6 * (350 + 100 + 50)


def test_the_range_spec_reads_underscored_numbers() -> None:
    limits = parse_range(RANGE)
    assert limits.max_wall_ms == 425_000
    assert limits.min_usage == {"cq": 50.0}
    assert limits.max_admission_ms == {"large": 23_000, "small": 260_000}


def test_cmd_stats_have_the_fields_of_kueues_cmdstats() -> None:
    assert yaml.safe_load(cmd_stats_yaml(351_116, 9_000, 1_500, 140_000)) == {
        "wallMs": 351_116,
        "userMs": 9_000,
        "sysMs": 1_500,
        "maxrss": 140_000,
    }


# go test -v streams a subtest's log lines after its === RUN line; the --- FAIL lines come at the end.
CHECKER_FAIL = """\
=== RUN   TestScalability
=== RUN   TestScalability/CommandStats
    checker_test.go:82: Wall time 500000ms is greater than maximum expected 425000ms
=== RUN   TestScalability/ClusterQueueClasses
=== RUN   TestScalability/ClusterQueueClasses/cq
=== RUN   TestScalability/WorkloadClasses
=== RUN   TestScalability/WorkloadClasses/large
    checker_test.go:112: Average wait for admission 30000ms is more then expected 23000ms
=== RUN   TestScalability/WorkloadClasses/small
--- FAIL: TestScalability (0.00s)
    --- FAIL: TestScalability/CommandStats (0.00s)
    --- PASS: TestScalability/ClusterQueueClasses (0.00s)
        --- PASS: TestScalability/ClusterQueueClasses/cq (0.00s)
    --- FAIL: TestScalability/WorkloadClasses (0.00s)
        --- FAIL: TestScalability/WorkloadClasses/large (0.00s)
        --- PASS: TestScalability/WorkloadClasses/small (0.00s)
FAIL
"""


def test_a_failing_checker_names_each_failed_check_once_with_its_message() -> None:
    verdict = checker_verdict(CHECKER_FAIL, 1)
    assert not verdict.passed
    assert verdict.failures == (
        "TestScalability/CommandStats: Wall time 500000ms is greater than maximum expected 425000ms",
        "TestScalability/WorkloadClasses/large: "
        "Average wait for admission 30000ms is more then expected 23000ms",
    )


def test_a_checker_that_could_not_run_says_why() -> None:
    verdict = checker_verdict("checker_test.go:46: Unable to read summary: no such file\nFAIL\n", 1)
    assert not verdict.passed
    assert verdict.failures
    assert checker_verdict("PASS\nok\n", 0) == Verdict(True, ())


def _run(manager: str, wall_ms: int, large_ms: int, passed: bool) -> Run:
    doc = yaml.safe_load(SUMMARY)
    doc["workloadClasses"]["large"]["averageTimeToAdmissionMs"] = large_ms
    return Run(
        manager=manager,
        config="baseline",
        wall_ms=wall_ms,
        cpu_s=10.0,
        rss_mib=100.0,
        summary=parse_summary(yaml.safe_dump(doc)),
        counts=None,
        verdict=Verdict(passed, () if passed else ("x",)),
    )


def test_side_by_side_shows_medians_ranges_limits_and_verdicts() -> None:
    runs = [
        _run("ours", 300_000, 10_000, True),
        _run("kueue-tuned", 400_000, 20_000, False),
        _run("ours", 310_000, 12_000, True),
        _run("ours", 330_000, 30_000, True),
    ]
    lines = side_by_side(runs, parse_range(RANGE), ["ours", "kueue-tuned"])
    header, *rows = lines
    assert "ours (n=3)" in header
    assert "kueue-tuned (n=1)" in header
    wall = next(r for r in rows if r.startswith("wall (s)"))
    assert "310.0 (300.0-330.0)" in wall
    assert "400.0" in wall
    assert "<= 425" in wall
    large = next(r for r in rows if r.startswith("large: mean time to admission"))
    assert "12.0 (10.0-30.0)" in large
    assert "20.0" in large
    assert "<= 23" in large
    usage = next(r for r in rows if r.startswith("ClusterQueue class cq"))
    assert ">= 50" in usage
    verdicts = rows[-1]
    assert "PASS PASS PASS" in verdicts
    assert "FAIL" in verdicts


RUNNER_LOG = """\
2026-12-07T12:34:08.67327452Z\tINFO\tgenerate workload group\tgenerator/generator.go:137\tStart generation\t\
{"namespace": "cq-0-2-cohort-0", "localQueue": "cq-0-2-cohort-0", "delay": "1.2s"}
2026-12-07T12:34:08.673534846Z\tINFO\tgenerate workload group\tgenerator/generator.go:137\tStart generation\t\
{"namespace": "cq-0-2-cohort-0", "localQueue": "cq-0-2-cohort-0", "delay": "100ms"}
2026-12-07T12:34:10.0Z\tERROR\tcontroller/controller.go:494\tReconciler error\t{"controller": "workload"}
2026-12-07T12:35:18.673534846Z\tINFO\tgenerate workload group\tgenerator/generator.go:190\tEnd generation\t\
{"namespace": "cq-0-2-cohort-0", "localQueue": "cq-0-2-cohort-0", "delay": "100ms"}
2026-12-07T12:37:48.67327452Z\tINFO\tgenerate workload group\tgenerator/generator.go:190\tEnd generation\t\
{"namespace": "cq-0-2-cohort-0", "localQueue": "cq-0-2-cohort-0", "delay": "1.2s"}
"""


def test_go_durations_as_the_generator_logs_them() -> None:
    assert [go_duration_ms(d) for d in ("100ms", "1.2s", "500ms", "1m0s")] == [100, 1200, 500, 60_000]


def test_generation_spans_and_the_time_creates_waited() -> None:
    assert generation_spans(RUNNER_LOG) == {"100ms": [70.0], "1.2s": [220.0]}
    generator = yaml.safe_load(BASELINE_GENERATOR)
    for wl_set, interval in zip(
        generator["cohorts"][0]["queuesSets"][0]["workloadsSets"], (100, 500, 1200), strict=True
    ):
        wl_set["creationIntervalMs"] = interval
    lines = generation_lines(RUNNER_LOG, generator)
    # 350 every 100 ms asks 35 s; 70 s taken: 100 ms more per create. 50 every 1.2 s: 60 s, 220 s: 3200 ms.
    assert lines[0].startswith("1 sets of 350 every 100ms: asked 35 s, took 70 s")
    assert lines[0].endswith("100 ms per create beyond the interval")
    assert "50 every 1.2s: asked 60 s, took 220 s" in lines[1]
    assert lines[1].endswith("3200 ms per create beyond the interval")


def test_with_cohorts_changes_only_the_cohort_count() -> None:
    generator = yaml.safe_load(BASELINE_GENERATOR)
    one = with_cohorts(generator, 1)
    assert expected_workloads(one) == 6 * (350 + 100 + 50)
    assert one["cohorts"][0]["queuesSets"] == generator["cohorts"][0]["queuesSets"]
    assert generator["cohorts"][0]["count"] == 5  # the input is left as it was
    with pytest.raises(ValueError, match="at least 1"):
        with_cohorts(generator, 0)
