"""`reconciler explain` over plain objects: the walkthrough's state, then each way to break it."""

from __future__ import annotations

import json

import msgspec
import pytest

from reconciler.api import (
    Condition,
    DeviceClass,
    LabelSelector,
    Pod,
    PodSpecView,
    RequeueState,
    ResourceClaim,
    ResourceClaimTemplate,
    Workload,
)
from reconciler.explain.analyze import explain
from reconciler.explain.claims import tell_claims
from reconciler.explain.explanation import Explanation
from reconciler.explain.render import render_json, render_text
from reconciler.explain.state import ClusterState, Event, PodsReadyClock, Target, TargetError
from tests.support.explain_state import (
    NOW,
    NS,
    PENDING_MESSAGE,
    decode,
    unallocated_claim,
    unschedulable_pod,
    walkthrough_state,
    workload_of,
)

A = "kueue-dra-running-a"
B = "kueue-dra-pending-b"


def explained(state: ClusterState) -> tuple[Explanation, str]:
    ex = explain(state)
    return ex, render_text(ex)


def test_job_b_waits_for_job_a_gpu() -> None:
    ex, text = explained(walkthrough_state("job", B))
    assert ex.state == "pending"
    assert ex.summary == (
        f"it waits for quota in ClusterQueue p3-dra-cq, held by Job {NS}/{A}: {PENDING_MESSAGE}"
    )
    assert ex.local_queue == f"{NS}/p3-dra-queue"
    assert ex.cluster_queue == "p3-dra-cq"
    assert f"QuotaReserved=False (Pending): {PENDING_MESSAGE}" in ex.controller_says
    (row,) = ex.quota
    assert (row.resource, row.flavor, row.requested, row.nominal, row.in_use, row.free, row.fits) == (
        "nvidia.com/gpu",
        "p3-t4",
        "1",
        "1",
        "1",
        "0",
        False,
    )
    (holder,) = ex.holders
    assert holder.job == f"{NS}/{A}"
    assert holder.workload.startswith(f"{NS}/job-{A}-")
    assert ex.to_fit == [
        f"nvidia.com/gpu in flavor p3-t4: 1 more needed; when Job {NS}/{A} finishes, it fits"
    ]
    assert ex.claims == [
        "pod set main, claim gpu-claim: ResourceClaimTemplate single-gpu asks for 1 device(s) of "
        "DeviceClass gpu.nvidia.com, charged as nvidia.com/gpu"
    ]
    assert ex.findings == []
    assert any("learned from what the controller charged" in n for n in ex.notes)
    assert text.startswith(f"Job {NS}/{B} is PENDING: it waits for quota in ClusterQueue p3-dra-cq")
    assert "  main     nvidia.com/gpu  p3-t4   1          1        1       0     no" in text


def test_the_workload_is_explained_as_its_job() -> None:
    state = walkthrough_state("job", B)
    name = workload_of(state, B).metadata.name
    ex = explain(walkthrough_state("workload", name))
    assert ex.subject == f"Workload {NS}/{name}"
    assert ex.state == "pending"
    assert [h.job for h in ex.holders] == [f"{NS}/{A}"]


def test_the_verdict_is_the_cores_own() -> None:
    """With the configuration given, the same message as the simulation (the controller's words)."""
    state = walkthrough_state("job", B)
    state.mappings = {"gpu.nvidia.com": "nvidia.com/gpu"}
    for condition in workload_of(state, B).status.conditions:
        condition.message = "stale"
    ex = explain(state)
    assert PENDING_MESSAGE in ex.summary
    assert not any("learned" in n for n in ex.notes)


def test_job_a_is_admitted_and_ready() -> None:
    ex, text = explained(walkthrough_state("job", A))
    assert text.startswith(f"Job {NS}/{A} is ADMITTED: ")
    assert ex.state == "admitted"
    assert ex.summary == "it is admitted in ClusterQueue p3-dra-cq (flavor p3-t4) and its pods are ready"
    assert "pods ready or succeeded: 1 of 1 needed" in ex.pods
    assert ex.holders == []


