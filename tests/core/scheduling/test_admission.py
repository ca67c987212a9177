"""Admission decisions: flavors in order, Kueue's messages, queue strategies, release."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.core.engine import Engine
from reconciler.core.model.clusterqueues import active_condition
from reconciler.core.model.workloads import WorkloadInfo, compile_workload
from reconciler.core.queueing.pending_queue import PendingQueue
from reconciler.core.queueing.queues import backoff_seconds
from reconciler.core.scheduling.flavor_labels import node_labels_for
from reconciler.core.scheduling.scheduler import Admit, Decision, Pending
from reconciler.integrations.batchjob import workload_for_job
from tests.support.admission_engine import GPU, info, state_with
from tests.support.builders import cluster_queue, job


def decisions_by_name(decisions: list[Decision]) -> dict[str, Decision]:
    return {d.key[1]: d for d in decisions}


def test_walkthrough_quota_message() -> None:
    state = state_with(("p3-t4", {"cpu": "8", "memory": "16Gi", GPU: 1}))
    a = info("a", requests={GPU: "1"})
    b = info("b", requests={GPU: "1"})
    state.add_workload(a)
    state.add_workload(b)
    got = decisions_by_name(state.schedule())
    assert isinstance(got[a.name], Admit)
    admitted = got[a.name]
    assert isinstance(admitted, Admit)
    assert admitted.pod_sets[0].flavors == {GPU: "p3-t4"}
    pending = got[b.name]
    assert isinstance(pending, Pending)
    assert pending.reason == "Pending"
    assert pending.message == (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
        "in flavor p3-t4, 1 more needed"
    )


def test_first_fitting_flavor_wins_and_reasons_are_sorted() -> None:
    state = state_with(("small", {"cpu": "1", GPU: 1}), ("big", {"cpu": "8", GPU: 4}))
    w = info("w", requests={"cpu": "2", GPU: "2"})
    state.add_workload(w)
    (decision,) = state.schedule()
    assert isinstance(decision, Admit)
    assert decision.pod_sets[0].flavors == {"cpu": "big", GPU: "big"}

    x = info("x", requests={"cpu": "7", GPU: "3"})
    state.add_workload(x)
    (decision,) = state.schedule()
    assert isinstance(decision, Pending)
    assert decision.message == (
        "couldn't assign flavors to pod set main: "
        "insufficient quota for cpu in flavor small, previously considered podsets requests (0) "
        "+ current podset request (7) > maximum capacity (1), "
        "insufficient unused quota for cpu in flavor big, 1 more needed, "
        "insufficient unused quota for nvidia.com/gpu in flavor big, 1 more needed"
    )


def test_uncovered_resource_message() -> None:
    state = state_with(("f", {"cpu": "8"}))
    state.add_workload(info("w", requests={"cpu": "1", GPU: "1"}))
    (decision,) = state.schedule()
    assert isinstance(decision, Pending)
    assert decision.message == (
        "couldn't assign flavors to pod set main: resource nvidia.com/gpu unavailable in ClusterQueue"
    )


def test_node_selector_must_match_flavor_labels() -> None:
    state = state_with(
        ("t4", {GPU: 4}), ("a100", {GPU: 4}), labels={"t4": {"gpu": "t4"}, "a100": {"gpu": "a100"}}
    )
    state.add_workload(info("w", requests={GPU: "1"}, node_selector={"gpu": "a100", "zone": "x"}))
    (decision,) = state.schedule()
    assert isinstance(decision, Admit)
    assert decision.pod_sets[0].flavors == {GPU: "a100"}
    state.add_workload(info("v", requests={GPU: "1"}, node_selector={"gpu": "h100"}))
    (decision,) = state.schedule()
    assert isinstance(decision, Pending)
    assert decision.message == (
        "couldn't assign flavors to pod set main: flavor a100 doesn't match node affinity, "
        "flavor t4 doesn't match node affinity"
    )


def test_best_effort_fifo_lets_smaller_workloads_pass() -> None:
    state = state_with(("f", {GPU: 2}))
    state.add_workload(info("first", created="2026-01-01T00:00:01Z", requests={GPU: "1"}))
    state.add_workload(info("big", created="2026-01-01T00:00:02Z", requests={GPU: "2"}))
    state.add_workload(info("small", created="2026-01-01T00:00:03Z", requests={GPU: "1"}))
    got = decisions_by_name(state.schedule())
    assert isinstance(got["first"], Admit)
    assert isinstance(got["big"], Pending)
    assert isinstance(got["small"], Admit)


def test_strict_fifo_blocks_behind_the_head() -> None:
    state = state_with(("f", {GPU: 2}), strategy="StrictFIFO")
    state.add_workload(info("first", created="2026-01-01T00:00:01Z", requests={GPU: "1"}))
    state.add_workload(info("big", created="2026-01-01T00:00:02Z", requests={GPU: "2"}))
    state.add_workload(info("small", created="2026-01-01T00:00:03Z", requests={GPU: "1"}))
    got = decisions_by_name(state.schedule())
    assert isinstance(got["first"], Admit)
    assert isinstance(got["big"], Pending)
    assert "small" not in got
    # Releasing the first lets the head in, then the small one waits again.
    state.remove_workload(("ns", "first"))
    got = decisions_by_name(state.schedule())
    assert isinstance(got["big"], Admit)
    assert isinstance(got["small"], Pending)


def test_a_strict_fifo_head_that_no_flavor_can_ever_hold_blocks_the_queue_too() -> None:
    """Kueue requeues a StrictFIFO head at once whatever kept it out, so a request above every
    flavor's quota (not only one waiting for quota in use) keeps the newer ones out."""
    state = state_with(("f", {GPU: 2}), strategy="StrictFIFO")
    state.add_workload(info("huge", created="2026-01-01T00:00:01Z", requests={GPU: "3"}))
    state.add_workload(info("small", created="2026-01-01T00:00:02Z", requests={GPU: "1"}))
    got = decisions_by_name(state.schedule())
    assert isinstance(got["huge"], Pending)
    assert "small" not in got
    assert state.ledger.used("cq", ("f", GPU)) == 0
    # Once the head is gone, the one behind it is admitted.
    state.remove_workload(("ns", "huge"))
    assert isinstance(decisions_by_name(state.schedule())["small"], Admit)


