"""The plain-pod integration (framework pod) through the seam: its pod set, suspension, the
start write, the finalizer, the outcome, PodsReady, and the steps decide takes for a pod."""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

from reconciler.api import Admission, PodSetAssignment, ResourceFlavor, Workload
from reconciler.api.pods import ManagedPod
from reconciler.integrations import (
    POD,
    PODSET_LABEL,
    REGISTRY,
    CreateWorkload,
    Finish,
    Known,
    Nothing,
    Release,
    Start,
    Suspend,
    decide,
)
from reconciler.integrations.pods.pod import ADMISSION_GATE, POD_FINALIZER, TOPOLOGY_GATE, role_hash
from tests.support.pods import pod_body, stored_pod

# Kueue's AssignQueueLabelsForPods labels on an admitted Workload's pods (LocalQueue lq, ClusterQueue cq).
QUEUE_LABELS = {"kueue.x-k8s.io/local-queue-name": "lq", "kueue.x-k8s.io/cluster-queue-name": "cq"}

TOLERATION = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}


def _pod(**changes: Any) -> ManagedPod:
    body = stored_pod(pod_body("p"))
    body["metadata"] |= {"uid": "u1", "resourceVersion": "7"}
    for key, value in changes.items():
        body[key] = {**body.get(key, {}), **value}
    return msgspec.json.decode(msgspec.json.encode(body), type=ManagedPod)


def _flavor() -> ResourceFlavor:
    raw = {"metadata": {"name": "t4"}, "spec": {"nodeLabels": {"gpu": "t4"}, "tolerations": [TOLERATION]}}
    return msgspec.json.decode(msgspec.json.encode(raw), type=ResourceFlavor)


def _workload(pod: ManagedPod, *conditions: dict[str, str], admitted: bool = False) -> Workload:
    raw: dict[str, Any] = {
        "metadata": {"name": "pod-p", "namespace": "ns"},
        "spec": {"queueName": "lq", "podSets": msgspec.json.decode(msgspec.json.encode(POD.pod_sets(pod)))},
        "status": {"conditions": list(conditions)},
    }
    workload = msgspec.json.decode(msgspec.json.encode(raw), type=Workload)
    if admitted:
        assignment = PodSetAssignment(
            name="main", flavors={"cpu": "t4"}, resource_usage={"cpu": "1"}, count=1
        )
        admission = Admission(cluster_queue="cq", pod_set_assignments=[assignment])
        workload = msgspec.structs.replace(
            workload, status=msgspec.structs.replace(workload.status, admission=admission)
        )
    return workload


def test_registered_as_kueues_pod_framework() -> None:
    assert REGISTRY["pod"] is POD
    assert (POD.kind, POD.api_version, POD.resource.plural) == ("Pod", "v1", "pods")
    assert POD.stop_deletes
    assert POD.top_level


