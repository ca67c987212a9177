"""A cohort cycle (a Cohort naming itself, or A -> B -> A): its ClusterQueues admit nothing, as in
Kueue, and say why: Active=False (HasCycle) on the ClusterQueue, QuotaReserved=False naming the
cycle on each Workload, a log line, and `reconciler explain` the same."""

from __future__ import annotations

import msgspec
from structlog.testing import capture_logs

from reconciler.api import ClusterQueue, Cohort
from reconciler.api.kueue import ClusterQueueStatus, LocalQueueStatus
from reconciler.api.resources import CLUSTER_QUEUES, COHORTS, WORKLOADS
from reconciler.core.quota.cohorts import cohort_cycle
from reconciler.core.scheduling.scheduler import Admit, Pending
from reconciler.core.status import cluster_queue_status, condition, local_queue_status
from reconciler.explain.analyze import explain
from reconciler.runtime.shared.actions import MergePatch
from tests.support.builders import cluster_queue_body
from tests.support.cohort_engine import cohort, submit, with_cohorts
from tests.support.explain_state import walkthrough_state, workload_of
from tests.support.preemption_engine import engine
from tests.support.priority_jobs import queued
from tests.support.reconciler_harness import GPU, Harness, decode, gpu_job, of, queues

CYCLE = "cohort has a cycle: x -> y -> x"
NOW = "2026-01-01T00:00:00Z"


def test_a_two_cohort_cycle_makes_the_cluster_queue_inactive_and_names_it() -> None:
    state = with_cohorts(engine(("a", 1, {"cohort": "x"})), cohort("x", parent="y"), cohort("y", parent="x"))
    assert cohort_cycle(state.cache.capacity, "a") == ["x", "y", "x"]
    assert state.cache.cluster_queue_active("a") == (
        "False",
        "HasCycle",
        f"Can't admit new workloads: {CYCLE}.",
    )
    submit(state, "a", "a1", "a2")
    decisions = state.schedule()
    assert decisions == [
        Pending(("ns", name), "Pending", f"ClusterQueue a is inactive: {CYCLE}", "a") for name in ("a1", "a2")
    ]
    with_cohorts(state, cohort("y"))  # broken: admitted, and Active again
    assert sorted(d.key[1] for d in state.schedule() if isinstance(d, Admit)) == ["a1"]
    assert state.cache.cluster_queue_active("a") == ("True", "Ready", "Can admit new workloads")


def test_a_cohort_naming_itself_is_a_cycle() -> None:
    state = with_cohorts(engine(("a", 1, {"cohort": "team"})), cohort("team", parent="team"))
    assert state.cache.cycle_problem("a") == "cohort has a cycle: team -> team"
    submit(state, "a", "a1")
    (decision,) = state.schedule()
    assert isinstance(decision, Pending)
    assert decision.message == "ClusterQueue a is inactive: cohort has a cycle: team -> team"


def test_a_cycle_above_a_cohort_is_named_from_where_the_walk_enters_it() -> None:
    state = with_cohorts(
        engine(("a", 1, {"cohort": "leaf"})),
        cohort("leaf", parent="x"),
        cohort("x", parent="y"),
        cohort("y", parent="x"),
    )
    assert cohort_cycle(state.cache.capacity, "a") == ["x", "y", "x"]
    assert state.cache.capacity.ancestors(("cq", "a")) == ["leaf", "x", "y"]


def test_a_tree_without_a_cycle_has_none() -> None:
    state = with_cohorts(engine(("a", 1, {"cohort": "team"})), cohort("org"), cohort("team", parent="org"))
    assert cohort_cycle(state.cache.capacity, "a") is None
    assert state.cache.cycle_problem("a") == ""


def test_the_status_of_the_cluster_queue_and_its_local_queue_say_it() -> None:
    state = with_cohorts(engine(("a", 1, {"cohort": "x"})), cohort("x", parent="y"), cohort("y", parent="x"))
    active = condition(cluster_queue_status(state, "a", ClusterQueueStatus(), NOW).conditions, "Active")
    assert active is not None
    assert (active.status, active.reason, active.message) == (
        "False",
        "HasCycle",
        f"Can't admit new workloads: {CYCLE}.",
    )
    lq = local_queue_status(state, "ns", "lq-a", LocalQueueStatus(), NOW)
    lq_active = condition(lq.conditions, "Active")
    assert lq_active is not None
    assert lq_active.reason == "ClusterQueueIsInactive"


