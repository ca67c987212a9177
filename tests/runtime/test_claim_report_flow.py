"""The claim report of an admitted Workload (ClaimsAllocated and its Warning), at the write level:
reported only once a claim has stayed unallocated for its grace, one Warning per report, and no
rewrite when only the scheduler's words change."""

from __future__ import annotations

import msgspec

from reconciler.api import Pod, Workload
from reconciler.api.resources import JOBS, PODS, RESOURCE_CLAIMS, WORKLOADS
from reconciler.core.primitives.podstatus import claim_report_grace
from reconciler.runtime.shared.actions import Action, MergePatch
from tests.support.pending_claims import pending_pod, unallocated_claim
from tests.support.pods_ready_harness import T0, Clocked, admitted_job, events, started
from tests.support.reconciler_harness import decode, of, queues

BUSY = "0/4 nodes are available: 4 cannot allocate all claims. still not schedulable"


def claim_reports(actions: list[Action]) -> list[tuple[str, str]]:
    """(status, message) of each ClaimsAllocated the actions write."""
    out = []
    for action in of(actions, "pods-ready"):
        assert isinstance(action, MergePatch)
        for c in msgspec.json.decode(action.patch)["status"].get("conditions") or []:
            if c["type"] == "ClaimsAllocated":
                out.append((c["status"], c["message"]))
    return out


def warnings(actions: list[Action]) -> list[str]:
    return [m for r, m in events(actions) if r == "ClaimNotAllocated"]


def waiting_for_a_device() -> tuple[Clocked, Workload]:
    """A Job admitted at T0 whose pod the scheduler has found no free device for since T0."""
    h = Clocked()  # waitForPodsReady timeout 60 s: the report's grace is 15 s
    queues(h)
    h.sync_all()
    job, workload, _ = admitted_job(h, "a")
    h.event("MODIFIED", JOBS, started(h, job))
    h.event("ADDED", RESOURCE_CLAIMS, unallocated_claim("a-1-g-x", "a-1"))
    h.event("ADDED", PODS, pending_pod("a", claim="a-1-g-x", message=BUSY))
    h.take()
    return h, workload


def reworded(pod: Pod, message: str) -> Pod:
    body = msgspec.json.decode(msgspec.json.encode(pod))
    body["status"]["conditions"][0]["message"] = message
    body["metadata"]["resourceVersion"] = "99"
    changed: Pod = decode(body, Pod)
    return changed


def renamed(pod: Pod, name: str) -> Pod:
    body = msgspec.json.decode(msgspec.json.encode(pod))
    body["metadata"]["name"] = name
    other: Pod = decode(body, Pod)
    return other


def test_the_grace_is_a_quarter_of_the_pods_ready_timeout_within_5_s_and_a_minute() -> None:
    assert claim_report_grace(12) == 5  # the e2e test's short timeout: as before
    assert claim_report_grace(60) == 15
    assert claim_report_grace(30 * 60) == 60  # the v1beta2 default timeout
    assert claim_report_grace(None) == 60  # without waitForPodsReady


def test_a_claim_waiting_for_a_device_less_than_the_grace_is_not_reported() -> None:
    h, _ = waiting_for_a_device()
    quiet = h.tick(T0 + 10)  # reported at 5 s before: a condition write and a Warning
    assert claim_reports(quiet) == []
    assert warnings(quiet) == []
    reported = h.tick(T0 + 16)
    [(status, message)] = claim_reports(reported)
    assert status == "False"
    assert message.endswith(f"ResourceClaim ns/a-1-g-x is not allocated: {BUSY}")
    assert warnings(reported) == [message]


def test_one_warning_per_report_and_no_rewrite_when_only_the_schedulers_words_change() -> None:
    h, workload = waiting_for_a_device()
    [write] = of(h.tick(T0 + 16), "pods-ready")
    assert isinstance(write, MergePatch)
    reported = h.land(write, workload)
    h.event("MODIFIED", WORKLOADS, reported)
    h.take()
    # The scheduler retried: other node counts, the same pod and claim.
    pod = pending_pod("a", claim="a-1-g-x", message=BUSY)
    h.event(
        "MODIFIED",
        PODS,
        reworded(pod, "0/4 nodes are available: 3 cannot allocate all claims, 1 Insufficient cpu."),
    )
    again = h.tick(T0 + 30)
    assert claim_reports(again) == []  # written (and a second Warning posted) before
    assert warnings(again) == []
    # A second pod waits too: the condition says so, the Warning already posted stands.
    h.event("ADDED", RESOURCE_CLAIMS, unallocated_claim("a-2-g-y", "a-2"))
    h.event("ADDED", PODS, renamed(pending_pod("a", claim="a-2-g-y", message=BUSY), "a-2"))
    more = h.tick(T0 + 31)
    [(status, message)] = claim_reports(more)
    assert (status, message.endswith("(and 1 more pod)")) == ("False", True)
    assert warnings(more) == []


def test_checks_before_the_report_lands_write_and_warn_once() -> None:
    h, _ = waiting_for_a_device()
    # At T0 + 16 the claim timer and the pod both ask for a check; the first one's write is in
    # flight when the second runs (it re-checks when that write lands instead).
    actions = h.tick(T0 + 16)
    assert len(of(actions, "pods-ready")) == 1
    assert len(warnings(actions)) == 1
