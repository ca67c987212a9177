"""Preemption with fair sharing on: Kueue's strategies on examples worked by hand (Kueue's own
cases, in GPUs), and no workload preempted by one it would in turn preempt."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.api import Admission, ClusterQueue, PodSetAssignment
from reconciler.core.engine import Engine
from reconciler.core.model.clusterqueues import compile_cluster_queue
from reconciler.core.scheduling.fair_preemption import fair_preemption_targets
from reconciler.core.scheduling.preemption import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_FAIR_SHARING,
    IN_COHORT_RECLAMATION,
    preemption_message,
)
from reconciler.core.scheduling.scheduler import Pending, Preempt
from tests.support.builders import cluster_queue_body, decode
from tests.support.fair_sharing_engine import GPU, add_cohort, fresh
from tests.support.preemption_engine import gpu_job

BOTH = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
FINAL = ("LessThanOrEqualToFinalShare",)
INITIAL = ("LessThanInitialShare",)
POLICY = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}


def add_queue(state: Engine, name: str, gpus: int, weight: str | None = None, cohort: str = "all") -> None:
    body = cluster_queue_body(name, [("t4", {GPU: gpus})], cohort=cohort)
    body["spec"]["preemption"] = dict(POLICY)
    if weight is not None:
        body["spec"]["fairSharing"] = {"weight": weight}
    state.set_cluster_queue(compile_cluster_queue(decode(body, ClusterQueue)))
    state.set_local_queue("ns", f"lq-{name}", name)


def hold(state: Engine, cq: str, name: str, gpus: int = 1, priority: int = 0) -> None:
    admission = Admission(cq, [PodSetAssignment("main", {GPU: "t4"}, {GPU: str(gpus)})])
    at = f"2026-01-01T00:{len(state.ledger.holders()):02d}:00Z"  # admitted in the order given
    state.add_workload(gpu_job(name, queue=f"lq-{cq}", gpus=gpus, priority=priority), admission, at)


def three(strategies: tuple[str, ...] = BOTH, **weights: str) -> Engine:
    """Kueue's base: a, b and c with 3 GPUs each in cohort `all`."""
    state = fresh()
    state.scheduler.fair_sharing = strategies
    for name in ("a", "b", "c"):
        add_queue(state, name, 3, weights.get(name))
    return state


def fill(state: Engine, **counts: int) -> None:
    for cq, count in counts.items():
        for i in range(1, count + 1):
            hold(state, cq, f"{cq}{i}")


def preempted(state: Engine, cq: str, gpus: int, priority: int = 0) -> set[tuple[str, str]]:
    state.add_workload(gpu_job(f"{cq}_incoming", queue=f"lq-{cq}", gpus=gpus, priority=priority))
    decisions = state.schedule()
    found = {(t.key[1], t.reason) for d in decisions if isinstance(d, Preempt) for t in d.targets}
    if found:
        (pending,) = [d for d in decisions if isinstance(d, Pending)]
        assert pending.message.endswith(f". Pending the preemption of {len(found)} workload(s)")
    return found


def test_reclaims_nominal_quota_from_the_queue_using_the_most() -> None:
    state = three()
    fill(state, a=3, b=5, c=1)
    # c stays within its nominal quota with the incoming workload: reclamation, from b.
    (got,) = preempted(state, "c", 1)
    assert got[0].startswith("b")
    assert got[1] == IN_COHORT_RECLAMATION


def test_borrowed_quota_is_taken_by_fair_sharing_from_the_queue_using_the_most() -> None:
    state = three()
    fill(state, a=3, b=5, c=1)
    (got,) = preempted(state, "a", 1)  # a would borrow 1 (111); b borrows 2 (222), 1 after (111)
    assert got[0].startswith("b")
    assert got[1] == IN_COHORT_FAIR_SHARING


def test_nothing_when_everyone_is_within_nominal_quota() -> None:
    state = three()
    fill(state, a=3, b=3, c=3)
    assert preempted(state, "c", 1) == set()


def test_nothing_when_it_would_switch_the_imbalance() -> None:
    state = three()
    fill(state, a=3, b=5)
    assert preempted(state, "a", 2) == set()  # a would have 222, b now 222 and after 111


