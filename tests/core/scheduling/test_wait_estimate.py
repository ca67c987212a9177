"""The wait estimate (core.scheduling.wait_estimate): the replay, and the bounds docs/visibility.md states.

The bounds are checked by replaying twice: once with the run times the estimate assumes, once with
the run times the workloads then really have (the replay with exact run times is the scheduler's
admission order as the controller applies it, which e2e/test_visibility_estimate.py checks on the
test-bed).
"""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.core.model.clusterqueues import FlavorQuota, ResourceGroupModel
from reconciler.core.scheduling.wait_estimate import (
    HELD_FOR_EVER,
    Estimate,
    Running,
    Waiting,
    estimate_starts,
    expected_end,
    median_run_seconds,
)

GPU = "nvidia.com/gpu"


def _gpus(*flavors: tuple[str, int]) -> list[ResourceGroupModel]:
    return [ResourceGroupModel((GPU,), tuple(FlavorQuota(name, {GPU: n}) for name, n in flavors))]


def _starts(estimates: list[Estimate]) -> list[float | None]:
    return [e.start for e in estimates]


def test_fits_now_starts_now() -> None:
    got = estimate_starts(_gpus(("a", 4)), [], [Waiting({GPU: 2}, 60), Waiting({GPU: 2}, 60)], 100.0)
    assert _starts(got) == [100.0, 100.0]


def test_waits_for_the_admitted_to_end_in_queue_order() -> None:
    running = [Running({("a", GPU): 2}, 130.0), Running({("a", GPU): 2}, 160.0)]
    waiting = [Waiting({GPU: 2}, 50), Waiting({GPU: 2}, 50), Waiting({GPU: 4}, 10)]
    got = estimate_starts(_gpus(("a", 4)), running, waiting, 100.0)
    # The first at 130 (one ends), the second at 160; the third needs all four: at 210, when both end.
    assert _starts(got) == [130.0, 160.0, 210.0]


def test_best_effort_lets_a_smaller_one_pass_strict_fifo_does_not() -> None:
    running = [Running({("a", GPU): 3}, 130.0)]
    waiting = [Waiting({GPU: 4}, 50), Waiting({GPU: 1}, 50)]
    # The 1-GPU one starts now and holds its GPU until 150, so the head waits until then.
    assert _starts(estimate_starts(_gpus(("a", 4)), running, waiting, 100.0)) == [150.0, 100.0]
    strict = estimate_starts(_gpus(("a", 4)), running, waiting, 100.0, strict_fifo=True)
    assert _starts(strict) == [130.0, 180.0]  # behind the head, which holds all four until 180


def test_flavors_are_tried_in_order() -> None:
    running = [Running({("a", GPU): 2}, 200.0)]
    got = estimate_starts(
        _gpus(("a", 2), ("b", 1)), running, [Waiting({GPU: 1}, 10), Waiting({GPU: 2}, 10)], 0.0
    )
    # The 1-GPU workload fits b now; the 2-GPU one only fits a, once the running one ends.
    assert _starts(got) == [0.0, 200.0]


def test_unknown_run_times_hold_quota_for_ever() -> None:
    running = [Running({("a", GPU): 4}, None)]
    (got,) = estimate_starts(_gpus(("a", 4)), running, [Waiting({GPU: 1}, 10)], 0.0)
    assert got == Estimate(None, HELD_FOR_EVER)
    # A pending workload without a run time holds what it takes for ever too.
    got2 = estimate_starts(_gpus(("a", 4)), [], [Waiting({GPU: 4}, None), Waiting({GPU: 1}, 5)], 0.0)
    assert _starts(got2) == [0.0, None]


def test_never_fitting_names_the_resource() -> None:
    groups = _gpus(("a", 2), ("b", 1))
    got = estimate_starts(
        groups, [], [Waiting({GPU: 3}, 1), Waiting({"cpu": 1}, 1), Waiting({GPU: 1}, 1)], 0.0
    )
    assert got[0].start is None
    assert "more nvidia.com/gpu than any flavor's nominal quota" in got[0].why_unknown
    assert got[1].start is None
    assert "cpu, for which the ClusterQueue has no quota" in got[1].why_unknown
    assert got[2].start == 0.0
    strict = estimate_starts(groups, [], [Waiting({GPU: 3}, 1), Waiting({GPU: 1}, 1)], 0.0, strict_fifo=True)
    assert strict[1].start is None
    assert "waits behind" in strict[1].why_unknown


