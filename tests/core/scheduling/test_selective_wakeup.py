"""A release re-evaluates only the heads whose inputs it moved; everything else is as before.

The reference is the same engine with kept verdicts off (`Scheduler(kept=None)`): every
woken head is evaluated afresh, as before this change. On random cohort trees (flat or
hierarchical, two flavors, two resources, borrowing and lending limits, preemption,
StrictFIFO) both must make the very same decisions, step by step.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.api import ClusterQueue
from reconciler.core.engine import Engine
from reconciler.core.model.clusterqueues import compile_cluster_queue
from reconciler.core.model.workloads import compile_workload
from reconciler.core.quota.cohorts import compile_cohort
from reconciler.core.scheduling.flavors import assign_flavors
from reconciler.core.scheduling.scheduler import Admit, Scheduler
from reconciler.integrations.batchjob import workload_for_job
from tests.support.builders import cluster_queue_body, decode, flavor, job
from tests.support.cohort_trees import CPU, FLAVORS, GPU, PREEMPTION, Tree, cohort_object, step, trees


def build(tree: Tree, scheduler: Scheduler) -> Engine:
    state = Engine(scheduler=scheduler)
    for name in FLAVORS:
        state.set_flavor(flavor(name))
    state.set_namespace("ns", {})
    for name, parent, gpus in tree.cohorts:
        state.set_cohort(compile_cohort(cohort_object(name, parent, gpus)))
    for i, q in enumerate(tree.queues):
        quotas = [(f, {GPU: g, CPU: c}) for f, (g, c) in zip(q.flavors, q.nominal, strict=True)]
        limits: dict[tuple[str, str], dict[str, str | int]] = {}
        for f, r, kind, value in q.limits:
            limits.setdefault((f, r), {})[kind] = value
        body = cluster_queue_body(f"cq{i}", quotas, cohort=q.parent, limits=limits, strategy=q.strategy)
        preemption = PREEMPTION[q.preemption]
        if preemption is not None:
            body["spec"]["preemption"] = preemption
        state.set_cluster_queue(compile_cluster_queue(decode(body, ClusterQueue)))
        state.set_local_queue("ns", f"lq{i}", f"cq{i}")
    return state


ops = st.lists(
    st.one_of(
        # add: (queue, GPUs, CPUs, priority)
        st.tuples(st.just("add"), st.integers(0, 3), st.integers(1, 3), st.integers(0, 2), st.integers(0, 2)),
        st.tuples(st.just("add"), st.integers(0, 3), st.integers(1, 2), st.just(0), st.integers(0, 2)),
        st.tuples(st.just("finish"), st.integers(0, 1000), st.just(0), st.just(0), st.just(0)),
        st.tuples(st.just("delete"), st.integers(0, 1000), st.just(0), st.just(0), st.just(0)),
    ),
    min_size=10,
    max_size=50,
)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees(), ops)
def test_kept_verdicts_decide_exactly_as_evaluating_every_woken_head(
    tree: Tree, operations: list[tuple[str, int, int, int, int]]
) -> None:
    kept, fresh = build(tree, Scheduler()), build(tree, Scheduler(kept=None))
    admitted: tuple[list[tuple[str, str]], list[tuple[str, str]]] = ([], [])
    waiting: list[tuple[str, str]] = []
    for n, (op, a, gpus, cpus, priority) in enumerate(operations):
        for state, ours in zip((kept, fresh), admitted, strict=True):
            if op == "add":
                requests = {GPU: str(gpus), **({CPU: str(cpus)} if cpus else {})}
                spec = job(f"j{n}", queue=f"lq{a % len(tree.queues)}", uid=f"u{n:04d}", requests=requests)
                info = compile_workload(
                    workload_for_job(spec), lookup_template=lambda ns, n: None, mappings={}
                )
                info.created = f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}Z"
                info.priority = priority
                state.add_workload(info)
                key = info.key
            elif op == "finish" and ours:
                state.remove_workload(ours.pop(a % len(ours)))
            elif op == "delete" and waiting:
                state.remove_workload(waiting[a % len(waiting)])
        if op == "add":
            waiting.append(key)
        elif op == "delete" and waiting:
            waiting.pop(a % len(waiting))
        assert step(kept, admitted[0]) == step(fresh, admitted[1]), (n, op)
        assert kept.ledger.snapshot() == fresh.ledger.snapshot()


def no_template(namespace: str, name: str) -> None:
    return None


class CountingAssign:
    """Counts flavor assignments (the real function does the work)."""

    def __init__(self) -> None:
        self.real = assign_flavors
        self.names: list[str] = []

    def __call__(self, workload: Any, *args: Any, **kwargs: Any) -> Any:
        self.names.append(workload.name)
        return self.real(workload, *args, **kwargs)


def two_flavor_cohort() -> Engine:
    """cq-t4 (1 t4 GPU) and cq-a100 (1 a100 GPU) share a cohort; each runs one and parks one."""
    state = Engine()
    for name in FLAVORS:
        state.set_flavor(flavor(name))
    state.set_namespace("ns", {})
    for name in FLAVORS:
        body = cluster_queue_body(f"cq-{name}", [(name, {GPU: 1})], cohort="pool")
        state.set_cluster_queue(compile_cluster_queue(decode(body, ClusterQueue)))
        state.set_local_queue("ns", f"lq-{name}", f"cq-{name}")
    for n, name in enumerate(["t4-run", "a100-run", "t4-wait", "a100-wait"]):
        spec = job(name, queue=f"lq-{name.split('-')[0]}", uid=f"u{n}", requests={GPU: "1"})
        info = compile_workload(workload_for_job(spec), lookup_template=lambda ns, n: None, mappings={})
        info.name = name
        info.created = f"2026-01-01T00:00:0{n}Z"
        state.add_workload(info)
    assert sorted(d.key[1] for d in state.schedule() if isinstance(d, Admit)) == ["a100-run", "t4-run"]
    return state


def test_a_release_of_one_flavor_does_not_evaluate_heads_that_cannot_use_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = two_flavor_cohort()
    counter = CountingAssign()
    monkeypatch.setattr("reconciler.core.scheduling.queue_pass.assign_flavors", counter)
    state.remove_workload(("ns", "t4-run"))
    admits = [d.key[1] for d in state.schedule() if isinstance(d, Admit)]
    assert admits == ["t4-wait"]
    # The a100 head was woken with the cohort but kept its verdict: no a100 usage moved.
    assert counter.names == ["t4-wait"]


def test_without_kept_verdicts_every_woken_head_is_evaluated(monkeypatch: pytest.MonkeyPatch) -> None:
    state = two_flavor_cohort()
    state.scheduler.kept = None
    counter = CountingAssign()
    monkeypatch.setattr("reconciler.core.scheduling.queue_pass.assign_flavors", counter)
    state.remove_workload(("ns", "t4-run"))
    assert [d.key[1] for d in state.schedule() if isinstance(d, Admit)] == ["t4-wait"]
    assert sorted(counter.names) == ["a100-wait", "t4-wait"]


def test_a_configuration_change_drops_kept_verdicts() -> None:
    state = two_flavor_cohort()
    body = cluster_queue_body("cq-a100", [("a100", {GPU: 2})], cohort="pool")
    state.set_cluster_queue(compile_cluster_queue(decode(body, ClusterQueue)))
    assert [d.key[1] for d in state.schedule() if isinstance(d, Admit)] == ["a100-wait"]


def test_quota_taken_again_in_the_same_cycle_leaves_the_other_heads_their_verdicts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """a and b (1 t4 GPU each) share a cohort, each runs one and parks two; a's ends."""
    state = Engine()
    state.set_flavor(flavor("t4"))
    state.set_namespace("ns", {})
    for name in ("a", "b"):
        body = cluster_queue_body(name, [("t4", {GPU: 1})], cohort="pool")
        state.set_cluster_queue(compile_cluster_queue(decode(body, ClusterQueue)))
        state.set_local_queue("ns", f"lq-{name}", name)
    for n, name in enumerate(["a-run", "b-run", "a-w1", "b-w1", "a-w2", "b-w2"]):
        spec = job(name, queue=f"lq-{name[0]}", uid=f"u{n}", requests={GPU: "1"})
        info = compile_workload(workload_for_job(spec), lookup_template=no_template, mappings={})
        info.name = name
        info.created = f"2026-01-01T00:00:0{n}Z"
        state.add_workload(info)
    assert sorted(d.key[1] for d in state.schedule() if isinstance(d, Admit)) == ["a-run", "b-run"]
    counter = CountingAssign()
    monkeypatch.setattr("reconciler.core.scheduling.queue_pass.assign_flavors", counter)
    state.remove_workload(("ns", "a-run"))
    decisions = [(d.key[1], getattr(d, "message", "admitted")) for d in state.schedule()]
    assert decisions == [
        ("a-w1", "admitted"),
        ("b-w1", "Workload no longer fits after processing another workload"),
        (
            "b-w1",
            "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
            "in flavor t4, 1 more needed",
        ),
        # waited untold behind a-w1, of its shape (Kueue's equivalence hashing): told on its turn
        (
            "a-w2",
            "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
            "in flavor t4, 1 more needed",
        ),
    ]
    # Both heads are tried on the freed GPU; once a-w1 took it, b-w1 and a-w2 find the usage as
    # it was when b-w1's verdict was made, and keep it.
    assert sorted(counter.names) == ["a-w1", "b-w1"]
