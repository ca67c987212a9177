"""Admission order across a cohort tree with fair sharing on: Kueue's tournament, on examples
worked by hand (each also shows where the classical order would differ)."""

from __future__ import annotations

from reconciler.api import Admission, PodSetAssignment
from reconciler.core.engine import Engine
from reconciler.core.scheduling.scheduler import NO_LONGER_FITS, Admit, Pending
from tests.support.fair_sharing_engine import GPU, add_cohort, add_cq, fresh
from tests.support.preemption_engine import gpu_job

BOTH = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")


def holding(state: Engine, cq: str, name: str, gpus: int) -> None:
    """An admitted workload of `cq` using `gpus` GPUs."""
    admission = Admission(cq, [PodSetAssignment("main", {GPU: "t4"}, {GPU: str(gpus)})])
    state.add_workload(gpu_job(name, queue=f"lq-{cq}", gpus=gpus), admission)


def submit(state: Engine, cq: str, name: str, gpus: int = 1, priority: int = 0, created: str = "") -> None:
    state.add_workload(gpu_job(name, queue=f"lq-{cq}", gpus=gpus, priority=priority, created=created))


def outcome(state: Engine) -> tuple[list[str], dict[str, str]]:
    decisions = state.schedule()
    admitted = [d.key[1] for d in decisions if isinstance(d, Admit)]
    pending: dict[str, str] = {}
    for d in decisions:
        if isinstance(d, Pending):
            pending.setdefault(d.key[1], d.message)  # its first verdict: overtaken by the winner
    return admitted, pending


def two_borrowers(fair: bool) -> Engine:
    # Cohort A lends 100 GPUs; b and c have none of their own; b already holds 10.
    state = fresh()
    state.scheduler.fair_sharing = BOTH if fair else None
    add_cohort(state, "A", gpus=100)
    add_cq(state, "b", {GPU: 0}, cohort="A")
    add_cq(state, "c", {GPU: 0}, cohort="A")
    holding(state, "b", "b0", 10)
    submit(state, "b", "b1", gpus=50, created="2026-01-01T00:00:05Z")
    submit(state, "c", "c1", gpus=75, created="2026-01-01T00:00:01Z")
    return state


def test_the_head_with_the_lowest_share_after_admission_goes_first() -> None:
    # b with b1: 60 of 100 (600); c with c1: 75 of 100 (750): b1 goes first, c1 no longer fits.
    admitted, pending = outcome(two_borrowers(fair=True))
    assert admitted == ["b1"]
    assert pending == {"c1": NO_LONGER_FITS}
    # Classically the older head goes first.
    admitted, pending = outcome(two_borrowers(fair=False))
    assert admitted == ["c1"]
    assert pending == {"b1": NO_LONGER_FITS}


def weighted(weight_a: str, weight_b: str) -> Engine:
    state = fresh()
    state.scheduler.fair_sharing = BOTH
    add_cohort(state, "org", gpus=4)
    add_cq(state, "a", {GPU: 0}, weight=weight_a)
    add_cq(state, "b", {GPU: 0}, weight=weight_b)
    holding(state, "a", "a0", 1)
    holding(state, "b", "b0", 1)
    # Older and of higher priority: a's head would win on anything but the share.
    submit(state, "a", "a1", gpus=2, priority=10, created="2026-01-01T00:00:01Z")
    submit(state, "b", "b1", gpus=2, priority=0, created="2026-01-01T00:00:09Z")
    return state


def test_the_weight_divides_the_share() -> None:
    # a: 3 of 4 (750); b: 750 / 2 = 375.
    assert outcome(weighted("1", "2")) == (["b1"], {"a1": NO_LONGER_FITS})
    # Equal weights, equal shares: priority decides.
    assert outcome(weighted("1", "1")) == (["a1"], {"b1": NO_LONGER_FITS})
    # a: 750 / 4 = 187.5 beats b's 750.
    assert outcome(weighted("4", "1")) == (["a1"], {"b1": NO_LONGER_FITS})


def test_a_borrower_of_weight_zero_goes_last() -> None:
    assert outcome(weighted("0", "1")) == (["b1"], {"a1": NO_LONGER_FITS})
    assert outcome(weighted("1", "0")) == (["a1"], {"b1": NO_LONGER_FITS})


def test_equal_shares_and_priorities_go_by_the_older_timestamp() -> None:
    state = fresh()
    state.scheduler.fair_sharing = BOTH
    add_cohort(state, "org", gpus=1)
    add_cq(state, "a", {GPU: 0})
    add_cq(state, "b", {GPU: 0})
    submit(state, "a", "a1", created="2026-01-01T00:00:09Z")
    submit(state, "b", "b1", created="2026-01-01T00:00:01Z")
    assert outcome(state) == (["b1"], {"a1": NO_LONGER_FITS})


def test_the_tournament_is_played_at_every_level_of_the_tree() -> None:
    # org lends 6 GPUs; team1 holds a (2 in use), team2 holds b (none) and c (3 in use).
    # Within team2, b (166) beats c (666); at org, team1 with a's head (3 of 6: 500) beats
    # team2 with b's head (4 of 6: 666), although b alone has the lowest share.
    state = fresh()
    state.scheduler.fair_sharing = BOTH
    add_cohort(state, "org", gpus=6)
    add_cohort(state, "team1", parent="org")
    add_cohort(state, "team2", parent="org")
    add_cq(state, "a", {GPU: 0}, cohort="team1")
    add_cq(state, "b", {GPU: 0}, cohort="team2")
    add_cq(state, "c", {GPU: 0}, cohort="team2")
    holding(state, "a", "a0", 2)
    holding(state, "c", "c0", 3)
    for cq in ("a", "b", "c"):
        submit(state, cq, f"{cq}1")
    admitted, pending = outcome(state)
    assert admitted == ["a1"]
    assert pending == {"b1": NO_LONGER_FITS, "c1": NO_LONGER_FITS}


def test_a_head_within_its_nominal_quota_beats_a_borrowing_one() -> None:
    # a's head fits in a's own 2 GPUs; b's (older, higher priority) would borrow one of them.
    state = fresh()
    state.scheduler.fair_sharing = BOTH
    add_cq(state, "a", {GPU: 2})
    add_cq(state, "b", {GPU: 0})
    submit(state, "b", "b1", priority=100, created="2026-01-01T00:00:01Z")
    submit(state, "a", "a1", gpus=2, created="2026-01-01T00:00:09Z")
    assert outcome(state) == (["a1"], {"b1": NO_LONGER_FITS})