def test_an_admitted_job_whose_claim_is_not_allocated_is_stalled() -> None:
    state = walkthrough_state("job", A)
    assert state.job is not None
    state.job.status.ready = 0
    message = "0/1 nodes are available: 1 cannot allocate all claims."
    state.pods = [unschedulable_pod(A, "a-gpu-claim-1", message, "2025-01-01T00:00:08Z")]
    state.claims = [unallocated_claim("a-gpu-claim-1")]
    state.pods_ready = PodsReadyClock(timeout_seconds=300)
    ex, text = explained(state)
    assert ex.state == "stalled"
    assert ex.summary.startswith(
        "it is admitted in ClusterQueue p3-dra-cq (flavor p3-t4) but stalled: 0 of 1"
    )
    assert any(
        f.startswith(
            f"Pod {NS}/{A}-x7k2p cannot be scheduled: ResourceClaim {NS}/a-gpu-claim-1 is not allocated: "
            + message
        )
        for f in ex.findings
    )
    # Admitted at 00:00:06, now 00:00:30: 276 s of the 300 s timeout left.
    assert any("evicts it in 276 s (timeout 300 s)" in f for f in ex.findings)
    assert (
        f"Pod {NS}/{A}-x7k2p: Pending, not scheduled, not ready; claim gpu-claim: a-gpu-claim-1 not allocated"
        in (ex.pods)
    )
    assert "Problems and fixes:" in text


def test_a_missing_local_queue_is_named_with_its_fix() -> None:
    state = walkthrough_state("job", B)
    state.local_queues = []
    ex = explain(state)
    assert ex.state == "pending"
    assert ex.findings[0] == (
        f"LocalQueue {NS}/p3-dra-queue does not exist: create it (spec.clusterQueue naming a "
        "ClusterQueue) or fix the kueue.x-k8s.io/queue-name label"
    )
    assert ex.summary == "it waits (Inadmissible): LocalQueue p3-dra-queue doesn't exist"
    assert ex.quota == []


def test_a_missing_cluster_queue_is_named() -> None:
    state = walkthrough_state("job", B)
    state.cluster_queues = []
    ex = explain(state)
    assert ex.findings[0].startswith(
        "ClusterQueue p3-dra-cq (named by LocalQueue p3-dra-demo/p3-dra-queue) does"
    )
    assert ex.summary == "it waits (Inadmissible): ClusterQueue p3-dra-cq doesn't exist"


def test_a_missing_flavor_makes_the_cluster_queue_inactive() -> None:
    state = walkthrough_state("job", B)
    state.flavors = []
    ex = explain(state)
    assert any(
        f.startswith(
            "ClusterQueue p3-dra-cq is inactive (FlavorNotFound): Can't admit new workloads: "
            "references missing ResourceFlavor(s): p3-t4."
        )
        for f in ex.findings
    )
    assert ex.summary == "it waits (Inadmissible): ClusterQueue p3-dra-cq is inactive"


def test_a_namespace_the_cluster_queue_does_not_select_is_named() -> None:
    state = walkthrough_state("job", B)
    state.cluster_queues[0].spec.namespace_selector = decode({"matchLabels": {"team": "gpu"}}, LabelSelector)
    ex = explain(state)
    assert ex.summary == "it waits (Pending): Workload namespace doesn't match ClusterQueue selector"
    assert ex.findings == [
        f"the namespaceSelector of ClusterQueue p3-dra-cq does not match the labels of namespace {NS}: "
        "label the namespace or widen the selector"
    ]


def test_a_missing_claim_template_is_named() -> None:
    state = walkthrough_state("job", B)
    state.templates = []
    state.mappings = {"gpu.nvidia.com": "nvidia.com/gpu"}
    ex = explain(state)
    assert ex.findings[0] == (
        f"ResourceClaimTemplate {NS}/single-gpu (claim gpu-claim) does not exist: create it; the "
        "Workload is charged as soon as it appears"
    )
    assert 'resourceclaimtemplates.resource.k8s.io "single-gpu" not found' in ex.summary
    assert ex.quota == []


def test_an_unmapped_device_class_is_named_with_the_configuration_fix() -> None:
    state = walkthrough_state("job", B)
    state.mappings = {}
    ex = explain(state)
    assert any(
        f.startswith("DeviceClass gpu.nvidia.com is not mapped in the controller's Configuration: add it")
        for f in ex.findings
    )
    assert "DeviceClass gpu.nvidia.com is not mapped in DRA configuration for podset main" in ex.summary
    assert "charged as" not in ex.claims[0]


def test_a_device_class_no_driver_publishes_is_named() -> None:
    state = walkthrough_state("job", B)
    state.device_classes = []
    ex = explain(state)
    assert any(f.startswith("DeviceClass gpu.nvidia.com does not exist in the cluster") for f in ex.findings)


