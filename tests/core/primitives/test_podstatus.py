"""Pod readiness counts, the claim report, the Job template restore and the timer heap."""

from __future__ import annotations

from typing import Any

import msgspec

from reconciler.api import Condition, Pod, ResourceClaim, pod_template_view
from reconciler.core.primitives.podstatus import (
    ClaimProblem,
    all_claims_allocated,
    claim_problems,
    claims_condition,
    eviction_cause,
    lasting,
)
from reconciler.integrations.batchjob import restore_patch
from reconciler.runtime.shared.podindex import PodIndex
from reconciler.runtime.shared.timers import Timers
from tests.support.builders import decode

UNSCHEDULABLE = "0/2 nodes are available: 1 cannot allocate all claims, 1 node(s) didn't match selector."


def pod(
    name: str,
    *,
    phase: str = "Pending",
    ready: bool = False,
    node: str = "",
    unschedulable: str | None = None,
    reason: str = "Unschedulable",
    claim: str | None = None,
    job_name: str = "a",
) -> Pod:
    conditions: list[dict[str, Any]] = []
    if ready:
        conditions.append({"type": "Ready", "status": "True"})
    if unschedulable is not None:
        conditions.append(
            {"type": "PodScheduled", "status": "False", "reason": reason, "message": unschedulable}
        )
    status: dict[str, Any] = {"phase": phase, "conditions": conditions}
    if claim:
        status["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": claim}]
    body = {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": job_name, "controller": True}
            ],
        },
        "spec": {"nodeName": node},
        "status": status,
    }
    result: Pod = decode(body, Pod)
    return result


def claim(name: str, *, allocated: bool, owner_pod: str = "p1") -> ResourceClaim:
    body: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "ownerReferences": [{"kind": "Pod", "name": owner_pod}],
        },
        "status": {"allocation": {"devices": {"results": []}}} if allocated else {},
    }
    result: ResourceClaim = decode(body, ResourceClaim)
    return result


def test_claim_report_quotes_the_scheduler_and_names_pod_and_claim() -> None:
    pods = [pod("p1", unschedulable=UNSCHEDULABLE, claim="p1-gpu-x"), pod("p2", phase="Running", node="n1")]
    claims = {("ns", "p1-gpu-x"): claim("p1-gpu-x", allocated=False)}
    problems = claim_problems("ns", pods, claims)
    assert [(p.pod, p.claim) for p in problems] == [("p1", "p1-gpu-x")]
    status, reason, message = claims_condition("ns", problems, None, all_allocated=False) or ("", "", "")
    assert (status, reason) == ("False", "ClaimNotAllocated")
    assert (
        message
        == f"Pod ns/p1 cannot be scheduled: ResourceClaim ns/p1-gpu-x is not allocated: {UNSCHEDULABLE}"
    )


def test_claim_report_clears_once_allocated_and_is_absent_when_never_needed() -> None:
    pods = [pod("p1", unschedulable=UNSCHEDULABLE, claim="p1-gpu-x")]
    allocated = {("ns", "p1-gpu-x"): claim("p1-gpu-x", allocated=True)}
    assert claim_problems("ns", pods, allocated) == []
    assert all_claims_allocated("ns", pods, allocated)
    assert not all_claims_allocated("ns", [], allocated)  # no pod yet: nothing is known
    assert not all_claims_allocated("ns", pods, {})
    assert claims_condition("ns", [], None, all_allocated=True) is None
    previous = Condition("ClaimsAllocated", "False", "ClaimNotAllocated", "x", "2026-01-01T00:00:00Z")
    # Re-admitted after an eviction, before its new pods exist: the old report stands.
    assert claims_condition("ns", [], previous, all_allocated=False) is None
    assert claims_condition("ns", [], previous, all_allocated=True) == (
        "True",
        "ClaimsAllocated",
        "All ResourceClaims of the workload's pods are allocated",
    )


