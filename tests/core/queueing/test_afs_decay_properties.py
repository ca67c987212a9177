"""Admission Fair Sharing's decayed usage as properties: a LocalQueue that stops using GPUs sees its
usage fall (never rise) and reach zero; one with a steady load moves towards that load without
passing it; a later sample never undoes an earlier one. Kueue keeps milli-units and truncates each
scaled term, so bounds allow one milli-unit per truncation."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.core.queueing.admission_fair_sharing import AdmissionFairSharing, AfsSettings, decayed

GPU = "nvidia.com/gpu"
LQ = ("ns", "team")

amounts = st.integers(0, 64_000)  # milli-GPUs
half_lives = st.floats(1.0, 7 * 24 * 3600.0)
gaps = st.lists(st.floats(0.0, 3600.0), min_size=1, max_size=30)


@settings(max_examples=300, deadline=None)
@given(old=amounts, current=amounts, elapsed=st.floats(0.0, 1e6), half_life=half_lives)
def test_one_sample_lies_between_the_old_usage_and_the_new_sample(
    old: int, current: int, elapsed: float, half_life: float
) -> None:
    got = decayed({GPU: old}, {GPU: current}, elapsed, half_life)[GPU]
    assert min(old, current) - 2 <= got <= max(old, current)


@settings(max_examples=300, deadline=None)
@given(old=amounts, half_life=half_lives, first=st.floats(0.0, 1e5), more=st.floats(0.0, 1e5))
def test_without_admissions_a_longer_wait_never_leaves_more(
    old: int, half_life: float, first: float, more: float
) -> None:
    sooner = decayed({GPU: old}, {}, first, half_life).get(GPU, 0)
    later = decayed({GPU: old}, {}, first + more, half_life).get(GPU, 0)
    assert later <= sooner <= old


@settings(max_examples=200, deadline=None)
@given(start=amounts, half_life=half_lives, waits=gaps)
def test_an_idle_local_queue_only_goes_down_and_reaches_zero(
    start: int, half_life: float, waits: list[float]
) -> None:
    afs = AdmissionFairSharing(AfsSettings(half_life=half_life, sampling=60))
    afs.seed(LQ, {GPU: start}, 0)
    now, previous = 0.0, start
    for wait in waits:
        now += wait
        current = afs.sample(LQ, {}, now).get(GPU, 0)
        assert current <= previous
        previous = current
    # 64 half-lives later nothing of 64 GPUs is left (truncation ends at zero)
    assert afs.sample(LQ, {}, now + 64 * half_life).get(GPU, 0) == 0


@settings(max_examples=200, deadline=None)
@given(start=amounts, load=amounts, half_life=half_lives, waits=gaps)
def test_a_steady_load_is_approached_and_never_passed(
    start: int, load: int, half_life: float, waits: list[float]
) -> None:
    afs = AdmissionFairSharing(AfsSettings(half_life=half_life, sampling=60))
    afs.seed(LQ, {GPU: start}, 0)
    now, previous = 0.0, start
    for wait in waits:
        now += wait
        current = afs.sample(LQ, {GPU: load}, now).get(GPU, 0)
        # Between where it was and the load: climbing, never above the load; falling, never
        # below it. Each sample truncates two terms, so it may land up to 2 milli short.
        assert min(previous, load) - 2 <= current <= max(previous, load)
        previous = current


@settings(max_examples=200, deadline=None)
@given(start=amounts, half_life=half_lives, waits=gaps)
def test_the_score_follows_the_usage_and_the_weight_divides_it(
    start: int, half_life: float, waits: list[float]
) -> None:
    light = AdmissionFairSharing(AfsSettings(half_life=half_life, sampling=60))
    heavy = AdmissionFairSharing(AfsSettings(half_life=half_life, sampling=60))
    light.seed(LQ, {GPU: start}, 0)
    heavy.seed(LQ, {GPU: start}, 0)
    heavy.set_weight(LQ, 2.0)
    now = 0.0
    for wait in waits:
        now += wait
        light.sample(LQ, {}, now)
        heavy.sample(LQ, {}, now)
        assert heavy.score(LQ) * 2 == light.score(LQ)
