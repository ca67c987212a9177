"""A preempting head keeps what it waits for from the heads after it (Kueue's scheduler adds its
usage for the rest of the cycle, and looks at it again in every cycle until it is admitted).

Without it, each eviction's quota went to a lower-priority workload behind the preemptor, which
preempted it again: on Kueue's baseline shape 50 Workloads made 1,768 admissions and 1,736
preemptions (bench/perf_shapes.py --shape baseline --scale 10).
"""

from __future__ import annotations

from typing import Any

from reconciler.core.scheduling.scheduler import NO_LONGER_FITS, Admit, Pending, Preempt
from tests.support.preemption_engine import GPU, engine, gpu_job, of_type

LOWER = {"preemption": {"withinClusterQueue": "LowerPriority"}}


def big_preempting_two() -> Any:
    """4 GPUs held by two priority-1 Workloads of 2; "big" (4 GPUs, priority 10) preempts both."""
    state = engine(("a", 4, dict(LOWER)))
    for name in ("low-1", "low-2"):
        state.add_workload(gpu_job(name, gpus=2, priority=1))
    state.schedule()
    state.add_workload(gpu_job("big", gpus=4, priority=10))
    state.schedule()
    return state


def test_what_an_eviction_frees_waits_for_the_preemptor_not_a_lower_head_behind_it() -> None:
    state = engine(("a", 4, dict(LOWER)))
    for name in ("low-1", "low-2"):
        state.add_workload(gpu_job(name, gpus=2, priority=1))
    assert len(of_type(state.schedule(), Admit)) == 2
    state.add_workload(gpu_job("big", gpus=4, priority=10))
    (preempt,) = of_type(state.schedule(), Preempt)
    assert sorted(t.key[1] for t in preempt.targets) == ["low-1", "low-2"]
    state.add_workload(gpu_job("small", gpus=1, priority=1))
    state.schedule()
    state.remove_workload(("ns", "low-1"))  # one eviction landed: 2 GPUs free, big needs 4
    decisions = state.schedule()
    assert of_type(decisions, Admit) == [], "the freed GPUs went to a head behind the preemptor"
    assert state.ledger.used("a", ("t4", GPU)) == 2  # the hold ends with the cycle
    state.remove_workload(("ns", "low-2"))
    assert [d.key[1] for d in of_type(state.schedule(), Admit)] == ["big"]


def test_a_head_arriving_while_the_preemptor_waits_does_not_take_the_freed_quota() -> None:
    state = big_preempting_two()
    state.remove_workload(("ns", "low-1"))
    state.schedule()  # big looked at again: still waiting for low-2
    # A new workload alone makes the queue's next cycle: big is looked at first again.
    state.add_workload(gpu_job("late", gpus=1, priority=1))
    assert of_type(state.schedule(), Admit) == []
    state.remove_workload(("ns", "low-2"))
    assert [d.key[1] for d in of_type(state.schedule(), Admit)] == ["big"]


def test_heads_behind_a_waiting_preemptor_in_its_queue_are_not_looked_at() -> None:
    """Kueue's sticky workload: while a head waits for its preemptions it stays its ClusterQueue's
    head, and the workloads behind it are neither admitted nor told anything until it is
    admitted (conformance scenario sticky-preemptor)."""
    state = big_preempting_two()
    state.add_workload(gpu_job("three", gpus=3, priority=1))
    state.add_workload(gpu_job("one", gpus=1, priority=1))
    assert state.schedule() == []
    state.remove_workload(("ns", "low-1"))  # 2 GPUs free; big waits for low-2
    assert [(type(d), d.key[1]) for d in state.schedule()] == [(Pending, "big")]
    state.remove_workload(("ns", "low-2"))
    decisions = state.schedule()
    assert [d.key[1] for d in of_type(decisions, Admit)] == ["big"]
    assert sorted(d.key[1] for d in of_type(decisions, Pending)) == ["one", "three"]


def test_heads_of_other_queues_behind_a_holding_preemptor_are_told_what_the_cycle_began_with() -> None:
    """Kueue assigns flavors on the cycle's snapshot, before a preempting head holds its usage: a
    head of another ClusterQueue in the cohort that does not fit is told by how much without the
    hold, and one that would fit but for the hold no longer fits (skipped). Told with the hold,
    the messages of every head behind a preemptor changed with each cycle it held: on Kueue's
    baseline shape at 1/5, 4,668 pending writes for 200 Workloads (bench/perf_shapes.py), 741
    with this."""
    state = engine(("a", 4, {"cohort": "pool", **LOWER}), ("b", 0, {"cohort": "pool"}))
    for name in ("low-1", "low-2"):
        state.add_workload(gpu_job(name, gpus=2, priority=1))
    state.schedule()
    state.add_workload(gpu_job("big", gpus=4, priority=10))
    assert of_type(state.schedule(), Preempt)
    state.add_workload(gpu_job("three", queue="lq-b", gpus=3, priority=1))
    state.schedule()
    state.remove_workload(("ns", "low-1"))  # 2 GPUs free; big holds 4 while it waits for low-2
    verdicts = {d.key[1]: d.message for d in of_type(state.schedule(), Pending)}
    assert verdicts["three"].endswith("1 more needed"), verdicts
    state.add_workload(gpu_job("one", queue="lq-b", gpus=1, priority=1))
    verdicts = {d.key[1]: d.message for d in of_type(state.schedule(), Pending)}
    assert verdicts["one"] == NO_LONGER_FITS
    assert of_type(state.schedule(), Admit) == []


def test_a_parked_group_member_that_turns_preemptor_speaks_only_for_itself() -> None:
    """Two 2-GPU workloads parked together; a lower-priority borrower comes in and the GPU in use
    goes: the first becomes a preemptor. Its 'Pending the preemption' verdict is its own; the other
    is not told it, and is looked at in its own turn once the preemption lands."""
    preemption = {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
    state = engine(("a", 2, {"cohort": "pool", "preemption": preemption}), ("b", 0, {"cohort": "pool"}))
    state.add_workload(gpu_job("a1", queue="lq-a", priority=10))
    assert of_type(state.schedule(), Admit)
    for name in ("x1", "x2"):
        state.add_workload(
            gpu_job(name, queue="lq-a", gpus=2, priority=5, created=f"2026-01-01T00:00:0{name[1]}Z")
        )
    # x2 waits untold behind x1, of its shape and priority (Kueue's equivalence hashing)
    assert [d.key[1] for d in of_type(state.schedule(), Pending)] == ["x1"]
    state.add_workload(gpu_job("b1", queue="lq-b", priority=0))
    assert of_type(state.schedule(), Admit)
    state.remove_workload(("ns", "a1"))
    decisions = state.schedule()
    assert [(d.key[1], [t.key[1] for t in d.targets]) for d in of_type(decisions, Preempt)] == [
        ("x1", ["b1"])
    ]
    told = {d.key[1]: d.message for d in of_type(decisions, Pending)}
    assert list(told) == ["x1"]
    assert told["x1"].endswith("Pending the preemption of 1 workload(s)")
    state.remove_workload(("ns", "b1"))
    decisions = state.schedule()
    assert [d.key[1] for d in of_type(decisions, Admit)] == ["x1"]
    assert [d.message.endswith("2 more needed") for d in of_type(decisions, Pending)] == [True]
