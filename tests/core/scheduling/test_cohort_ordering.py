"""ClusterQueues of a cohort take turns as in Kueue's cycle: heads not borrowing first, then
higher priority, then the older queue-order timestamp."""

from __future__ import annotations

from reconciler.core.engine import Engine
from reconciler.core.scheduling.scheduler import Admit, Pending
from tests.support.preemption_engine import engine, gpu_job


def admitted(state: Engine) -> list[str]:
    return [d.key[1] for d in state.schedule() if isinstance(d, Admit)]


def test_a_head_within_its_nominal_quota_goes_before_a_borrowing_one() -> None:
    state = engine(("a", 0, {"cohort": "pool"}), ("b", 1, {"cohort": "pool"}))
    state.add_workload(gpu_job("a1", queue="lq-a", priority=10, created="2026-01-01T00:00:00Z"))
    state.add_workload(gpu_job("b1", queue="lq-b", priority=0, created="2026-01-01T00:01:00Z"))
    assert admitted(state) == ["b1"]  # a1 would borrow b's GPU: b's own head goes first


def test_among_borrowing_heads_the_higher_priority_goes_first() -> None:
    state = engine(("a", 0, {"cohort": "pool"}), ("b", 0, {"cohort": "pool"}), ("c", 1, {"cohort": "pool"}))
    state.add_workload(gpu_job("a1", queue="lq-a", priority=0, created="2026-01-01T00:00:00Z"))
    state.add_workload(gpu_job("b1", queue="lq-b", priority=10, created="2026-01-01T00:01:00Z"))
    assert admitted(state) == ["b1"]


def test_at_equal_priority_the_older_head_goes_first() -> None:
    state = engine(("a", 0, {"cohort": "pool"}), ("b", 0, {"cohort": "pool"}), ("c", 2, {"cohort": "pool"}))
    state.add_workload(gpu_job("a1", queue="lq-a", created="2026-01-01T00:02:00Z"))
    state.add_workload(gpu_job("a2", queue="lq-a", created="2026-01-01T00:03:00Z"))
    state.add_workload(gpu_job("b1", queue="lq-b", created="2026-01-01T00:01:00Z"))
    state.add_workload(gpu_job("b2", queue="lq-b", created="2026-01-01T00:04:00Z"))
    # Round one: b1 (older) then a1; the two GPUs of c are then spent.
    assert admitted(state) == ["b1", "a1"]


def test_queues_keep_taking_turns_until_the_quota_is_spent() -> None:
    state = engine(("a", 1, {"cohort": "pool"}), ("b", 1, {"cohort": "pool"}), ("c", 2, {"cohort": "pool"}))
    for n in range(3):
        state.add_workload(gpu_job(f"a{n}", queue="lq-a", created=f"2026-01-01T00:0{n}:00Z"))
        state.add_workload(gpu_job(f"b{n}", queue="lq-b", created=f"2026-01-01T00:0{n}:30Z"))
    # Each within its own GPU first, then the two idle GPUs of c, oldest first.
    assert admitted(state) == ["a0", "b0", "a1", "b1"]


def test_an_overtaken_head_is_told_it_no_longer_fits_then_why() -> None:
    state = engine(("a", 0, {"cohort": "pool"}), ("b", 1, {"cohort": "pool"}))
    state.add_workload(gpu_job("a1", queue="lq-a", priority=10, created="2026-01-01T00:00:00Z"))
    state.add_workload(gpu_job("b1", queue="lq-b", priority=0, created="2026-01-01T00:01:00Z"))
    messages = [(d.key[1], getattr(d, "message", "admitted")) for d in state.schedule()]
    assert messages == [
        ("b1", "admitted"),
        ("a1", "Workload no longer fits after processing another workload"),
        (
            "a1",
            "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
            "in flavor t4, 1 more needed",
        ),
    ]


def test_a_borrowing_admission_names_the_flavors_considered() -> None:
    state = engine(("a", 0, {"cohort": "pool"}), ("b", 1, {"cohort": "pool"}))
    state.add_workload(gpu_job("a1", queue="lq-a"))
    (admit,) = state.schedule()
    assert isinstance(admit, Admit)
    assert admit.considered == "main: t4(Fit;borrow=1)"
    state.add_workload(gpu_job("b1", queue="lq-b"))
    state.remove_workload(("ns", "a1"))
    (own,) = state.schedule()
    assert isinstance(own, Admit)
    assert own.considered == ""


def test_an_overtaken_parked_head_gets_its_real_verdict_back() -> None:
    state = engine(("a", 0, {"cohort": "pool"}), ("b", 1, {"cohort": "pool"}))
    state.add_workload(gpu_job("b0", queue="lq-b", created="2026-01-01T00:00:00Z"))
    state.add_workload(gpu_job("a1", queue="lq-a", priority=10, created="2026-01-01T00:01:00Z"))
    state.add_workload(gpu_job("b1", queue="lq-b", created="2026-01-01T00:02:00Z"))
    state.schedule()  # b0 runs; a1 and b1 are parked with the quota message
    state.remove_workload(("ns", "b0"))
    decisions = state.schedule()
    assert [d.key[1] for d in decisions if isinstance(d, Admit)] == ["b1"]
    a1 = [d.message for d in decisions if d.key[1] == "a1" and isinstance(d, Pending)]
    assert a1 == [
        "Workload no longer fits after processing another workload",
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
        "in flavor t4, 1 more needed",
    ]
