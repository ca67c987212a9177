"""A PodsReady timeout tells a claim that cannot be allocated from a slow start."""

from __future__ import annotations

from reconciler.api import Pod, ResourceClaim
from reconciler.api.resources import JOBS, PODS, RESOURCE_CLAIMS
from reconciler.core.primitives.podstatus import eviction_cause
from tests.support.pending_claims import UNSCHEDULABLE, pending_pod, unallocated_claim
from tests.support.pods_ready_harness import T0, Clocked, admitted_job, conditions, events, started
from tests.support.reconciler_harness import of, queues


def stalled(pod: Pod | None, claim: ResourceClaim | None) -> tuple[str, list[tuple[str, str]]]:
    h = Clocked()
    queues(h)
    h.sync_all()
    job, workload, _ = admitted_job(h, "a")
    h.event("MODIFIED", JOBS, started(h, job))
    if claim is not None:
        h.event("ADDED", RESOURCE_CLAIMS, claim)
    if pod is not None:
        h.event("ADDED", PODS, pod)
    h.take()
    actions = h.tick(T0 + 61)
    (evict,) = of(actions, "evict")
    evicted = h.land(evict, workload)
    assert evicted.status.admission is not None  # its Job's pod is active: kept until it stops
    status, reason, message = conditions(evict)["Evicted"]
    assert (status, reason) == ("True", "PodsReadyTimeout")  # Kueue's reason, whatever the cause
    return message, events(h.take())


def test_an_unallocatable_claim_is_named_in_the_eviction() -> None:
    message, posted = stalled(pending_pod("a", claim="a-1-g-x"), unallocated_claim("a-1-g-x", "a-1"))
    assert message.startswith("Exceeded the PodsReady timeout ns/job-a-")
    assert message.endswith(
        "; cause: ResourceClaim ns/a-1-g-x of pod ns/a-1 cannot be allocated: " + UNSCHEDULABLE
    )
    assert ("EvictedDueToPodsReadyTimeout", message) in posted
    assert ("Stopped", message) in posted


def test_a_slow_start_keeps_kueues_message() -> None:
    message, _ = stalled(None, None)
    assert message.startswith("Exceeded the PodsReady timeout ns/job-a-")
    assert "cause" not in message


def test_the_schedulers_words_about_claims_are_enough() -> None:
    pod = pending_pod("p", claim=None, message="0/2 nodes are available: 2 cannot allocate all claims.")
    assert eviction_cause("ns", [pod], {}) == (
        "pod ns/p-1 cannot be scheduled: 0/2 nodes are available: 2 cannot allocate all claims."
    )
    other = pending_pod("p", claim=None, message="0/2 nodes are available: 2 Insufficient cpu.")
    assert eviction_cause("ns", [other], {}) is None