def test_lower_priorities_of_its_own_queue_go_first() -> None:
    state = three()
    hold(state, "a", "a1_low", priority=-1)
    hold(state, "a", "a2_low", priority=-1)
    fill(state, b=5)
    hold(state, "a", "a3")
    hold(state, "a", "a4")
    assert preempted(state, "a", 2) == {("a1_low", IN_CLUSTER_QUEUE), ("a2_low", IN_CLUSTER_QUEUE)}


def test_its_own_queue_and_the_highest_share_together() -> None:
    state = three()
    hold(state, "a", "a_low", priority=-1)
    hold(state, "a", "a2")
    hold(state, "a", "a3")
    fill(state, b=6)
    got = preempted(state, "a", 2)
    assert ("a_low", IN_CLUSTER_QUEUE) in got
    assert [r for n, r in got if n.startswith("b")] == [IN_COHORT_FAIR_SHARING]
    assert len(got) == 2


def test_a_huge_workload_is_preempted_when_the_preemptor_stays_within_nominal() -> None:
    state = three()
    hold(state, "b", "b1", gpus=9)
    assert preempted(state, "a", 2) == {("b1", IN_COHORT_RECLAMATION)}


def test_a_huge_workload_is_kept_from_a_huge_preemptor() -> None:
    state = three()
    hold(state, "a", "a1", gpus=2)
    hold(state, "b", "b1", gpus=7)
    assert preempted(state, "a", 5) == set()


def test_the_smaller_workload_that_keeps_the_target_below_the_preemptor_is_chosen() -> None:
    # Kueue's case in GPUs doubled (6 each): b holds 4, 2, 4 and c 2; a wants 7: taking b's 2
    # leaves b at 8 (111), not above a's 7 (56 at 18): the first strategy passes with it.
    state = fresh()
    state.scheduler.fair_sharing = BOTH
    for name in ("a", "b", "c"):
        add_queue(state, name, 6)
    hold(state, "b", "b1", gpus=4)
    hold(state, "b", "b2", gpus=2)
    hold(state, "b", "b3", gpus=4)
    hold(state, "c", "c1", gpus=2)
    assert preempted(state, "a", 7) == {("b2", IN_COHORT_FAIR_SHARING)}


def test_it_preempts_in_two_queues_when_that_leaves_the_smaller_largest_share() -> None:
    state = fresh()
    state.scheduler.fair_sharing = BOTH
    for name in ("a", "b", "c"):
        add_queue(state, name, 6)
    # Both refused by the first strategy (each would leave its queue within nominal quota);
    # the second takes the first candidate of each queue: the most recently admitted.
    hold(state, "b", "b2", gpus=5)
    hold(state, "b", "b1", gpus=4)
    hold(state, "c", "c2", gpus=5)
    hold(state, "c", "c1", gpus=4)
    assert preempted(state, "a", 7) == {("b1", IN_COHORT_FAIR_SHARING), ("c1", IN_COHORT_FAIR_SHARING)}


def test_the_same_does_not_flap_back() -> None:
    state = fresh()
    state.scheduler.fair_sharing = BOTH
    for name in ("a", "b", "c"):
        add_queue(state, name, 6)
    hold(state, "a", "a1", gpus=7)
    hold(state, "b", "b2", gpus=5)
    hold(state, "c", "c2", gpus=5)
    assert preempted(state, "b", 4) == set()


def test_a_queue_with_a_higher_weight_takes_more() -> None:
    state = three(a="2")
    fill(state, a=3, b=6)
    got = preempted(state, "a", 2)
    assert len(got) == 2
    assert {r for _, r in got} == {IN_COHORT_FAIR_SHARING}
    assert all(n.startswith("b") for n, _ in got)
    # With equal weights a gets only 1 of them: a at 5 (222) is not below b at 5 (222).
    state = three()
    fill(state, a=3, b=6)
    assert preempted(state, "a", 2) == set()


def test_anything_borrowed_by_a_queue_of_weight_zero_can_be_taken() -> None:
    state = three(b="0")
    fill(state, a=3, b=6)
    got = preempted(state, "a", 3)
    assert len(got) == 3
    assert {r for _, r in got} == {IN_COHORT_FAIR_SHARING}


def test_nominal_quota_of_a_queue_of_weight_zero_is_kept() -> None:
    state = fresh()
    state.scheduler.fair_sharing = BOTH
    add_queue(state, "a", 3)
    add_queue(state, "b", 3, weight="0")
    fill(state, a=3, b=3)
    assert preempted(state, "a", 1) == set()