def test_backoff_and_deactivation() -> None:
    state = walkthrough_state("job", B)
    workload = workload_of(state, B)
    workload.status.requeue_state = RequeueState(count=2, requeue_at="2025-01-01T00:02:30Z")
    workload.status.conditions.append(
        Condition("Evicted", "True", "PodsReadyTimeout", f"Exceeded the PodsReady timeout {NS}/x")
    )
    ex = explain(state)
    assert ex.state == "backing off"
    assert ex.summary == (
        f"it was evicted (PodsReadyTimeout: Exceeded the PodsReady timeout {NS}/x) and requeued 2 time(s); "
        "it waits out the requeue backoff for 120 s more, then it is queued for quota again"
    )
    workload.spec.active = False
    ex = explain(state)
    assert ex.state == "deactivated"
    assert ex.summary == (
        "it is deactivated (spec.active is false) after 2 requeue(s): it stays out of every queue until "
        "spec.active is set to true again"
    )


def test_a_job_without_queue_label_is_not_managed() -> None:
    state = walkthrough_state("job", B)
    assert state.job is not None
    del state.job.metadata.labels["kueue.x-k8s.io/queue-name"]
    ex = explain(state)
    assert ex.state == "not managed"
    assert "no kueue.x-k8s.io/queue-name label" in ex.summary


def test_a_job_without_workload_is_explained_as_the_controller_would_decide() -> None:
    state = walkthrough_state("job", B)
    state.workloads = [w for w in state.workloads if not w.metadata.name.startswith(f"job-{B}-")]
    ex = explain(state)
    assert ex.state == "no Workload yet"
    assert ex.workload is None
    assert ex.findings[0].startswith("the controller has not created a Workload for this Job")
    assert [h.job for h in ex.holders] == [f"{NS}/{A}"]
    assert PENDING_MESSAGE in ex.summary


def test_it_fits_once_job_a_is_gone() -> None:
    state = walkthrough_state("job", B)
    state.workloads = [w for w in state.workloads if not w.metadata.name.startswith(f"job-{A}-")]
    ex = explain(state)
    assert ex.summary.startswith(
        "it fits now in ClusterQueue p3-dra-cq: the controller admits it within seconds"
    )
    assert ex.quota[0].fits is True
    assert ex.holders == [] and ex.to_fit == []  # noqa: PT018


def test_a_request_above_nominal_quota_never_fits() -> None:
    state = walkthrough_state("job", B)
    template = state.templates[0]
    exact = template.spec.spec.devices.requests[0].exactly
    assert exact is not None
    exact.count = 2
    state.mappings = {"gpu.nvidia.com": "nvidia.com/gpu"}
    ex = explain(state)
    assert ex.to_fit == [
        "nvidia.com/gpu: pod set main requests 2, more than the nominal quota of any flavor of ClusterQueue "
        "p3-dra-cq (at most 1): nothing finishing makes it fit; raise nominalQuota or request less"
    ]


def test_workloads_ahead_in_the_queue_are_listed() -> None:
    state = walkthrough_state("job", B)
    mine = workload_of(state, B)
    earlier = msgspec.json.decode(msgspec.json.encode(mine), type=Workload)
    earlier.metadata.name, earlier.metadata.creation_timestamp = "older", "2025-01-01T00:00:01Z"
    state.workloads.append(earlier)
    ex = explain(state)
    assert ex.ahead == [f"Workload {NS}/older"]
    assert ex.holders[0].job == f"{NS}/{A}"


def test_warning_events_of_its_objects_are_quoted_newest_last() -> None:
    state = walkthrough_state("job", B)
    name = workload_of(state, B).metadata.name
    state.events = [
        decode(
            {
                "involvedObject": {"kind": kind, "name": obj},
                "type": kind_type,
                "reason": reason,
                "message": f"{reason} happened",
                "lastTimestamp": stamp,
                "count": 3,
            },
            Event,
        )
        for kind, obj, kind_type, reason, stamp in [
            ("Workload", name, "Warning", "Second", "2025-01-01T00:00:20Z"),
            ("Job", B, "Warning", "First", "2025-01-01T00:00:10Z"),
            ("Job", "someone-else", "Warning", "Other", "2025-01-01T00:00:15Z"),
            ("Job", B, "Normal", "Fine", "2025-01-01T00:00:16Z"),
        ]
    ]
    ex = explain(state)
    assert ex.events == [
        f"2025-01-01T00:00:10Z  Job {B}: First (x3): First happened",
        f"2025-01-01T00:00:20Z  Workload {name}: Second (x3): Second happened",
    ]


def test_unreadable_kinds_are_noted() -> None:
    state = walkthrough_state("job", B)
    state.unreadable = ["ResourceFlavors (forbidden)"]
    ex = explain(state)
    assert "could not read ResourceFlavors (forbidden); the answer may be incomplete" in ex.notes