def test_a_blocking_strict_fifo_head_that_is_deleted_lets_the_next_one_in() -> None:
    state = state_with(("f", {GPU: 2}), strategy="StrictFIFO")
    state.add_workload(info("first", created="2026-01-01T00:00:01Z", requests={GPU: "1"}))
    state.add_workload(info("big", created="2026-01-01T00:00:02Z", requests={GPU: "2"}))
    state.add_workload(info("small", created="2026-01-01T00:00:03Z", requests={GPU: "1"}))
    assert "small" not in decisions_by_name(state.schedule())
    state.remove_workload(("ns", "big"))  # deleted while waiting: no quota comes back
    assert isinstance(decisions_by_name(state.schedule())["small"], Admit)


@pytest.mark.parametrize("strategy", ["BestEffortFIFO", "StrictFIFO"])
def test_priority_then_creation_order(strategy: str) -> None:
    state = state_with(("f", {GPU: 1}), strategy=strategy)
    state.add_workload(info("old", created="2026-01-01T00:00:01Z", requests={GPU: "1"}))
    state.add_workload(info("urgent", created="2026-01-01T00:00:09Z", priority=10, requests={GPU: "1"}))
    got = decisions_by_name(state.schedule())
    assert isinstance(got["urgent"], Admit)
    assert isinstance(got["old"], Pending)


def test_release_admits_the_next_without_any_other_change() -> None:
    state = state_with(("f", {GPU: 1}))
    state.add_workload(info("a", requests={GPU: "1"}))
    state.add_workload(info("bb", requests={GPU: "1"}))
    state.schedule()
    state.remove_workload(("ns", "a"))
    got = decisions_by_name(state.schedule())
    assert isinstance(got["bb"], Admit)
    assert state.ledger.used("cq", ("f", GPU)) == 1