def two_borrowers(strategies: tuple[str, ...]) -> Engine:
    state = fresh()
    state.scheduler.fair_sharing = strategies
    for name in ("a", "b", "c"):
        add_queue(state, name, 6)
    for cq in ("b", "c"):
        hold(state, cq, f"{cq}2", gpus=5)
        hold(state, cq, f"{cq}1", gpus=4)
    return state


def test_each_strategy_alone() -> None:
    # a with 7 has 56; b and c have 167 each and would have 0 after losing a workload.
    assert preempted(two_borrowers(FINAL), "a", 7) == set()  # 56 > 0: refused
    both = {("b1", IN_COHORT_FAIR_SHARING), ("c1", IN_COHORT_FAIR_SHARING)}
    assert preempted(two_borrowers(INITIAL), "a", 7) == both  # 56 < 167
    assert preempted(two_borrowers(BOTH), "a", 7) == both


def test_the_message_names_fair_sharing() -> None:
    message = preemption_message("u1", "j1", IN_COHORT_FAIR_SHARING, "/all/a", "/all/b")
    assert message == (
        "Preempted to accommodate a workload (UID: u1, JobUID: j1) due to Fair Sharing within the cohort; "
        "preemptor path: /all/a; preemptee path: /all/b"
    )


def test_a_hierarchical_cohort_of_weight_zero_keeps_its_nominal_quota() -> None:
    state = fresh()
    state.scheduler.fair_sharing = BOTH
    add_cohort(state, "right", parent="root", gpus=1, weight="0")
    add_queue(state, "left", 0, cohort="root")
    add_queue(state, "right-cq", 0, weight="0", cohort="right")
    hold(state, "right-cq", "right-1")
    assert preempted(state, "left", 1) == set()


@st.composite
def cohorts(draw: st.DrawFn) -> tuple[Engine, str, int, int]:
    state = fresh()
    # LessThanOrEqualToFinalShare alone: with LessThanInitialShare (alone or second) Kueue's rule
    # can flap (a CI run found it for LessThanInitialShare alone; the worked example below).
    state.scheduler.fair_sharing = FINAL
    queues = ["a", "b", "c"][: draw(st.integers(2, 3))]
    weights = st.sampled_from([None, "1", "2", "0.5", "0"])
    # Flat (every queue in `all`) or a tree: `all` over two weighted child Cohorts, each with
    # quota of its own, the queues spread over the three.
    parents = ["all"] * len(queues)
    if draw(st.booleans()):
        add_cohort(state, "all", gpus=draw(st.integers(0, 3)))
        for child in ("left", "right"):
            add_cohort(state, child, parent="all", gpus=draw(st.integers(0, 3)), weight=draw(weights))
        parents = [draw(st.sampled_from(["all", "left", "right"])) for _ in queues]
    for name, parent in zip(queues, parents, strict=True):
        add_queue(state, name, draw(st.integers(0, 4)), draw(weights), cohort=parent)
    for i in range(draw(st.integers(0, 8))):
        cq, gpus = draw(st.sampled_from(queues)), draw(st.integers(1, 3))
        if state.cache.capacity.available(("cq", cq), ("t4", GPU)) >= gpus:  # as admission allows
            hold(state, cq, f"w{i}", gpus=gpus)
    return state, draw(st.sampled_from(queues)), draw(st.integers(1, 4)), 0


def _try(state: Engine, cq: str, name: str, gpus: int) -> dict[str, str]:
    info = gpu_job(name, queue=f"lq-{cq}", gpus=gpus)
    model = state.cache.cluster_queues[cq]
    strategies = state.scheduler.fair_sharing
    assert strategies is not None
    return {t.key[1]: t.reason for t in fair_preemption_targets(info, model, state.cache, strategies)}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cohorts())