def test_resources_of_one_group_share_a_flavor() -> None:
    groups = [
        ResourceGroupModel(
            ("cpu", GPU), (FlavorQuota("small", {"cpu": 8, GPU: 0}), FlavorQuota("big", {"cpu": 8, GPU: 2}))
        )
    ]
    running = [Running({("big", "cpu"): 8}, 50.0)]
    (got,) = estimate_starts(groups, running, [Waiting({"cpu": 1, GPU: 1}, 10)], 0.0)
    assert got.start == 50.0  # not on "small" (no GPU there), and "big" has no CPU free until 50


def test_the_limit_is_said() -> None:
    got = estimate_starts(_gpus(("a", 1)), [], [Waiting({GPU: 1}, 10)] * 3, 0.0, limit=2)
    assert _starts(got) == [0.0, 10.0, None]
    assert "more than 2 workloads ahead" in got[2].why_unknown


def test_expected_end_and_median() -> None:
    assert expected_end(100.0, 400.0, 30.0, 200.0) == 400.0  # the maximum execution time first
    assert expected_end(100.0, None, 30.0, 110.0) == 130.0
    assert expected_end(100.0, None, 30.0, 500.0) == 500.0  # older than the median: ends now
    assert expected_end(100.0, None, None, 110.0) is None
    assert median_run_seconds([]) is None
    assert median_run_seconds([10.0, 40.0, 20.0]) == 20.0


# --- the bounds docs/visibility.md states -------------------------------------------------------

_AMOUNT = st.integers(min_value=1, max_value=4)
_SECONDS = st.integers(min_value=1, max_value=100)


@st.composite
def _scenario(draw: st.DrawFn) -> tuple[list[tuple[int, int, int]], list[tuple[int, int, int]]]:
    """Admitted (gpus, assumed remaining, real remaining <= assumed) and pending (gpus, assumed
    run, real run <= assumed) on one 4-GPU flavor."""

    def item() -> tuple[int, int, int]:
        assumed = draw(_SECONDS)
        return draw(_AMOUNT), assumed, draw(st.integers(min_value=1, max_value=assumed))

    running = [item() for _ in range(draw(st.integers(0, 4)))]
    total = 0
    kept = []
    for gpus, assumed, real in running:  # the admitted fit the quota
        if total + gpus <= 4:
            kept.append((gpus, assumed, real))
            total += gpus
    return kept, [item() for _ in range(draw(st.integers(1, 6)))]


def _replay(
    scenario: tuple[list[tuple[int, int, int]], list[tuple[int, int, int]]], which: int, strict: bool
) -> list[float | None]:
    running = [Running({("a", GPU): g}, float(times[which - 1])) for g, *times in scenario[0]]
    waiting = [Waiting({GPU: g}, float(times[which - 1])) for g, *times in scenario[1]]
    return _starts(estimate_starts(_gpus(("a", 4)), running, waiting, 0.0, strict_fifo=strict))


@settings(max_examples=300, deadline=None)
@given(_scenario())
def test_strict_fifo_upper_bound_when_nothing_runs_longer_than_assumed(
    scenario: tuple[list[tuple[int, int, int]], list[tuple[int, int, int]]],
) -> None:
    """StrictFIFO, one flavor: when no workload runs longer than assumed (a maximum execution time
    is such a bound), each real start is at or before its estimate."""
    estimated = _replay(scenario, 1, strict=True)
    real = _replay(scenario, 2, strict=True)
    for est, got in zip(estimated, real, strict=True):
        assert est is not None
        assert got is not None
        assert got <= est


