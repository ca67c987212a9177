"""borrowWithinCohort: a borrowing ClusterQueue preempts lower priorities elsewhere in its cohort."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.api import ClusterQueue
from reconciler.core.engine import Engine
from reconciler.core.model.clusterqueues import InvalidClusterQueueError, compile_cluster_queue
from reconciler.core.scheduling.preemption import (
    IN_COHORT_RECLAIM_WHILE_BORROWING,
    IN_COHORT_RECLAMATION,
    preemption_message,
)
from reconciler.core.scheduling.scheduler import Admit, Pending, Preempt
from tests.support.builders import cluster_queue_body, decode
from tests.support.preemption_engine import GPU, engine, gpu_job, of_type

BORROW = {"reclaimWithinCohort": "LowerPriority", "borrowWithinCohort": {"policy": "LowerPriority"}}


def pool(preemption: dict[str, Any] | None, b_limit: int | None = None) -> Engine:
    """a (1 GPU), b (1 GPU), c (2 GPUs, idle) share cohort pool; b runs 3 low-priority 1-GPU jobs."""
    b: dict[str, Any] = {"cohort": "pool"}
    if b_limit is not None:
        b["limits"] = {("t4", GPU): {"borrowingLimit": b_limit}}
    a: dict[str, Any] = {"cohort": "pool"}
    if preemption is not None:
        a["preemption"] = preemption
    state = engine(("a", 1, a), ("b", 1, b), ("c", 2, {"cohort": "pool"}))
    for n in range(3):
        state.add_workload(gpu_job(f"b{n}", queue="lq-b", priority=n, created=f"2026-01-01T00:00:0{n}Z"))
    assert len(of_type(state.schedule(), Admit)) == 3
    return state


def test_a_borrowing_preemptor_takes_from_lower_priorities_while_borrowing() -> None:
    state = pool(BORROW)
    state.add_workload(gpu_job("big", queue="lq-a", gpus=3, priority=10))
    decisions = state.schedule()
    (preempt,) = of_type(decisions, Preempt)
    # Lowest priority first; b keeps its nominal GPU.
    assert sorted((t.key[1], t.reason) for t in preempt.targets) == [
        ("b0", IN_COHORT_RECLAIM_WHILE_BORROWING),
        ("b1", IN_COHORT_RECLAIM_WHILE_BORROWING),
    ]
    (pending,) = of_type(decisions, Pending)
    assert pending.message.endswith("Pending the preemption of 2 workload(s)")
    for target in preempt.targets:
        state.release(target.key)
    assert [d.key[1] for d in of_type(state.schedule(), Admit)] == ["big"]


def test_without_borrow_within_cohort_a_borrowing_preemptor_preempts_nothing() -> None:
    state = pool({"reclaimWithinCohort": "LowerPriority"})
    state.add_workload(gpu_job("big", queue="lq-a", gpus=3, priority=10))
    assert not of_type(state.schedule(), Preempt)


def test_max_priority_threshold_protects_priorities_above_it() -> None:
    threshold = {**BORROW, "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 0}}
    state = pool(threshold)
    state.add_workload(gpu_job("big", queue="lq-a", gpus=3, priority=10))
    assert not of_type(state.schedule(), Preempt)  # only b0 (priority 0) may go: not enough


def test_equal_or_higher_priorities_are_never_taken_while_borrowing() -> None:
    state = pool(BORROW)
    state.add_workload(gpu_job("big", queue="lq-a", gpus=3, priority=1))
    assert not of_type(state.schedule(), Preempt)  # only b0 is lower: not enough


def test_within_its_nominal_quota_a_queue_reclaims_without_borrow_within_cohort() -> None:
    # b's job fits in b's nominal quota: it takes back what a borrowed, whatever the priorities.
    state = engine(
        ("a", 1, {"cohort": "pool"}),
        ("b", 1, {"cohort": "pool", "preemption": {"reclaimWithinCohort": "Any"}}),
    )
    state.add_workload(gpu_job("a1", queue="lq-a", priority=5))
    state.add_workload(gpu_job("a2", queue="lq-a", priority=5))
    assert len(of_type(state.schedule(), Admit)) == 2
    state.add_workload(gpu_job("b1", queue="lq-b", priority=0))
    (preempt,) = of_type(state.schedule(), Preempt)
    assert [(t.key[1], t.reason) for t in preempt.targets] == [("a2", IN_COHORT_RECLAMATION)]


def test_the_message_names_the_reclaim_while_borrowing() -> None:
    message = preemption_message("u", "j", IN_COHORT_RECLAIM_WHILE_BORROWING, "/pool/a", "/pool/b")
    assert "due to reclamation within the cohort while borrowing; preemptor path: /pool/a" in message


def test_borrow_within_cohort_needs_reclaim_within_cohort() -> None:
    body = cluster_queue_body("a", [("t4", {GPU: 1})], cohort="pool")
    body["spec"]["preemption"] = {"borrowWithinCohort": {"policy": "LowerPriority"}}
    with pytest.raises(InvalidClusterQueueError, match=r"^spec\.preemption: .*reclaimWithinCohort=Never"):
        compile_cluster_queue(decode(body, ClusterQueue))
    body["spec"]["preemption"] = {"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "Always"}}
    with pytest.raises(InvalidClusterQueueError, match=r"borrowWithinCohort\.policy: 'Always'"):
        compile_cluster_queue(decode(body, ClusterQueue))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.sampled_from("abc"), st.integers(0, 3), st.integers(1, 3)), min_size=1, max_size=20
    ),
    st.sampled_from([None, 0, 1, 2]),
    st.sampled_from([None, 1, 2]),
)
def test_never_preempts_equal_or_higher_priority_nor_exceeds_nominal_plus_borrowing(
    arrivals: list[tuple[str, int, int]], threshold: int | None, a_borrowing: int | None
) -> None:
    borrow: dict[str, Any] = {"policy": "LowerPriority"}
    if threshold is not None:
        borrow["maxPriorityThreshold"] = threshold
    preemption = {"reclaimWithinCohort": "LowerPriority", "borrowWithinCohort": borrow}
    a: dict[str, Any] = {"cohort": "pool", "preemption": dict(preemption)}
    if a_borrowing is not None:
        a["limits"] = {("t4", GPU): {"borrowingLimit": a_borrowing}}
    nominal = {"a": 1, "b": 2, "c": 2}
    state = engine(
        ("a", nominal["a"], a),
        ("b", nominal["b"], {"cohort": "pool", "preemption": dict(preemption)}),
        ("c", nominal["c"], {"cohort": "pool"}),
    )
    priority_of: dict[str, int] = {}
    for n, (queue, priority, size) in enumerate(arrivals):
        name = f"{queue}{n}"
        priority_of[name] = priority
        state.add_workload(
            gpu_job(
                name, queue=f"lq-{queue}", gpus=size, priority=priority, created=f"2026-01-01T00:00:{n:02d}Z"
            )
        )
        for decision in state.schedule():
            if isinstance(decision, Preempt):
                for target in decision.targets:
                    assert priority_of[target.key[1]] < priority_of[decision.key[1]]
                    if target.reason == IN_COHORT_RECLAIM_WHILE_BORROWING and threshold is not None:
                        assert priority_of[target.key[1]] <= threshold
                    state.remove_workload(target.key)
        used = {q: state.ledger.used(q, ("t4", GPU)) for q in nominal}
        assert sum(used.values()) <= sum(nominal.values())
        if a_borrowing is not None:
            assert used["a"] <= nominal["a"] + a_borrowing