def test_rollback_returns_quota_and_requeues() -> None:
    state = state_with(("f", {GPU: 1}))
    state.add_workload(info("a", requests={GPU: "1"}))
    (decision,) = state.schedule()
    assert isinstance(decision, Admit)
    state.rollback(("ns", "a"))
    assert state.ledger.used("cq", ("f", GPU)) == 0
    (again,) = state.schedule()
    assert isinstance(again, Admit)


def test_missing_local_queue_then_created() -> None:
    state = state_with(("f", {GPU: 1}))
    state.add_workload(info("w", queue="other", requests={GPU: "1"}))
    (decision,) = state.schedule()
    assert isinstance(decision, Pending)
    assert (decision.reason, decision.message) == ("Inadmissible", "LocalQueue other doesn't exist")
    state.set_local_queue("ns", "other", "cq")
    (decision,) = state.schedule()
    assert isinstance(decision, Admit)


def test_namespace_selector() -> None:
    state = state_with(("f", {GPU: 1}), namespace_selector={"matchLabels": {"team": "b"}})
    state.add_workload(info("w", requests={GPU: "1"}))
    (decision,) = state.schedule()
    assert isinstance(decision, Pending)
    assert decision.message == "Workload namespace doesn't match ClusterQueue selector"
    state.set_namespace("ns", {"team": "b"})
    (decision,) = state.schedule()
    assert isinstance(decision, Admit)


def test_missing_flavor_makes_cluster_queue_inactive() -> None:
    model = cluster_queue("cq", [("p3-t4", {GPU: 1}), ("x", {GPU: 1})])
    assert active_condition(model, {"p3-t4"}) == (
        "False",
        "FlavorNotFound",
        "Can't admit new workloads: references missing ResourceFlavor(s): x.",
    )
    assert active_condition(model, {"p3-t4", "x"}) == ("True", "Ready", "Can admit new workloads")
    state = Engine()
    state.set_cluster_queue(model)
    state.set_local_queue("ns", "lq", "cq")
    state.set_namespace("ns", {})
    state.add_workload(info("w", requests={GPU: "1"}))
    (decision,) = state.schedule()
    assert isinstance(decision, Pending)
    assert decision.message == "ClusterQueue cq is inactive"


def test_pending_queue_order_and_groups() -> None:
    queue = PendingQueue()
    queue.push(("ns", "a"), 0, "t1", "u1")
    queue.push(("ns", "b"), 0, "t2", "u2")
    queue.push(("ns", "c"), 5, "t9", "u3")  # higher priority goes first
    queue.push(("ns", "a"), 0, "t3", "u1")  # re-push moves it back
    first = queue.next_candidate()
    assert first is not None
    assert first.key == ("ns", "c")
    queue.take(first)
    second = queue.next_candidate()
    assert second is not None
    assert second.key == ("ns", "b")
    queue.park(("ns", "b"), "shape-1")
    queue.settle("shape-1")
    third = queue.next_candidate()
    assert third is not None
    assert third.key == ("ns", "a")
    queue.park(("ns", "a"), "shape-1")
    queue.settle("shape-1")
    assert queue.next_candidate() is None
    assert (queue.active_count(), queue.inadmissible_count()) == (0, 2)
    # Quota moved: the group's first member in queue order stands for the group.
    queue.wake_parked()
    head = queue.next_candidate()
    assert head is not None
    assert (head.key, head.group) == (("ns", "b"), "shape-1")
    assert set(queue.group_members("shape-1")) == {("ns", "b"), ("ns", "a")}
    assert queue.remove(("ns", "b"))
    head = queue.next_candidate()
    assert head is not None
    assert head.key == ("ns", "a")
    assert len(queue) == 1


@pytest.mark.parametrize(
    ("count", "base", "cap", "expected"),
    [
        (1, 60, 3600, 60),
        (2, 60, 3600, 120),
        (6, 60, 3600, 1920),
        (7, 60, 3600, 3600),
        (40, 60, 3600, 3600),
        (0, 60, 3600, 0),
        (3, 10, 0, 40),
        (2, 0, 3600, 0),
    ],
)
def test_backoff_arithmetic(count: int, base: int, cap: int, expected: float) -> None:
    assert backoff_seconds(count, base, cap, jitter=0) == expected
    jittered = backoff_seconds(count, base, cap)
    assert expected <= jittered <= expected * 1.0001