def _cohort(h: Harness, name: str, parent: str | None) -> Cohort:
    spec = {"parentName": parent} if parent else {}
    result: Cohort = decode(
        {"metadata": {"name": name, "resourceVersion": h.next_rv()}, "spec": spec}, Cohort
    )
    return result


def _conditions(patch: MergePatch) -> dict[str, tuple[str, str, str]]:
    body = msgspec.json.decode(patch.patch)
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in body["status"]["conditions"]}


def test_the_controller_writes_the_conditions_and_logs_the_cycle_once() -> None:
    h = Harness()
    queues(h)
    body = cluster_queue_body("cq", [("t4", {GPU: 1})], cohort="x")
    h.event("MODIFIED", CLUSTER_QUEUES, decode(body, ClusterQueue))
    h.event("ADDED", COHORTS, _cohort(h, "x", "y"))
    h.event("ADDED", COHORTS, _cohort(h, "y", "x"))
    with capture_logs() as logs:
        h.sync_all()
        actions = h.take()
        workload = queued(h, gpu_job(h, "job"))
        h.event("ADDED", WORKLOADS, workload)
        actions += h.take()
        h.reconciler.flush_status()  # the tick that writes queue status
        h.event("MODIFIED", COHORTS, _cohort(h, "x", "y"))  # unchanged: no second line
        actions += h.take()
        h.reconciler.flush_status()
        actions += h.take()
    assert of(actions, "admit") == []
    cq_status = of(actions, "cq-status")[0]
    assert _conditions(cq_status)["Active"] == ("False", "HasCycle", f"Can't admit new workloads: {CYCLE}.")
    pending = [a for a in of(actions, "workload-status") if a.name == workload.metadata.name]
    assert pending, actions
    assert _conditions(pending[-1])["QuotaReserved"] == (
        "False",
        "Pending",
        f"ClusterQueue cq is inactive: {CYCLE}",
    )
    events = [msgspec.json.decode(a.body) for a in of(actions, "event")]
    assert [(e["type"], e["reason"], e["message"]) for e in events if e["type"] == "Warning"] == [
        ("Warning", "Pending", f"ClusterQueue cq is inactive: {CYCLE}")
    ]
    warnings = [e for e in logs if e["log_level"] == "warning" and e.get("cluster_queue") == "cq"]
    assert [w["problem"] for w in warnings] == [CYCLE]
    with capture_logs() as logs:
        h.event("MODIFIED", COHORTS, _cohort(h, "y", None))  # the cycle is broken
        (admit,) = of(h.take(), "admit")
        h.reconciler.flush_status()
    assert admit.name == workload.metadata.name
    assert [e["event"] for e in logs if e.get("cluster_queue") == "cq"] == [
        "ClusterQueue is out of the cohort cycle"
    ]


def test_explain_names_the_cycle_instead_of_saying_it_fits() -> None:
    state = walkthrough_state("job", "kueue-dra-pending-b")
    running = workload_of(state, "kueue-dra-running-a")
    state.workloads = [w for w in state.workloads if w is not running]  # B would fit now
    assert "it fits now" in explain(state).summary
    (cq,) = state.cluster_queues
    cq.spec.cohort_name = "x"
    state.cohorts = [
        decode({"metadata": {"name": n}, "spec": {"parentName": p}}, Cohort) for n, p in ("xy", "yx")
    ]
    ex = explain(state)
    problem = "cohort has a cycle: x -> y -> x"
    assert ex.summary == f"it waits (Pending): ClusterQueue {cq.metadata.name} is inactive: {problem}"
    assert any(
        f.startswith(
            f"ClusterQueue {cq.metadata.name} is inactive (HasCycle): Can't admit new workloads: {problem}."
        )
        and "spec.parentName" in f
        for f in ex.findings
    )