def test_one_pod_set_main_of_one_pod_with_the_pods_spec() -> None:
    pod = _pod()
    (pod_set,) = POD.pod_sets(pod)
    assert (pod_set.name, pod_set.count) == ("main", 1)
    template = msgspec.json.decode(pod_set.template)
    assert template == {"spec": msgspec.json.decode(pod.spec)}
    assert template["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "gpu-a"}]


def test_suspended_while_gated_or_ended() -> None:
    assert POD.is_suspended(_pod())
    ungated = _pod(spec={"schedulingGates": []})
    assert not POD.is_suspended(ungated)
    assert POD.is_suspended(_pod(spec={"schedulingGates": []}, status={"phase": "Succeeded"}))


def test_the_start_write_ungates_and_injects_the_flavor_once() -> None:
    gates = [{"name": "other"}, {"name": ADMISSION_GATE}, {"name": TOPOLOGY_GATE}]
    pod = _pod(spec={"schedulingGates": gates})  # as the webhook leaves it: both of Kueue's gates go
    step = decide(POD, pod, _workload(pod, admitted=True), Known(admitted=True), {"t4": _flavor()})
    assert isinstance(step, Start)
    assert msgspec.json.decode(step.patch.body) == {
        "spec": {
            "schedulingGates": [{"name": "other"}],
            "nodeSelector": {"gpu": "t4"},
            "tolerations": [TOLERATION],
        },
        "metadata": {"labels": {PODSET_LABEL: "main", **QUEUE_LABELS}, "resourceVersion": "7"},
    }


def test_a_finished_pod_finishes_its_workload_then_lets_go_of_its_finalizer() -> None:
    pod = _pod(spec={"schedulingGates": []}, status={"phase": "Failed", "message": "OOMKilled"})
    step = decide(POD, pod, _workload(pod), Known(), {})
    assert isinstance(step, Finish)
    assert (step.outcome.succeeded, step.outcome.message) == (False, "OOMKilled")
    finished = {"type": "Finished", "status": "True", "reason": "Failed"}
    step = decide(POD, pod, _workload(pod, finished), Known(), {})
    assert isinstance(step, Release)
    assert msgspec.json.decode(step.patch.body) == {"metadata": {"finalizers": [], "resourceVersion": "7"}}
    released = _pod(metadata={"finalizers": []}, status={"phase": "Failed"})
    assert POD.release_patch(released) is None
    assert isinstance(decide(POD, released, _workload(released, finished), Known(), {}), Nothing)


def test_a_pod_without_its_workload_gets_one_without_being_stopped_first() -> None:
    running = _pod(spec={"schedulingGates": []}, status={"phase": "Running"})
    assert decide(POD, running, None, Known(), {}) == CreateWorkload(None, True)
    # Not admitted and running: stopped (the runtime deletes it, Kueue's Stop for pods).
    assert isinstance(decide(POD, running, _workload(running), Known(), {}), Suspend)


def test_a_pod_whose_workload_is_being_deleted_is_stopped_even_while_gated() -> None:
    gated = _pod()
    workload = _workload(gated)
    deleting = msgspec.structs.replace(
        workload,
        metadata=msgspec.structs.replace(workload.metadata, deletion_timestamp="2026-01-01T00:00:00Z"),
    )
    assert isinstance(decide(POD, gated, workload, Known(), {}), Nothing)
    assert isinstance(decide(POD, gated, deleting, Known(), {}), Suspend)


def test_pods_ready_is_its_ready_condition() -> None:
    assert not POD.pods_ready(_pod(status={"phase": "Running"}))
    ready = _pod(status={"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})
    assert POD.pods_ready(ready)
    assert POD.pods_ready_count(ready) == 1
    assert POD.finished(ready) is None
    assert POD_FINALIZER in ready.metadata.finalizers


def test_the_role_hash_is_kueues() -> None:
    # Kueue v0.18.1's pod webhook tests: MakePod's one container with empty requests -> a9f06f3a.
    spec = {
        "restartPolicy": "Never",
        "containers": [{"name": "c", "image": "pause", "resources": {"requests": {}, "limits": {}}}],
        "schedulingGates": [],
    }
    assert role_hash(msgspec.json.encode(spec)) == "a9f06f3a"
    # Names, images and volumes are not part of the role; requests and claims are.
    renamed = {**spec, "containers": [{"name": "d", "image": "busybox", "resources": {"requests": {}}}]}
    renamed["volumes"] = [{"name": "v", "emptyDir": {}}]
    assert role_hash(msgspec.json.encode(renamed)) == "a9f06f3a"
    bigger = {**spec, "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    claimed = {**spec, "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]}
    hashes = {role_hash(msgspec.json.encode(s)) for s in (spec, bigger, claimed)}
    assert len(hashes) == 3
    # Go escapes <, > and & inside strings.
    odd = {**spec, "nodeSelector": {"a": "<&>"}}
    escaped = (
        b'{"spec":{"affinity":null,"containers":[{"ports":null,"resources":{"requests":{}}}],'
        b'"initContainers":null,"nodeSelector":{"a":"\\u003c\\u0026\\u003e"},"overhead":null,'
        b'"priority":null,"resourceClaims":null,"runtimeClassName":null,"tolerations":null,'
        b'"topologySpreadConstraints":null}}'
    )
    assert role_hash(msgspec.json.encode(odd)) == hashlib.sha256(escaped).hexdigest()[:8]
