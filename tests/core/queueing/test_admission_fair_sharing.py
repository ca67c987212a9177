"""Admission fair sharing in the core: Kueue's decay and entry penalty against hand-computed values
and Kueue's documented examples, and the order within a ClusterQueue with
`admissionMode: UsageBasedAdmissionFairSharing` (LocalQueue score first, then priority and time)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from reconciler.api import ClusterQueue
from reconciler.core.engine import Engine
from reconciler.core.model.clusterqueues import compile_cluster_queue
from reconciler.core.queueing.admission_fair_sharing import (
    AdmissionFairSharing,
    AfsSettings,
    alpha,
    decayed,
    entry_penalty,
    order_key,
    weighted_usage,
)
from reconciler.core.scheduling.scheduler import Admit, Preempt
from tests.support.admission_engine import info
from tests.support.builders import cluster_queue_body, decode, flavor

GPU = "nvidia.com/gpu"
MINUTE = 60.0


# --- the arithmetic ------------------------------------------------------------------------


def test_alpha_is_the_share_of_the_new_sample_after_the_elapsed_time() -> None:
    assert alpha(600, 600) == 0.5  # one half-life: half old, half new
    assert alpha(1200, 600) == 0.75  # two half-lives
    assert alpha(300, 600) == pytest.approx(0.2928932188)  # 1 - sqrt(1/2)
    assert alpha(300, 0) == 0.0  # Kueue: a half-life of 0 gives 0


def test_decay_by_hand() -> None:
    # 4 GPUs consumed, 2 GPUs in use now (milli-units).
    assert decayed({GPU: 4000}, {GPU: 2000}, 600, 600) == {GPU: 3000}  # 2000 + 1000
    assert decayed({GPU: 4000}, {GPU: 2000}, 1200, 600) == {GPU: 2500}  # 1000 + 1500
    # A resource only in the old usage decays alone; one only in the new one comes in by alpha.
    assert decayed({"cpu": 1000}, {GPU: 1000}, 600, 600) == {"cpu": 500, GPU: 500}
    # Scaled milli-values are truncated, as Kueue's MulByFloat: 1 * (1 - 0.2929) = 0.707 -> 0.
    assert decayed({"cpu": 1}, {}, 300, 600) == {"cpu": 0}


def test_entry_penalty_as_kueues_own_example() -> None:
    # Kueue's test: sampling 5m, half-life 10m, 4 cpu and 2 of a DRA logical resource requested.
    # alpha = 1 - 0.5^(5/10) = 0.29289...: 4000m -> 1171m, 2000m -> 585m.
    penalty = entry_penalty({"cpu": 4000, "gpu-logical": 2000}, 5 * MINUTE, 10 * MINUTE)
    assert penalty == {"cpu": 1171, "gpu-logical": 585}


def test_the_score_follows_kueues_documented_weights() -> None:
    # Kueue's docs: resourceWeights cpu 2.0, memory 1.0; the status example shows cpu 31999m.
    weights = {"cpu": 2.0, "memory": 1.0}
    assert weighted_usage({"cpu": 31999}, {}, 1.0, weights) == pytest.approx(63.998)
    # A LocalQueue of weight "2" is "treated as if it used half as many resources".
    assert weighted_usage({"cpu": 31999}, {}, 2.0, weights) == pytest.approx(31.999)
    # A resource without a weight counts with weight 1; the penalty counts as usage.
    assert weighted_usage({GPU: 1500}, {GPU: 500, "cpu": 1000}, 1.0, weights) == pytest.approx(4.0)
    # A weight of 0 divides as Go's floats: infinite with usage, NaN (first in order) without.
    assert weighted_usage({GPU: 1}, {}, 0.0, {}) == math.inf
    assert math.isnan(weighted_usage({}, {}, 0.0, {}))
    assert order_key(math.nan) < order_key(0.0) < order_key(math.inf)


def test_sampling_decays_from_the_last_update_and_a_zero_half_life_resets() -> None:
    afs = AdmissionFairSharing(AfsSettings(half_life=600, sampling=300))
    lq = ("ns", "a")
    assert afs.due(lq, 0)
    assert afs.sample(lq, {GPU: 2000}, 0) == {GPU: 0}  # a new LocalQueue starts empty at now
    assert not afs.due(lq, 299)
    assert afs.due(lq, 300)
    assert afs.sample(lq, {GPU: 2000}, 600) == {GPU: 1000}
    assert afs.score(lq) == 1.0
    reset = AdmissionFairSharing(AfsSettings(half_life=0, sampling=300))
    reset.seed(lq, {GPU: 9000}, 0)
    assert reset.sample(lq, {GPU: 2000}, 300) == {}


def test_an_entry_penalty_counts_at_once_and_is_folded_in_when_the_admission_is_written() -> None:
    afs = AdmissionFairSharing(AfsSettings(half_life=600, sampling=600))  # alpha(sampling) = 0.5
    lq = ("ns", "a")
    afs.seed(lq, {GPU: 1000}, 0)
    afs.admitted(("ns", "w"), lq, {GPU: 2000})
    assert afs.penalty(lq) == {GPU: 1000}
    assert afs.score(lq) == 2.0  # 1 consumed + 1 pending
    # Written one half-life later with the 2 GPUs admitted: 1000*0.5 + 2000*0.5 + the penalty.
    assert afs.written(("ns", "w"), {GPU: 2000}, 600) == lq
    assert afs.penalty(lq) == {}
    assert afs.usage[lq].consumed == {GPU: 2500}
    assert afs.usage[lq].last_update == 600
    # A lost admission takes its penalty back without touching the usage.
    afs.admitted(("ns", "x"), lq, {GPU: 4000})
    assert afs.lost(("ns", "x")) == lq
    assert afs.score(lq) == 2.5


# --- the order within a ClusterQueue -------------------------------------------------------


def engine(
    gpus: int, *, fair: bool = True, half_life: float = 600, sampling: float = 300, preempt: bool = False
) -> Engine:
    state = Engine()
    state.enable_admission_fair_sharing(AfsSettings(half_life=half_life, sampling=sampling))
    state.set_flavor(flavor("t4"))
    body: dict[str, Any] = cluster_queue_body("cq", [("t4", {GPU: gpus})])
    if fair:
        body["spec"]["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    if preempt:
        body["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    state.set_cluster_queue(compile_cluster_queue(decode(body, ClusterQueue)))
    state.set_local_queue("ns", "a", "cq")
    state.set_local_queue("ns", "b", "cq")
    state.set_namespace("ns", {"kubernetes.io/metadata.name": "ns"})
    return state


def admitted(state: Engine) -> list[str]:
    return [d.key[1] for d in state.schedule() if isinstance(d, Admit)]


def submit(state: Engine, name: str, queue: str, second: int, priority: int = 0) -> None:
    created = f"2026-01-01T00:00:{second:02d}Z"
    state.add_workload(info(name, created=created, priority=priority, queue=queue, requests={GPU: "1"}))


@pytest.mark.parametrize(("fair", "expected"), [(True, ["b1"]), (False, ["a1"])])
def test_the_lower_usage_goes_first_whatever_the_priority(fair: bool, expected: list[str]) -> None:
    state = engine(1, fair=fair)
    state.afs_seed("ns", "a", {GPU: 3000}, 0)  # a has used 3 GPUs lately, b nothing
    submit(state, "a1", "a", 1, priority=100)
    submit(state, "b1", "b", 2, priority=0)
    assert admitted(state) == expected


def test_equal_usage_falls_back_to_priority_then_time() -> None:
    state = engine(1)
    submit(state, "a1", "a", 1)
    submit(state, "b1", "b", 2, priority=5)
    assert admitted(state) == ["b1"]


def test_the_entry_penalty_makes_two_local_queues_alternate_within_one_cycle() -> None:
    state = engine(2)
    for n, second in ((1, 1), (2, 2)):
        submit(state, f"a{n}", "a", second)  # a's jobs are all older
    for n, second in ((1, 3), (2, 4)):
        submit(state, f"b{n}", "b", second)
    # a1 goes first (both at 0); its penalty then puts b ahead of a's second job.
    assert admitted(state) == ["a1", "b1"]


def test_without_the_scope_a_local_queue_takes_the_whole_queue_in_time_order() -> None:
    state = engine(2, fair=False)
    for name, queue, second in (("a1", "a", 1), ("a2", "a", 2), ("b1", "b", 3)):
        submit(state, name, queue, second)
    assert admitted(state) == ["a1", "a2"]


def test_a_local_queue_weight_divides_its_usage() -> None:
    state = engine(1)
    state.afs_seed("ns", "a", {GPU: 4000}, 0)  # 4 GPUs at weight 2: score 2
    state.afs_seed("ns", "b", {GPU: 3000}, 0)  # 3 GPUs at weight 1: score 3
    state.set_local_queue("ns", "a", "cq", weight=2.0)
    submit(state, "b1", "b", 1)
    submit(state, "a1", "a", 2)
    assert admitted(state) == ["a1"]


def test_a_sample_reorders_parked_workloads_and_a_lost_admission_takes_its_penalty_back() -> None:
    state = engine(1, half_life=600, sampling=300)
    submit(state, "a1", "a", 1)
    assert admitted(state) == ["a1"]
    submit(state, "a2", "a", 2)
    submit(state, "b1", "b", 3)
    state.schedule()  # both wait for the GPU a1 holds
    state.admission_written(("ns", "a1"), 0)
    assert state.afs is not None
    assert state.afs_sample("ns", "a", 600)
    assert state.afs.usage[("ns", "a")].consumed[GPU] > 0
    assert not state.afs_sample("ns", "a", 700)  # not due again before usageSamplingInterval
    state.remove_workload(("ns", "a1"))
    assert admitted(state) == ["b1"]  # b has used nothing, a is parked behind it
    state.admission_lost(("ns", "b1"))
    assert state.afs.penalty(("ns", "b")) == {}


@pytest.mark.parametrize(
    ("fair", "cohort_fair_sharing", "victim"),
    [(True, False, "old"), (False, False, "new"), (True, True, "old"), (False, True, "new")],
)
def test_preemption_takes_from_the_heavier_local_queue_first(
    fair: bool, cohort_fair_sharing: bool, victim: str
) -> None:
    # Kueue's candidate order with AFS: within the preemptor's ClusterQueue, the higher
    # LocalQueue usage first, then lower priority and the most recently admitted; the same
    # order when cohort fair sharing picks the candidates (Kueue sorts them alike).
    state = engine(2, fair=fair, preempt=True)
    if cohort_fair_sharing:
        state.scheduler.fair_sharing = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
    state.set_local_queue("ns", "c", "cq")
    submit(state, "old", "a", 1)
    assert admitted(state) == ["old"]
    submit(state, "new", "b", 2)
    assert admitted(state) == ["new"]
    state.afs_seed("ns", "a", {GPU: 5000}, 0)  # a used 5 GPUs lately
    submit(state, "urgent", "c", 3, priority=10)
    (preempt,) = [d for d in state.schedule() if isinstance(d, Preempt)]
    assert [t.key[1] for t in preempt.targets] == [victim]
