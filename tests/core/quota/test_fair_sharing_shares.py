"""Dominant resource shares of ClusterQueues and Cohorts, worked by hand as Kueue computes them,
and their properties over random cohort trees."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.api import Cohort
from reconciler.core.engine import Engine
from reconciler.core.quota.cohorts import compile_cohort
from reconciler.core.quota.fair_sharing import (
    MAX_SHARE,
    NEGATIVE_SHARE,
    Share,
    compare_shares,
    dominant_share,
    shares_on_path,
    simulated_usage,
)
from reconciler.core.quota.ledger import Charge
from tests.support.builders import cohort_body, decode, t4_group
from tests.support.fair_sharing_engine import GPU, add_cohort, add_cq, fresh

T4 = ("t4", GPU)


def use(state: Engine, cq: str, amount: int, fr: tuple[str, str] = T4, key: str = "") -> None:
    state.ledger.reserve(("ns", key or f"{cq}-{fr[1]}-{amount}"), Charge(cq, {fr: amount}))


def share(state: Engine, kind: str, name: str) -> Share:
    return dominant_share(state.cache.capacity, (kind, name))


def test_borrowed_over_what_the_cohort_can_lend_divided_by_the_weight() -> None:
    state = fresh()
    add_cq(state, "a", {GPU: 4})
    add_cq(state, "b", {GPU: 4}, weight=2)
    use(state, "a", 6)  # 2 borrowed of the 8 the cohort has: 2 * 1000 / 8
    use(state, "b", 2)
    a, b = share(state, "cq", "a"), share(state, "cq", "b")
    assert (a.precise(), a.rounded(), a.dominant, a.borrowing) == (250.0, 250, GPU, True)
    assert (b.precise(), b.rounded(), b.borrowing) == (0.0, 0, False)
    state.ledger.release(("ns", "b-nvidia.com/gpu-2"))
    use(state, "b", 1)
    use(state, "a", 1, key="a-more")  # a: 7 of 4
    use(state, "b", 5, key="b-more")  # b: 6 of 4, weight 2: 2 * 1000 / 8 / 2
    assert share(state, "cq", "b").precise() == 125.0
    assert share(state, "cq", "a").rounded() == 375


def test_the_share_rounds_up_and_the_largest_resource_dominates() -> None:
    state = fresh()
    add_cq(state, "a", {GPU: 3, "cpu": 10})
    add_cq(state, "b", {GPU: 0, "cpu": 10})
    use(state, "a", 4)  # 1 of 3 GPUs: 333.33...
    assert share(state, "cq", "a").rounded() == 334
    use(state, "a", 15_000, ("t4", "cpu"))  # 5 cpus of 20: 250 < 333
    assert share(state, "cq", "a").dominant == GPU
    use(state, "a", 5_000, ("t4", "cpu"), key="more-cpu")  # 10 of 20: 500
    got = share(state, "cq", "a")
    assert (got.dominant, got.precise()) == ("cpu", 500.0)
    assert got.borrowed == {T4, ("t4", "cpu")}


def test_weight_zero_borrowing_is_the_largest_share() -> None:
    state = fresh()
    add_cq(state, "a", {GPU: 2}, weight="0")
    add_cq(state, "b", {GPU: 2}, weight="0.5")
    use(state, "a", 2)
    assert share(state, "cq", "a").rounded() == 0  # within its quota: 0 whatever the weight
    use(state, "a", 1, key="a-3")
    use(state, "b", 3)
    a, b = share(state, "cq", "a"), share(state, "cq", "b")
    assert (a.precise(), a.rounded()) == (math.inf, MAX_SHARE)
    assert b.precise() == 500.0  # 1 * 1000 / 4 / 0.5
    assert compare_shares(a, b) == 1
    assert compare_shares(b, a) == -1
    assert compare_shares(NEGATIVE_SHARE, Share()) == -1


def test_without_a_cohort_or_at_the_root_the_share_is_zero() -> None:
    state = fresh()
    add_cq(state, "alone", {GPU: 1}, cohort=None)
    use(state, "alone", 1)
    assert share(state, "cq", "alone").is_zero
    add_cq(state, "a", {GPU: 0})
    use(state, "a", 0)
    assert share(state, "cohort", "org").rounded() == 0


def test_hierarchical_cohort_shares_are_over_what_the_parent_can_lend() -> None:
    # org (4 GPUs) <- team (weight 2, no quota) <- a (1 GPU), b (1 GPU); c (2 GPUs) under org.
    state = fresh()
    add_cohort(state, "org", gpus=4)
    add_cohort(state, "team", parent="org", weight="2")
    add_cq(state, "a", {GPU: 1}, cohort="team")
    add_cq(state, "b", {GPU: 1}, cohort="team")
    add_cq(state, "c", {GPU: 2}, cohort="org")
    use(state, "a", 5)  # team uses 5 of its subtree quota of 2: 3 borrowed of the 8 org has
    team = share(state, "cohort", "team")
    assert (team.ratio, team.precise(), team.rounded()) == (375.0, 187.5, 188)
    # a borrows 4; what team could get with nothing else in use is all 8.
    assert share(state, "cq", "a").precise() == 500.0
    assert share(state, "cq", "c").is_zero


def test_a_simulated_usage_is_given_back() -> None:
    state = fresh()
    add_cq(state, "a", {GPU: 2})
    add_cq(state, "b", {GPU: 2})
    with simulated_usage(state.ledger, "a", {T4: 3}):
        assert share(state, "cq", "a").precise() == 250.0
    assert share(state, "cq", "a").is_zero
    assert state.ledger.holders() == []


@st.composite
def trees(draw: st.DrawFn) -> tuple[Engine, dict[str, int], dict[str, int]]:
    state = fresh()
    nominal: dict[str, int] = {}
    used: dict[str, int] = {}
    add_cohort(
        state, "org", gpus=draw(st.integers(0, 4)), weight=draw(st.sampled_from([None, "0", "1", "3"]))
    )
    add_cohort(
        state,
        "team",
        parent="org",
        gpus=draw(st.integers(0, 4)),
        weight=draw(st.sampled_from([None, "0", "0.5", "2"])),
    )
    for i in range(draw(st.integers(1, 4))):
        name = f"q{i}"
        nominal[name] = draw(st.integers(0, 6))
        weight = draw(st.sampled_from([None, "0", "0.25", "1", "2"]))
        add_cq(
            state, name, {GPU: nominal[name]}, cohort=draw(st.sampled_from(["org", "team"])), weight=weight
        )
        used[name] = draw(st.integers(0, 10))
        if used[name]:
            use(state, name, used[name])
    return state, nominal, used


@settings(max_examples=200, deadline=None)
@given(trees())
def test_shares_are_never_negative_and_zero_within_nominal_quota(
    tree: tuple[Engine, dict[str, int], dict[str, int]],
) -> None:
    state, nominal, used = tree
    for name in nominal:
        got = share(state, "cq", name)
        assert got.precise() >= 0
        assert got.rounded() >= 0
        if used[name] <= nominal[name]:
            assert got.is_zero
            assert got.rounded() == 0
            assert not got.borrowing
        else:
            assert got.borrowing
    for cohort in ("org", "team"):
        got = share(state, "cohort", cohort)
        assert got.precise() >= 0
        assert got.rounded() >= 0
    capacity = state.cache.capacity
    team_quota, team_usage, _ = capacity.stats(("cohort", "team"), T4)
    if team_usage <= team_quota:
        assert share(state, "cohort", "team").is_zero


def cohort_with_limit(state: Engine, name: str, parent: str, gpus: int, borrowing: int) -> None:
    quota = {"name": GPU, "nominalQuota": gpus, "borrowingLimit": borrowing}
    spec = {"parentName": parent, "resourceGroups": t4_group(quota)}
    state.set_cohort(compile_cohort(decode(cohort_body(name, spec), Cohort)))


def test_kueues_own_worked_values() -> None:
    """The rounded shares Kueue's tests pin, in the same set-ups."""
    # 1 over 500 of 1500: 0.67, rounded up to 1; the lender's weight does not matter.
    state = fresh()
    add_cq(state, "cq", {GPU: 500})
    add_cq(state, "lending-cq", {GPU: 1000}, weight="300")
    use(state, "cq", 501)
    assert share(state, "cq", "cq").rounded() == 1
    assert share(state, "cq", "lending-cq").rounded() == 0
    # 300 over 500 of 1500 (200) with weight 300: 0.67, rounded up to 1.
    state = fresh()
    add_cq(state, "cq", {GPU: 500}, weight="300")
    add_cq(state, "lending-cq", {GPU: 1000}, weight="300")
    use(state, "cq", 800)
    assert share(state, "cq", "cq").rounded() == 1
    # 2 over 5 of 10 (200) with weight 0.5: 400.
    state = fresh()
    add_cq(state, "cq", {GPU: 5}, weight="0.5")
    add_cq(state, "lending-cq", {GPU: 5})
    use(state, "cq", 7)
    assert share(state, "cq", "cq").rounded() == 400
    # Quota only at the root (50): the ClusterQueue 200, its cohort of weight 2 100.
    state = fresh()
    add_cohort(state, "root", gpus=50)
    add_cohort(state, "child", parent="root", weight="2")
    add_cq(state, "cq", {GPU: 0}, cohort="child")
    use(state, "cq", 10)
    assert (share(state, "cq", "cq").rounded(), share(state, "cohort", "child").rounded()) == (200, 100)
    assert share(state, "cohort", "root").rounded() == 0
    # A borrowing limit of 10 on the child cohort: the ClusterQueue sees 10 (1000), the child 50 (200).
    state = fresh()
    add_cohort(state, "root", gpus=50)
    cohort_with_limit(state, "child", "root", gpus=0, borrowing=10)
    add_cq(state, "cq", {GPU: 0}, cohort="child")
    use(state, "cq", 10)
    assert (share(state, "cq", "cq").rounded(), share(state, "cohort", "child").rounded()) == (1000, 200)


@settings(max_examples=200, deadline=None)
@given(trees(), st.integers(0, 5), st.integers(0, 3))
def test_shares_with_a_workload_added_match_charging_it(
    tree: tuple[Engine, dict[str, int], dict[str, int]], amount: int, which: int
) -> None:
    """What the tournament computes without touching the ledger equals charging the workload."""
    state, nominal, _ = tree
    names = sorted(nominal)
    cq = names[which % len(names)]
    capacity = state.cache.capacity
    computed = shares_on_path(capacity, cq, {T4: amount})
    path = [("cq", cq), *(("cohort", c) for c in capacity.ancestors(("cq", cq)))]
    with simulated_usage(state.ledger, cq, {T4: amount}):
        charged = [dominant_share(state.cache.capacity, node) for node in path]
    assert computed == charged
