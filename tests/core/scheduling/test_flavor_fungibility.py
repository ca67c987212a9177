"""Flavor fungibility as Kueue v0.18.1: which flavor a workload that does not fit plainly is
given, and where it preempts (whenCanBorrow, whenCanPreempt, preference)."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.api import ClusterQueue
from reconciler.core.engine import Engine
from reconciler.core.model.clusterqueues import InvalidClusterQueueError, compile_cluster_queue
from reconciler.core.model.workloads import WorkloadInfo
from reconciler.core.scheduling.fungibility import (
    FIT,
    NO_CANDIDATES,
    NO_FIT,
    PREEMPT,
    RECLAIM,
    is_preferred,
    should_try_next,
)
from reconciler.core.scheduling.scheduler import Admit, Pending, Preempt
from tests.support.builders import cluster_queue_body, decode, flavor
from tests.support.preemption_engine import GPU, gpu_job, of_type

LOW = {"withinClusterQueue": "LowerPriority"}


def state_with(fungibility: dict[str, str] | None = None, lender: int = 0) -> Engine:
    """ClusterQueue `cq`: flavors t4 then a100, one GPU each, preempting lower priorities; with
    `lender`, a cohort member `lend` holds that many a100 GPUs `cq` may borrow."""
    state = Engine()
    state.set_flavor(flavor("t4", {"gpu": "t4"}))
    state.set_flavor(flavor("a100", {"gpu": "a100"}))
    state.set_namespace("ns", {})
    extra: dict[str, Any] = {"cohort": "pool"} if lender else {}
    body = cluster_queue_body("cq", [("t4", {GPU: 1}), ("a100", {GPU: 1 if not lender else 0})], **extra)
    body["spec"]["preemption"] = dict(LOW)
    if fungibility is not None:
        body["spec"]["flavorFungibility"] = fungibility
    state.set_cluster_queue(compile_cluster_queue(decode(body, ClusterQueue)))
    state.set_local_queue("ns", "lq-a", "cq")
    if lender:
        lend = cluster_queue_body("lend", [("t4", {GPU: 0}), ("a100", {GPU: lender})], cohort="pool")
        state.set_cluster_queue(compile_cluster_queue(decode(lend, ClusterQueue)))
    return state


def admit(state: Engine, job: WorkloadInfo) -> dict[str, str]:
    state.add_workload(job)
    (admitted,) = of_type(state.schedule(), Admit)
    return {ps.name: ps.flavors[GPU] for ps in admitted.pod_sets}


def victims(decisions: list[Any]) -> list[str]:
    return [t.key[1] for p in of_type(decisions, Preempt) for t in p.targets]


def test_with_every_flavor_full_it_preempts_where_preemption_finds_candidates() -> None:
    state = state_with()
    assert admit(state, gpu_job("keeper", priority=100)) == {"main": "t4"}
    assert admit(state, gpu_job("low", priority=1)) == {"main": "a100"}
    state.add_workload(gpu_job("high", priority=50))
    decisions = state.schedule()
    # t4 holds only a higher priority (no candidates), a100 a lower one: Kueue preempts there.
    assert victims(decisions) == ["low"]
    state.remove_workload(("ns", "low"))
    assert [d.pod_sets[0].flavors[GPU] for d in of_type(state.schedule(), Admit)] == ["a100"]


def test_by_default_a_later_flavor_that_fits_wins_over_preempting_in_an_earlier_one() -> None:
    state = state_with()
    admit(state, gpu_job("low", priority=1))
    state.add_workload(gpu_job("high", priority=50))
    decisions = state.schedule()
    assert victims(decisions) == []
    (admitted,) = of_type(decisions, Admit)
    assert admitted.pod_sets[0].flavors[GPU] == "a100"
    assert admitted.considered == (
        "main: t4(preemptionMode=Preempt;insufficient unused quota for nvidia.com/gpu in flavor t4, "
        "1 more needed)"
    )


def test_when_can_preempt_may_stop_search_preempts_in_the_first_flavor_with_candidates() -> None:
    state = state_with({"whenCanPreempt": "MayStopSearch"})
    admit(state, gpu_job("low", priority=1))
    state.add_workload(gpu_job("high", priority=50))
    decisions = state.schedule()
    assert victims(decisions) == ["low"]
    (pending,) = of_type(decisions, Pending)
    # The search stopped at t4: a100 is not named.
    assert pending.message == (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in "
        "flavor t4, 1 more needed. Pending the preemption of 1 workload(s)"
    )


def test_may_stop_search_still_passes_a_flavor_where_nobody_may_be_preempted() -> None:
    state = state_with({"whenCanPreempt": "MayStopSearch"})
    admit(state, gpu_job("keeper", priority=100))
    assert admit(state, gpu_job("high", priority=50)) == {"main": "a100"}


def test_preemption_over_borrowing_preempts_at_home_rather_than_borrow() -> None:
    both = {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}
    default = state_with(dict(both), lender=1)
    admit(default, gpu_job("low", priority=1))
    assert admit(default, gpu_job("high", priority=50)) == {"main": "a100"}  # fits by borrowing
    preferring = state_with({**both, "preference": "PreemptionOverBorrowing"}, lender=1)
    admit(preferring, gpu_job("low", priority=1))
    preferring.add_workload(gpu_job("high", priority=50))
    assert victims(preferring.schedule()) == ["low"]


def test_the_outcomes_order_as_kueues() -> None:
    over = "PreemptionOverBorrowing"
    assert is_preferred((RECLAIM, 0), (PREEMPT, 0), None)
    assert is_preferred((PREEMPT, 2), (NO_CANDIDATES, 0), None)
    assert is_preferred((FIT, 2), (PREEMPT, 0), None)
    assert not is_preferred((FIT, 2), (PREEMPT, 0), over)
    assert is_preferred((NO_CANDIDATES, 0), (FIT, 1), over)
    assert not is_preferred((NO_FIT, 0), (NO_FIT, 0), None)
    assert not is_preferred((FIT, 0), (FIT, 0), None)  # a tie keeps the earlier flavor
    assert should_try_next((NO_CANDIDATES, 0), borrow_stops=True, preempt_stops=True)
    assert not should_try_next((PREEMPT, 0), borrow_stops=True, preempt_stops=True)
    assert should_try_next((PREEMPT, 1), borrow_stops=False, preempt_stops=True)
    assert not should_try_next((FIT, 1), borrow_stops=True, preempt_stops=False)


@pytest.mark.parametrize(
    ("fungibility", "message"),
    [
        (
            {"preference": "BorrowingOverPreemption"},  # whenCanBorrow defaults to MayStopSearch
            'spec.flavorFungibility.preference: Invalid value: "BorrowingOverPreemption": preference '
            '"BorrowingOverPreemption" requires both whenCanBorrow and whenCanPreempt to be TryNextFlavor',
        ),
        (
            {"whenCanPreempt": "Preempt"},
            "spec.flavorFungibility.whenCanPreempt: 'Preempt' is not one of MayStopSearch, TryNextFlavor; "
            "use one of them",
        ),
        (
            {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor", "preference": "Cheapest"},
            "spec.flavorFungibility.preference: 'Cheapest' is not one of BorrowingOverPreemption, "
            "PreemptionOverBorrowing; use one of them",
        ),
    ],
)
def test_fungibility_kueue_refuses_is_refused_in_its_words(fungibility: dict[str, str], message: str) -> None:
    body = cluster_queue_body("cq", [("t4", {GPU: 1})])
    body["spec"]["flavorFungibility"] = fungibility
    with pytest.raises(InvalidClusterQueueError) as refused:
        compile_cluster_queue(decode(body, ClusterQueue))
    assert str(refused.value) == message
