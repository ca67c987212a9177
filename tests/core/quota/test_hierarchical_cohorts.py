"""Cohort objects: a tree of cohorts whose own quotas and limits compose as Kueue's hierarchical cohorts."""

from __future__ import annotations

import pytest

from reconciler.core.engine import Engine
from reconciler.core.model.clusterqueues import InvalidClusterQueueError
from reconciler.core.quota.cohorts import compile_cohort
from reconciler.core.scheduling.preemption import IN_COHORT_RECLAMATION, cluster_queue_path
from reconciler.core.scheduling.scheduler import Admit, Pending, Preempt
from tests.support.cohort_engine import cohort, submit, with_cohorts
from tests.support.preemption_engine import GPU, engine, of_type


def admitted(state: Engine) -> list[str]:
    return sorted(d.key[1] for d in state.schedule() if isinstance(d, Admit))


def test_a_cohorts_own_quota_is_shared_by_its_members() -> None:
    state = with_cohorts(engine(("a", 0, {"cohort": "org"})), cohort("org", 2))
    submit(state, "a", "a1", "a2", "a3")
    assert admitted(state) == ["a1", "a2"]
    assert state.cache.capacity.potential(("cq", "a"), ("t4", GPU)) == 2


def test_quota_flows_down_the_tree_within_borrowing_limits() -> None:
    state = with_cohorts(
        engine(("a", 0, {"cohort": "team"}), ("b", 0, {"cohort": "org"})),
        cohort("org", 3),
        cohort("team", 1, parent="org", borrowingLimit=1),
    )
    submit(state, "a", "a1", "a2", "a3")
    assert admitted(state) == ["a1", "a2"]  # team's own GPU + 1 borrowed from org
    submit(state, "b", "b1", "b2", "b3")
    assert admitted(state) == ["b1", "b2"]  # what org has left


def test_a_cohorts_lending_limit_keeps_its_quota_in_its_subtree() -> None:
    state = with_cohorts(
        engine(("a", 0, {"cohort": "team"}), ("b", 0, {"cohort": "org"})),
        cohort("org", 0),
        cohort("team", 2, parent="org", lendingLimit=0),
    )
    submit(state, "b", "b1")
    (pending,) = state.schedule()
    assert isinstance(pending, Pending)
    submit(state, "a", "a1", "a2")
    assert admitted(state) == ["a1", "a2"]


def test_a_change_to_a_cohort_wakes_its_tree() -> None:
    state = with_cohorts(engine(("a", 0, {"cohort": "org"})), cohort("org", 0))
    submit(state, "a", "a1")
    assert admitted(state) == []
    with_cohorts(state, cohort("org", 1))
    assert admitted(state) == ["a1"]
    state.delete_cohort("org")
    assert state.cache.capacity.available(("cq", "a"), ("t4", GPU)) == -1


def test_paths_name_every_cohort_from_the_root() -> None:
    state = with_cohorts(engine(("a", 0, {"cohort": "team"})), cohort("org"), cohort("team", parent="org"))
    assert cluster_queue_path(state.cache, "a") == "/org/team/a"
    assert state.cache.cohort_members("a") == {"a"}


def test_a_cycle_does_not_hang() -> None:
    state = with_cohorts(engine(("a", 1, {"cohort": "x"})), cohort("x", parent="y"), cohort("y", parent="x"))
    assert state.cache.capacity.in_cycle("a")
    submit(state, "a", "a1")
    (decision,) = state.schedule()  # left out, as in Kueue; told why (see test_cohort_cycles.py)
    assert isinstance(decision, Pending)
    assert decision.reason == "Pending"
    with_cohorts(state, cohort("y"))  # the cycle is broken: the tree's queues are tried again
    assert admitted(state) == ["a1"]


def test_the_subtree_holding_the_request_reclaims_regardless_of_priority() -> None:
    # team1 owns 2 GPUs; b (in team2) borrowed them through org. a, in team1, has the better claim.
    state = with_cohorts(
        engine(
            ("a", 0, {"cohort": "team1", "preemption": {"reclaimWithinCohort": "Any"}}),
            ("b", 0, {"cohort": "team2"}),
        ),
        cohort("org", 0),
        cohort("team1", 2, parent="org"),
        cohort("team2", 0, parent="org"),
    )
    submit(state, "b", "b1", "b2", priority=100)
    assert admitted(state) == ["b1", "b2"]
    submit(state, "a", "a1", gpus=2, priority=0)
    (preempt,) = of_type(state.schedule(), Preempt)
    assert sorted((t.key[1], t.reason) for t in preempt.targets) == [
        ("b1", IN_COHORT_RECLAMATION),
        ("b2", IN_COHORT_RECLAMATION),
    ]


def test_limits_on_a_root_cohort_are_rejected_with_the_field() -> None:
    with pytest.raises(
        InvalidClusterQueueError, match=r"lendingLimit: must be nil when parent is empty; set spec.parentName"
    ):
        compile_cohort(cohort("org", 2, lendingLimit=1))


def test_the_head_borrowing_nearer_its_own_subtree_goes_first() -> None:
    # team1 holds the GPU: a (in team1) borrows one level up, b (directly in org) two levels.
    state = with_cohorts(
        engine(("a", 0, {"cohort": "team1"}), ("b", 0, {"cohort": "org"})),
        cohort("org", 0),
        cohort("team1", 1, parent="org"),
    )
    submit(state, "b", "b1", priority=10)
    submit(state, "a", "a1", priority=0)
    assert admitted(state) == ["a1"]