def test_json_has_every_field() -> None:
    ex = explain(walkthrough_state("job", B))
    data = json.loads(render_json(ex))
    assert data["state"] == "pending"
    assert data["holders"][0]["job"] == f"{NS}/{A}"
    assert data["quota"][0]["fits"] is False


@pytest.mark.parametrize(
    ("kind", "ref", "message"),
    [
        ("cronjob", "ns/x", "'cronjob': explain one of job, workload, "),
        ("job", "x", "'x': give NAMESPACE/NAME"),
        ("job", "ns/", "'ns/': give NAMESPACE/NAME"),
        ("job", "a/b/c", "'a/b/c': give NAMESPACE/NAME"),
    ],
)
def test_targets_are_parsed_or_refused(kind: str, ref: str, message: str) -> None:
    with pytest.raises(TargetError, match=message):
        Target.parse(kind, ref)
    assert str(Target.parse("workload", "ns/w")) == "Workload ns/w"


def test_now_is_after_admission() -> None:
    assert NOW > "2025-01-01T00:00:06Z"


def _claims_of(claims: list[dict[str, str]]) -> PodSpecView:
    spec: PodSpecView = decode({"containers": [], "resourceClaims": claims}, PodSpecView)
    return spec


def test_a_shared_claim_is_told_as_charged_once_or_missing() -> None:
    mappings = {"gpu.nvidia.com": "nvidia.com/gpu"}
    classes = {"gpu.nvidia.com": decode({"metadata": {"name": "gpu.nvidia.com"}}, DeviceClass)}
    spec = _claims_of([{"name": "gpu", "resourceClaimName": "team-gpu"}])
    missing = tell_claims(spec, NS, {}, classes, mappings, learned=False, claims={})
    assert missing.findings == [
        f"ResourceClaim {NS}/team-gpu (claim gpu) does not exist: create it; the Workload is charged as "
        "soon as it appears"
    ]
    claim = decode(
        {
            "metadata": {"name": "team-gpu", "namespace": NS},
            "spec": {
                "devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}
            },
        },
        ResourceClaim,
    )
    found = tell_claims(spec, NS, {}, classes, mappings, learned=False, claims={(NS, "team-gpu"): claim})
    assert found.findings == []
    assert found.lines == [
        "claim gpu: the shared ResourceClaim team-gpu (charged once per Workload) asks for 1 device(s) of "
        "DeviceClass gpu.nvidia.com, charged as nvidia.com/gpu"
    ]


def test_a_first_available_request_is_told_and_an_unmapped_one_named() -> None:
    template = decode(
        {
            "metadata": {"name": "alt", "namespace": NS},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "gpu",
                                "firstAvailable": [
                                    {"name": "a", "deviceClassName": "mig.example.com"},
                                    {"name": "b", "deviceClassName": "gpu.nvidia.com"},
                                ],
                            }
                        ]
                    }
                }
            },
        },
        ResourceClaimTemplate,
    )
    spec = _claims_of([{"name": "g", "resourceClaimTemplateName": "alt"}])
    story = tell_claims(
        spec, NS, {(NS, "alt"): template}, None, {"gpu.nvidia.com": "nvidia.com/gpu"}, learned=False
    )
    assert story.findings == []
    assert "firstAvailable over DeviceClasses mig.example.com, gpu.nvidia.com" in story.lines[0]
    unmapped = tell_claims(spec, NS, {(NS, "alt"): template}, None, {}, learned=False)
    assert unmapped.findings[0].startswith(
        "none of the DeviceClasses of request gpu (mig.example.com, gpu.nvidia.com) is mapped"
    )


def test_a_pod_groups_workload_counts_every_pod_of_the_group() -> None:
    state = walkthrough_state("job", A)
    workload = workload_of(state, A)
    workload.metadata.annotations["kueue.x-k8s.io/is-group-workload"] = "true"
    workload.spec.pod_sets[0].count = 2
    state.target, state.job, state.workload = (
        Target.parse("workload", f"{NS}/{workload.metadata.name}"),
        None,
        workload,
    )
    ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    state.pods = [
        decode({"metadata": {"name": name, "namespace": NS}, "status": status}, Pod)
        for name, status in (("g-1", ready), ("g-2", {"phase": "Pending"}))
    ]
    ex, _ = explained(state)
    assert "pods ready or succeeded: 1 of 2 needed" in ex.pods  # the group's two, not one
    state.pods = []
    ex, _ = explained(state)
    assert any(f.startswith("no pod of the group exists") for f in ex.findings)