def test_only_the_first_of_a_parked_group_is_told_and_its_message_follows_usage() -> None:
    """Kueue's scheduling equivalence hashing (on by default in v0.18): once the first workload of
    a shape and priority does not fit, the others of that shape and priority wait without a
    verdict of their own; after a release the first is looked at again, and the next one once the
    first is admitted (conformance scenario equivalent-pending)."""
    state = state_with(("f", {GPU: 4}))
    state.add_workload(info("r1", created="2026-01-01T00:00:01Z", requests={GPU: "2"}))
    state.add_workload(info("r2", created="2026-01-01T00:00:02Z", requests={GPU: "2"}))
    waiting = [f"w{i}" for i in range(5)]
    for i, name in enumerate(waiting):
        state.add_workload(info(name, created=f"2026-01-01T00:01:0{i}Z", requests={GPU: "3"}))

    def told(got: dict[str, Any]) -> dict[str, str]:
        """The pending verdicts, by how much quota each says is missing."""
        return {n: d.message.rsplit(", ", 1)[1] for n, d in got.items() if isinstance(d, Pending)}

    assert told(decisions_by_name(state.schedule())) == {"w0": "3 more needed"}
    # One runner finishes: the first is looked at again, and told how much it lacks now.
    state.remove_workload(("ns", "r1"))
    assert told(decisions_by_name(state.schedule())) == {"w0": "1 more needed"}
    # Nothing changed: nothing is reported again.
    state.remove_workload(("ns", "nonexistent"))
    assert state.schedule() == []
    # The other finishes: the first in queue order fits, the next is told it waits for 2 more.
    state.remove_workload(("ns", "r2"))
    got = decisions_by_name(state.schedule())
    assert isinstance(got["w0"], Admit)
    assert told(got) == {"w1": "2 more needed"}
    assert state.queues.queues["cq"].inadmissible_count() == 4


def test_flavor_node_labels_are_recorded_for_the_job() -> None:
    state = state_with(("p3-t4", {GPU: 1}), labels={"p3-t4": {"nvidia.com/gpu.product": "Tesla-T4"}})
    state.add_workload(info("a", requests={GPU: "1"}))
    (decision,) = state.schedule()
    assert isinstance(decision, Admit)
    assert node_labels_for(decision.pod_sets, state.flavors) == {
        "main": {"nvidia.com/gpu.product": "Tesla-T4"}
    }


def test_replacing_an_admitted_workload_returns_its_quota_to_the_queue() -> None:
    state = state_with(("f", {GPU: 1}))
    a = info("a", created="2026-01-01T00:00:01Z", requests={GPU: "1"})
    state.add_workload(a)
    state.add_workload(info("b", created="2026-01-01T00:00:02Z", requests={GPU: "1"}))
    state.schedule()
    assert state.is_admitted(("ns", "a"))
    # The workload comes back as pending (e.g. its admission was cleared elsewhere).
    state.add_workload(a)
    got = decisions_by_name(state.schedule())
    assert isinstance(got["a"], Admit)
    assert "b" not in got or isinstance(got["b"], Pending)
    assert state.ledger.used("cq", ("f", GPU)) == 1


def test_local_queue_status_counts_and_usage() -> None:
    from reconciler.api import LocalQueueStatus
    from reconciler.core.status import local_queue_status

    state = state_with(("p3-t4", {GPU: 1}))
    state.add_workload(info("a", created="2026-01-01T00:00:01Z", requests={GPU: "1"}))
    state.add_workload(info("b", created="2026-01-01T00:00:02Z", requests={GPU: "1"}))
    state.schedule()
    status = local_queue_status(state, "ns", "lq", LocalQueueStatus(), "2026-01-01T00:00:03Z")
    assert (status.pending_workloads, status.reserving_workloads, status.admitted_workloads) == (1, 1, 1)
    assert [(r.name, r.total) for r in status.flavors_usage[0].resources] == [(GPU, "1")]
    assert [(c.type, c.status, c.reason) for c in status.conditions] == [("Active", "True", "Ready")]
    state.delete_cluster_queue("cq")
    status = local_queue_status(state, "ns", "lq", status, "2026-01-01T00:00:04Z")
    assert [(c.status, c.reason, c.message) for c in status.conditions] == [
        ("False", "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue")
    ]