@settings(max_examples=300, deadline=None)
@given(_scenario(), st.integers(min_value=0, max_value=50))
def test_strict_fifo_late_by_at_most_the_sum_of_overruns(
    scenario: tuple[list[tuple[int, int, int]], list[tuple[int, int, int]]], late: int
) -> None:
    """StrictFIFO, one flavor: when every workload runs between 0 and ``late`` seconds longer than
    assumed, the one at position k (from 0) starts no earlier than its estimate and at most
    (k + 1) * late after it."""
    running, pending = scenario

    def overrun(items: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
        # A drawn overrun in [0, late] per workload (from the drawn real time's share of the assumed).
        return [(g, assumed, assumed + real * late // assumed) for g, assumed, real in items]

    longer = (overrun(running), overrun(pending))
    estimated = _replay(longer, 1, strict=True)
    real = _replay(longer, 2, strict=True)
    for k, (est, got) in enumerate(zip(estimated, real, strict=True)):
        assert est is not None
        assert got is not None
        assert est <= got <= est + (k + 1) * late


def test_best_effort_is_no_bound_a_shorter_run_can_delay_a_start() -> None:
    """BestEffortFIFO: a workload ending early lets a smaller one behind pass, which can delay the
    head past its estimate (Graham's anomaly), so the docs state no bound for it."""
    waiting = [Waiting({GPU: 2}, 10), Waiting({GPU: 1}, 100)]
    assumed = [Running({("a", GPU): 1}, 10.0), Running({("a", GPU): 1}, 10.0)]
    real = [Running({("a", GPU): 1}, 5.0), Running({("a", GPU): 1}, 10.0)]
    assert _starts(estimate_starts(_gpus(("a", 2)), assumed, waiting, 0.0)) == [10.0, 20.0]
    assert _starts(estimate_starts(_gpus(("a", 2)), real, waiting, 0.0)) == [105.0, 5.0]


def _naive(
    groups: list[ResourceGroupModel], running: list[Running], waiting: list[Waiting], strict: bool
) -> list[float | None]:
    """The replay written plainly (every workload tried at every expected end), to compare with
    the one that skips requests already found not to fit in a walk."""
    free = {(f.name, r): n for g in groups for f in g.flavors for r, n in f.nominal.items()}
    ends: list[tuple[float, Mapping[tuple[str, str], int]]] = [
        (r.ends_at, r.usage) for r in running if r.ends_at is not None
    ]
    for r in running:
        for fr, n in r.usage.items():
            free[fr] -= n
    now, starts = 0.0, dict[int, float]()
    queue = list(range(len(waiting)))
    while queue:
        for index in list(queue):
            wanted = waiting[index].requests
            fits = [f for f in groups[0].flavors if all(free[(f.name, r)] >= a for r, a in wanted.items())]
            if not fits:
                if strict:
                    break
                continue
            queue.remove(index)
            starts[index] = now
            taken = {(fits[0].name, r): a for r, a in wanted.items()}
            for fr, n in taken.items():
                free[fr] -= n
            ends.append((now + (waiting[index].run_seconds or 0.0), taken))
        later = [e for e in ends if e[0] > now]
        if queue and not later:
            break
        now = min(e[0] for e in later) if later else now
        for end, usage in [e for e in ends if e[0] <= now]:
            ends.remove((end, usage))
            for fr, n in usage.items():
                free[fr] += n
    return [starts.get(i) for i in range(len(waiting))]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 3), st.integers(0, 2), st.integers(1, 30)), max_size=6),
    st.lists(st.tuples(st.integers(1, 3), st.integers(0, 2), st.integers(1, 30)), min_size=1, max_size=8),
    st.booleans(),
)
def test_the_replay_is_the_plain_replay(
    running: list[tuple[int, int, int]], pending: list[tuple[int, int, int]], strict: bool
) -> None:
    """Two flavors of GPUs and CPUs, requests of several sizes: the same starts as the plain replay."""
    groups = [
        ResourceGroupModel(
            (GPU, "cpu"), (FlavorQuota("a", {GPU: 3, "cpu": 3}), FlavorQuota("b", {GPU: 3, "cpu": 3}))
        )
    ]
    admitted, used = [], {("a", GPU): 0, ("a", "cpu"): 0}
    for gpus, cpus, end in running:  # all on flavor a, within its quota
        if used[("a", GPU)] + gpus <= 3 and used[("a", "cpu")] + cpus <= 3:
            used = {("a", GPU): used[("a", GPU)] + gpus, ("a", "cpu"): used[("a", "cpu")] + cpus}
            admitted.append(Running({("a", GPU): gpus, ("a", "cpu"): cpus}, float(end)))
    waiting = [Waiting({GPU: g, "cpu": c}, float(t)) for g, c, t in pending]
    got = _starts(estimate_starts(groups, admitted, waiting, 0.0, strict_fifo=strict))
    assert got == _naive(groups, admitted, waiting, strict)