def test_a_pod_the_scheduler_reports_gated_is_no_claim_problem() -> None:
    """A plain pod held at Kueue's admission gate has its claim unallocated as it should; the
    scheduler's SchedulingGated condition outlives the ungating for a moment (seen in the
    pod-single conformance scenario: a Warning and ClaimsAllocated=False Kueue never writes)."""
    gated = "Scheduling is blocked due to non-empty scheduling gates"
    pods = [pod("p1", unschedulable=gated, reason="SchedulingGated", claim="p1-gpu-x")]
    claims = {("ns", "p1-gpu-x"): claim("p1-gpu-x", allocated=False)}
    assert claim_problems("ns", pods, claims) == []
    assert eviction_cause("ns", pods, claims) is None


def test_pod_index_maps_pods_and_their_claims_to_the_job() -> None:
    index = PodIndex(kinds=frozenset({"Job"}))
    assert index.on_pod(("ns", "p1"), pod("p1")) == ("ns", "a")
    assert index.on_claim(("ns", "c"), claim("c", allocated=False)) == ("ns", "a")
    assert [p.metadata.name for p in index.pods_of(("ns", "a"), "Job")] == ["p1"]
    assert index.on_pod(("ns", "p1"), None) == ("ns", "a")
    assert index.pods_of(("ns", "a"), "Job") == []
    assert index.on_claim(("ns", "c"), None) is None  # its pod is gone


def template(selector: dict[str, str], labels: dict[str, str]) -> Any:
    raw = msgspec.json.encode(
        {"metadata": {"labels": labels}, "spec": {"nodeSelector": selector, "containers": []}}
    )
    return pod_template_view(msgspec.Raw(raw))


def test_restore_removes_what_starting_added_and_nothing_else() -> None:
    original = template({"zone": "a"}, {"app": "x"})
    started = template(
        {"zone": "a", "gpu": "t4"},
        {"app": "x", "kueue.x-k8s.io/podset": "main", "batch.kubernetes.io/job-name": "a"},
    )
    patch = restore_patch(started, original)
    assert patch is not None
    assert msgspec.json.decode(patch) == {
        "spec": {
            "template": {
                "spec": {"nodeSelector": {"gpu": None}},
                "metadata": {"labels": {"kueue.x-k8s.io/podset": None}},
            }
        }
    }
    overwritten = template({"zone": "b"}, {"app": "x"})
    assert msgspec.json.decode(restore_patch(overwritten, original) or b"{}") == {
        "spec": {"template": {"spec": {"nodeSelector": {"zone": "a"}}}}
    }
    assert restore_patch(original, original) is None


def test_timers_fire_in_order_and_moved_or_cancelled_ones_do_not() -> None:
    timers: Timers[str] = Timers()
    timers.set("a", "x", 10.0)
    timers.set("b", "x", 5.0)
    timers.set("c", "x", 7.0)
    timers.set("a", "x", 20.0)  # moved later
    timers.cancel("c", "x")
    assert timers.due(4.9) == []
    assert timers.due(10.0) == [("b", "x")]
    assert timers.get("a", "x") == 20.0
    assert timers.due(25.0) == [("a", "x")]
    assert len(timers) == 0
    for n in range(1000):  # many moves do not grow the heap without bound
        timers.set("k", "x", float(n))
    assert len(timers._heap) < 200


def test_only_lasting_problems_are_reported_and_the_next_check_is_timed() -> None:
    old = ClaimProblem("p1", "c1", "m", since=100.0)
    young = ClaimProblem("p2", "c2", "m", since=103.0)
    unknown = ClaimProblem("p3", "c3", "m")
    assert lasting([old, young, unknown], now=105.0, grace=5.0) == ([old, unknown], 108.0)
    assert lasting([young], now=108.0, grace=5.0) == ([young], None)
    assert lasting([], now=0.0, grace=5.0) == ([], None)


def test_claim_problem_carries_when_the_scheduler_gave_up() -> None:
    unschedulable = pod("p1", unschedulable=UNSCHEDULABLE, claim="p1-gpu-x")
    body = msgspec.to_builtins(unschedulable)
    body["status"]["conditions"][0]["lastTransitionTime"] = "2026-01-01T00:00:00Z"
    (problem,) = claim_problems(
        "ns", [decode(body, Pod)], {("ns", "p1-gpu-x"): claim("p1-gpu-x", allocated=False)}
    )
    assert problem.since == 1767225600.0
