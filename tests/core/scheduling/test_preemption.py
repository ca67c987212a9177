"""Preemption within a ClusterQueue and reclamation within a cohort, as Kueue's classical preemption."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.core.scheduling.preemption import IN_CLUSTER_QUEUE, IN_COHORT_RECLAMATION, preemption_message
from reconciler.core.scheduling.scheduler import Admit, Pending, Preempt
from tests.support.preemption_engine import GPU, engine, gpu_job, of_type


def test_a_higher_priority_workload_preempts_a_lower_one_in_its_cluster_queue() -> None:
    state = engine(("a", 1, {"preemption": {"withinClusterQueue": "LowerPriority"}}))
    state.add_workload(gpu_job("low", priority=1))
    assert of_type(state.schedule(), Admit)
    state.add_workload(gpu_job("high", priority=10))
    decisions = state.schedule()
    (preempt,) = of_type(decisions, Preempt)
    assert [(t.key[1], t.reason) for t in preempt.targets] == [("low", IN_CLUSTER_QUEUE)]
    (pending,) = of_type(decisions, Pending)
    assert pending.message.endswith(". Pending the preemption of 1 workload(s)")
    assert state.ledger.used("a", ("t4", GPU)) == 1  # the victim keeps its quota until evicted
    assert state.schedule() == []  # asked once
    state.remove_workload(("ns", "low"))  # its eviction landed
    assert [d.key[1] for d in of_type(state.schedule(), Admit)] == ["high"]


def test_never_and_equal_priority_preempt_nothing() -> None:
    for policy in ("Never", "LowerPriority"):
        state = engine(("a", 1, {"preemption": {"withinClusterQueue": policy}}))
        state.add_workload(gpu_job("first", priority=5))
        state.schedule()
        state.add_workload(gpu_job("second", priority=5))
        assert of_type(state.schedule(), Preempt) == []


def test_lower_or_newer_equal_priority_preempts_an_equal_but_newer_one() -> None:
    state = engine(("a", 1, {"preemption": {"withinClusterQueue": "LowerOrNewerEqualPriority"}}))
    state.add_workload(gpu_job("newer", priority=5, created="2026-01-01T00:05:00Z"))
    state.schedule()
    state.add_workload(gpu_job("older", priority=5, created="2026-01-01T00:01:00Z"))
    (preempt,) = of_type(state.schedule(), Preempt)
    assert [t.key[1] for t in preempt.targets] == ["newer"]


def test_only_as_many_as_needed_newest_admitted_first() -> None:
    state = engine(("a", 2, {"preemption": {"withinClusterQueue": "LowerPriority"}}))
    state.add_workload(gpu_job("old", priority=1))
    state.schedule()
    state.add_workload(gpu_job("new", priority=1))
    state.schedule()
    state.add_workload(gpu_job("urgent", priority=9))
    (preempt,) = of_type(state.schedule(), Preempt)
    assert [t.key[1] for t in preempt.targets] == ["new"]
    assert state.ledger.used("a", ("t4", GPU)) == 2  # the trial removals were restored


def test_a_lender_reclaims_what_a_borrower_took() -> None:
    state = engine(
        ("a", 0, {"cohort": "pool"}),
        ("b", 1, {"cohort": "pool", "preemption": {"reclaimWithinCohort": "Any"}}),
    )
    state.add_workload(gpu_job("borrower", queue="lq-a", priority=100))
    assert of_type(state.schedule(), Admit)
    state.add_workload(gpu_job("owner", queue="lq-b", priority=0))
    (preempt,) = of_type(state.schedule(), Preempt)
    assert [(t.key[1], t.cluster_queue, t.reason) for t in preempt.targets] == [
        ("borrower", "a", IN_COHORT_RECLAMATION)
    ]


def test_the_victims_message_is_kueues() -> None:
    assert preemption_message("wl-uid", "job-uid", IN_CLUSTER_QUEUE, "/a", "/a") == (
        "Preempted to accommodate a workload (UID: wl-uid, JobUID: job-uid) due to prioritization in the "
        "ClusterQueue; preemptor path: /a; preemptee path: /a"
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(1, 2)), min_size=1, max_size=25),
    st.integers(1, 4),
)
def test_lower_priority_never_preempts_an_equal_or_higher_priority(
    arrivals: list[tuple[int, int]], gpus: int
) -> None:
    state = engine(("a", gpus, {"preemption": {"withinClusterQueue": "LowerPriority"}}))
    priority_of: dict[str, int] = {}
    for n, (priority, size) in enumerate(arrivals):
        name = f"j{n}"
        priority_of[name] = priority
        state.add_workload(gpu_job(name, gpus=size, priority=priority, created=f"2026-01-01T00:00:{n:02d}Z"))
        for decision in state.schedule():
            if isinstance(decision, Preempt):
                for target in decision.targets:
                    assert priority_of[target.key[1]] < priority_of[decision.key[1]]
                    state.remove_workload(target.key)  # the eviction lands
        assert state.ledger.used("a", ("t4", GPU)) <= gpus