def test_a_held_workload_counts_as_pending_but_is_never_admitted_until_added() -> None:
    state = state_with(("t4", {GPU: 2}))
    waiting = info("a", requests={GPU: "1"})
    state.hold(waiting)
    state.set_local_queue("ns", "lq", "cq")  # a LocalQueue update must not queue it either
    assert state.schedule() == []
    assert state.queues.pending_counts("cq") == (0, 1)
    assert state.queues.local_queue_pending_counts("ns", "lq") == (0, 1)
    state.add_workload(waiting)
    (admit,) = state.schedule()
    assert isinstance(admit, Admit)
    assert not state.is_held(waiting.key)
    assert state.queues.pending_counts("cq") == (0, 0)
    state.hold(info("b", requests={GPU: "1"}))
    state.remove_workload(("ns", "b"))
    assert state.queues.pending_counts("cq") == (0, 0)
    assert state.queues.local_queue_pending_counts("ns", "lq") == (0, 0)


def test_a_negative_nominal_quota_makes_the_cluster_queue_unusable() -> None:
    from reconciler.core.model.clusterqueues import InvalidClusterQueueError

    with pytest.raises(InvalidClusterQueueError) as err:
        cluster_queue("cq", [("t4", {"nvidia.com/gpu": "-1"})])
    assert str(err.value).startswith(
        'spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: Invalid value: "-1": '
        "must be greater than or equal to 0"
    )


def _two_pod_sets(name: str, first: str, second: str) -> WorkloadInfo:
    """A workload of two pod sets (a leader and workers, as a JobSet's), each one pod asking
    for `first` / `second` GPUs."""
    import msgspec

    from reconciler.api import PodSet

    wl = workload_for_job(job(name, uid=f"uid-{name}", requests={GPU: first}))
    workers = workload_for_job(job(name, uid=f"uid-{name}", requests={GPU: second})).spec.pod_sets[0]
    pod_sets = [
        msgspec.structs.replace(wl.spec.pod_sets[0], name="leader"),
        PodSet(name="workers", template=workers.template, count=1),
    ]
    wl = msgspec.structs.replace(wl, spec=msgspec.structs.replace(wl.spec, pod_sets=pod_sets))
    result = compile_workload(wl, lookup_template=lambda ns, n: None, mappings={})
    result.name = name
    result.created = "2026-01-01T00:00:09Z"
    return result


def test_every_pod_set_that_waits_for_quota_is_named_counted_after_the_ones_before() -> None:
    state = state_with(("t4", {GPU: 2}))
    state.add_workload(info("a", requests={GPU: "2"}))
    state.add_workload(_two_pod_sets("b", "1", "1"))
    pending = decisions_by_name(state.schedule())["b"]
    assert isinstance(pending, Pending)
    assert pending.message == (
        "couldn't assign flavors to pod set leader: insufficient unused quota for nvidia.com/gpu "
        "in flavor t4, "
        "1 more needed; couldn't assign flavors to pod set workers: insufficient unused quota for "
        "nvidia.com/gpu in flavor t4, 2 more needed"
    )


def test_a_pod_set_that_can_never_fit_ends_the_message() -> None:
    state = state_with(("t4", {GPU: 2}))
    state.add_workload(info("a", requests={GPU: "2"}))
    state.add_workload(_two_pod_sets("b", "1", "2"))
    pending = decisions_by_name(state.schedule())["b"]
    assert isinstance(pending, Pending)
    assert pending.message == (
        "couldn't assign flavors to pod set leader: insufficient unused quota for nvidia.com/gpu "
        "in flavor t4, "
        "1 more needed; couldn't assign flavors to pod set workers: insufficient quota for nvidia.com/gpu "
        "in flavor t4, previously considered podsets requests (1) + current podset request (2) > maximum "
        "capacity (2)"
    )
