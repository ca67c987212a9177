"""A LocalQueue's spec.stopPolicy in the core, as Kueue v0.18.1: a held LocalQueue's waiting
workloads are not admitted (QuotaReserved=False "LocalQueue NAME is inactive") while another
LocalQueue of the same ClusterQueue goes on; its status says Stopped and counts nothing pending;
HoldAndDrain evicts what it admitted (LocalQueueStopped before ClusterQueueStopped); back to None
its workloads are admitted and those a stop evicted get Requeued=True LocalQueueRestarted."""

from __future__ import annotations

from reconciler.api import LocalQueueStatus
from reconciler.core.engine import Engine
from reconciler.core.queueing.stops import drain_cause, is_stopped, restart_for
from reconciler.core.scheduling.scheduler import Admit, Decision, Pending
from reconciler.core.status import local_queue_status
from tests.support.admission_engine import GPU, info, state_with


def by_name(decisions: list[Decision]) -> dict[str, Decision]:
    return {d.key[1]: d for d in decisions}


def two_queues(gpus: int = 4) -> Engine:
    state = state_with(("t4", {GPU: gpus}))
    state.set_local_queue("ns", "other", "cq")
    return state


def test_a_held_local_queues_workloads_wait_and_the_others_are_admitted() -> None:
    state = two_queues()
    state.set_local_queue("ns", "lq", "cq", stopped=True)
    state.add_workload(info("held", queue="lq", requests={GPU: "1"}))
    state.add_workload(info("free", queue="other", requests={GPU: "1"}))
    got = by_name(state.schedule())
    assert isinstance(got["free"], Admit)
    held = got["held"]
    assert isinstance(held, Pending)
    assert (held.reason, held.message) == ("Inadmissible", "LocalQueue lq is inactive")
    status = local_queue_status(state, "ns", "lq", LocalQueueStatus(), "2026-01-01T00:00:00Z", 2)
    (active,) = [c for c in status.conditions if c.type == "Active"]
    assert (active.status, active.reason, active.message) == ("False", "Stopped", "LocalQueue is stopped")
    assert status.pending_workloads == 0
    other = local_queue_status(state, "ns", "other", LocalQueueStatus(), "2026-01-01T00:00:00Z", 1)
    assert [c.reason for c in other.conditions if c.type == "Active"] == ["Ready"]
    assert other.admitted_workloads == 1


def test_a_local_queue_held_after_its_workload_waited_moves_it_out_and_resume_admits_it() -> None:
    state = two_queues(gpus=1)
    state.add_workload(info("a", queue="other", requests={GPU: "1"}))
    state.add_workload(info("b", queue="lq", requests={GPU: "1"}))
    got = by_name(state.schedule())
    assert isinstance(got["a"], Admit)
    assert isinstance(got["b"], Pending)
    assert got["b"].reason == "Pending"
    state.set_local_queue("ns", "lq", "cq", stopped=True)
    (moved,) = state.schedule()
    assert isinstance(moved, Pending)
    assert (moved.key[1], moved.message) == ("b", "LocalQueue lq is inactive")
    assert state.queues.pending_counts("cq") == (0, 0)  # out of its ClusterQueue, as Kueue's
    # Resumed with room: admitted.
    state.remove_workload(("ns", "a"))
    state.set_local_queue("ns", "lq", "cq", stopped=False)
    (admitted,) = state.schedule()
    assert isinstance(admitted, Admit)
    assert admitted.key[1] == "b"


def test_the_same_policy_again_changes_nothing() -> None:
    state = two_queues()
    state.set_local_queue("ns", "lq", "cq", stopped=True)
    state.add_workload(info("b", queue="lq", requests={GPU: "1"}))
    state.schedule()
    state.set_local_queue("ns", "lq", "cq", stopped=True)
    assert state.schedule() == []


def test_drain_evicts_through_the_local_queue_first() -> None:
    assert not is_stopped(None)
    assert not is_stopped("None")
    assert is_stopped("Hold")
    assert is_stopped("HoldAndDrain")
    lq = drain_cause("HoldAndDrain", None)
    assert lq is not None
    assert (lq.reason, lq.message) == ("LocalQueueStopped", "The LocalQueue is stopped")
    both = drain_cause("HoldAndDrain", "HoldAndDrain")
    assert both is not None
    assert both.reason == "LocalQueueStopped"
    cq = drain_cause("Hold", "HoldAndDrain")
    assert cq is not None
    assert (cq.reason, cq.message) == ("ClusterQueueStopped", "The ClusterQueue is stopped")
    assert drain_cause("Hold", None) is None
    assert drain_cause(None, "Hold") is None


def test_resume_requeues_what_the_stop_evicted() -> None:
    cause = restart_for("LocalQueueStopped", True, "None")
    assert cause is not None
    assert (cause.reason, cause.message) == (
        "LocalQueueRestarted",
        "The LocalQueue was restarted after being stopped",
    )
    assert restart_for("LocalQueueStopped", True, None) == cause
    assert restart_for("LocalQueueStopped", True, "Hold") is None
    assert restart_for("LocalQueueStopped", False, None) is None
    restarted = restart_for("ClusterQueueStopped", True, None)
    assert restarted is not None
    assert restarted.reason == "ClusterQueueRestarted"
    assert restart_for("Preempted", True, None) is None