def test_no_workload_is_preempted_by_one_it_would_preempt_in_turn(case: tuple[Engine, str, int, Any]) -> None:
    """With LessThanOrEqualToFinalShare alone, a workload preempted by another never takes it back
    for fair sharing; it may take it back to reclaim its own queue's nominal quota. With
    LessThanInitialShare in the list (alone or second), Kueue's rule looks at the target's share
    before the preemption only, and can flap: see the worked example below."""
    state, cq, gpus, _ = case
    before = state.ledger.snapshot()
    victims = _try(state, cq, "incoming", gpus)
    assert state.ledger.snapshot() == before  # the simulation leaves the ledger as it was
    if not victims:
        return
    sizes = {}
    for name in victims:  # evicted, and the preemptor admitted
        charge = state.ledger.charge_of(("ns", name))
        assert charge is not None
        sizes[name] = (charge.cluster_queue, charge.usage[("t4", GPU)])
        state.remove_workload(("ns", name))
    hold(state, cq, "incoming", gpus=gpus)
    for name, (victim_cq, victim_gpus) in sizes.items():
        back = _try(state, victim_cq, name, victim_gpus).get("incoming")
        if back is None:
            continue
        assert back == IN_COHORT_RECLAMATION
        nominal = state.cache.cluster_queues[victim_cq].nominal("t4", GPU)
        assert state.ledger.used(victim_cq, ("t4", GPU)) + victim_gpus <= nominal


def test_with_less_than_initial_share_a_victim_can_take_its_preemptor_back_as_in_kueue() -> None:
    """Kueue v0.18.1's second strategy can preempt back and forth; worked by hand through its
    fairPreemptions (runFirstFsStrategy, then runSecondFsStrategy, one candidate per queue), in
    7 GPUs: a (nominal 0, weight 0.5) borrows 4 (w1:1, w2:2, w3:1, admitted in that order), b
    (nominal 4) holds 3, c lends 3. b's incoming 4-GPU workload would leave b at 3 of 7 borrowed =
    429; a is at 4/7 / 0.5 = 1143. Rule S2-a takes w3 (a then 857 >= 429), refuses w2 (a 286 <
    429, kept for retry), takes w1 (a 571); S2-b then takes w2 (429 < a's 571 now), and b fits.
    Back again, w1 alone would put a at 1/7 / 0.5 = 286, below b's 429: S2-b preempts b's workload
    for it. Kueue's words for S2-b: the check depends on the target's share before, not after."""
    state = fresh()
    state.scheduler.fair_sharing = BOTH
    add_queue(state, "a", 0, "0.5")
    add_queue(state, "b", 4, "1")
    add_queue(state, "c", 3, "1")
    hold(state, "b", "w0", 3)
    for name, gpus in (("w1", 1), ("w2", 2), ("w3", 1)):
        hold(state, "a", name, gpus)
    assert _try(state, "b", "incoming", 4) == dict.fromkeys(("w1", "w2", "w3"), IN_COHORT_FAIR_SHARING)
    for name in ("w1", "w2", "w3"):
        state.remove_workload(("ns", name))
    hold(state, "b", "incoming", 4)
    assert _try(state, "a", "w1", 1) == {"incoming": IN_COHORT_FAIR_SHARING}
    state.scheduler.fair_sharing = FINAL  # the first strategy alone: no flap (286 > b's 0 after)
    assert _try(state, "a", "w1", 1) == {}


def test_with_less_than_initial_share_alone_a_victim_can_take_its_preemptor_back_too() -> None:
    """The case a CI run of the property found, made flat: 8 GPUs (a: nominal 0, b: 4, c: 4 to
    lend). a holds 5 (w0:1, w3:3, w5:1), b 3. b's incoming 4 would leave b at 3/8 = 375; a is at
    625. LessThanInitialShare alone takes w5 (375 < 625), then w3 (375 < a's 500 now), and b fits.
    Back again, w5 alone would put a at 2/8 = 250, below b's 375: preempted for fair sharing,
    as Kueue's rule, which reads the target's share before the preemption only, allows."""
    state = fresh()
    state.scheduler.fair_sharing = INITIAL
    add_queue(state, "a", 0, "1")
    add_queue(state, "b", 4, "1")
    add_queue(state, "c", 4, "1")
    for name, cq, gpus in (
        ("w0", "a", 1),
        ("w1", "b", 1),
        ("w2", "b", 1),
        ("w3", "a", 3),
        ("w4", "b", 1),
        ("w5", "a", 1),
    ):
        hold(state, cq, name, gpus)
    assert _try(state, "b", "incoming", 4) == {"w5": IN_COHORT_FAIR_SHARING, "w3": IN_COHORT_FAIR_SHARING}
    for name in ("w3", "w5"):
        state.remove_workload(("ns", name))
    hold(state, "b", "incoming", 4)
    assert _try(state, "a", "w5", 1) == {"incoming": IN_COHORT_FAIR_SHARING}
    assert _try(state, "a", "w3", 3) == {}  # 4/8 = 500 is not below 375
