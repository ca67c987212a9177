"""The pod webhooks (framework pod): mpod.kb.io holds a queue-named pod at Kueue's scheduling
gate, marks it managed and adds Kueue's finalizer (not in kube-system or the controller's
namespace, not outside a managedJobsNamespaceSelector, not a managed job's pod); vpod.kb.io
applies Kueue's rules, the pod-group metadata rules included; a group's pod is held like a
single pod."""

from __future__ import annotations

import dataclasses
from typing import Any

import msgspec
import pytest

from reconciler.admission.queue_rules import JobPolicy
from reconciler.admission.review import AdmissionRequest, GroupVersionResource, Verdict
from reconciler.api import ObjectMeta
from reconciler.api.meta import LabelSelector
from reconciler.integrations.pods.pod import role_hash
from reconciler.webhook.handlers import handle, routes
from tests.support.pods import apply_ops, pod_body

MUTATE = next(r for r in routes() if r.name == "mpod.kb.io")
VALIDATE = next(r for r in routes() if r.name == "vpod.kb.io")
JOB_KIND = ("batch/v1", "Job")
ON = JobPolicy(
    frameworks=frozenset({"batch/job", "pod"}),
    own_namespace="dra-quota-system",
    job_kinds=frozenset({JOB_KIND}),
)
GATE = {"name": "kueue.x-k8s.io/admission"}
# Kueue v0.18.1 adds its topology gate after the admission gate (TopologyAwareScheduling, on by default).
TOPOLOGY = {"name": "kueue.x-k8s.io/topology"}
MANAGED = {"kueue.x-k8s.io/managed": "true"}


class Lookups:
    def __init__(
        self, *, default_queue: bool = False, owners: dict[str, dict[str, str]] | None = None
    ) -> None:
        self.default_queue = default_queue
        self.owners = owners or {}
        self.asked: list[str] = []

    async def default_local_queue_exists(self, namespace: str) -> bool:
        self.asked.append(f"default-queue {namespace}")
        return self.default_queue

    async def namespace_labels(self, namespace: str) -> dict[str, str]:
        self.asked.append(f"namespace {namespace}")
        return {"team": "ml"} if namespace == "ns" else {}

    async def object_meta(self, api_version: str, kind: str, namespace: str, name: str) -> ObjectMeta | None:
        self.asked.append(f"{kind} {namespace}/{name}")
        labels = self.owners.get(name)
        return None if labels is None else ObjectMeta(name=name, namespace=namespace, labels=labels)

    async def workload_admitted(self, namespace: str, name: str) -> bool:
        return False


def _request(
    body: dict[str, Any], *, old: dict[str, Any] | None = None, namespace: str = "ns"
) -> AdmissionRequest:
    return AdmissionRequest(
        uid="u",
        resource=GroupVersionResource("", "v1", "pods"),
        operation="CREATE" if old is None else "UPDATE",
        namespace=namespace,
        object=msgspec.Raw(msgspec.json.encode(body)),
        old_object=msgspec.Raw(msgspec.json.encode(old)) if old is not None else msgspec.Raw(b"null"),
    )


async def _stored(
    body: dict[str, Any], policy: JobPolicy = ON, lookups: Lookups | None = None, **kw: Any
) -> dict[str, Any]:
    verdict = await handle(MUTATE, _request(body, **kw), policy, lookups or Lookups())
    assert verdict.allowed, verdict.message
    return apply_ops(body, list(verdict.patch))


async def _validate(body: dict[str, Any], old: dict[str, Any] | None = None) -> Verdict:
    return await handle(VALIDATE, _request(body, old=old), ON, Lookups())


@pytest.mark.asyncio
async def test_a_queue_named_pod_is_gated_marked_and_given_kueues_finalizer() -> None:
    stored = await _stored(pod_body("p"))
    assert stored["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "lq", **MANAGED}
    assert stored["metadata"]["finalizers"] == ["kueue.x-k8s.io/managed"]
    assert stored["spec"]["schedulingGates"] == [GATE, TOPOLOGY]
    spec = msgspec.json.encode(stored["spec"])
    assert stored["metadata"]["annotations"] == {"kueue.x-k8s.io/role-hash": role_hash(spec)}
    # A pod with gates of its own keeps them; the admission and topology gates are added after them.
    body = pod_body("p")
    body["spec"]["schedulingGates"] = [{"name": "mine"}]
    body["metadata"]["finalizers"] = ["x/y"]
    stored = await _stored(body)
    assert stored["spec"]["schedulingGates"] == [{"name": "mine"}, GATE, TOPOLOGY]
    # Gates already there are not added twice.
    body = pod_body("p")
    body["spec"]["schedulingGates"] = [TOPOLOGY]
    assert (await _stored(body))["spec"]["schedulingGates"] == [TOPOLOGY, GATE]
    assert stored["metadata"]["finalizers"] == ["x/y", "kueue.x-k8s.io/managed"]


@pytest.mark.asyncio
async def test_the_default_local_queue_is_named_and_a_pod_without_a_queue_is_left_alone() -> None:
    body = pod_body("p", queue=None)
    assert await _stored(body) == body
    stored = await _stored(body, lookups=Lookups(default_queue=True))
    assert stored["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "default", **MANAGED}
    assert stored["spec"]["schedulingGates"] == [GATE, TOPOLOGY]
    # manageJobsWithoutQueueName: every pod is managed.
    every = dataclasses.replace(ON, manage_without_queue_name=True)
    assert (await _stored(body, every))["spec"]["schedulingGates"] == [GATE, TOPOLOGY]


@pytest.mark.asyncio
async def test_system_and_own_namespaces_and_unselected_namespaces_are_left_alone() -> None:
    for namespace in ("kube-system", "dra-quota-system"):
        lookups = Lookups()
        assert await _stored(pod_body("p"), lookups=lookups, namespace=namespace) == pod_body("p")
        assert lookups.asked == []
    selector = LabelSelector(match_labels={"team": "ml"})
    selected = JobPolicy(frameworks=frozenset({"pod"}), namespace_selector=selector)
    assert (await _stored(pod_body("p"), selected))["spec"]["schedulingGates"] == [GATE, TOPOLOGY]
    assert await _stored(pod_body("p"), selected, namespace="other") == pod_body("p")
    # Not enabled: nothing changes.
    assert await _stored(pod_body("p"), JobPolicy()) == pod_body("p")


@pytest.mark.asyncio
async def test_a_pod_of_a_managed_job_is_the_jobs_not_a_job_of_its_own() -> None:
    body = pod_body("p")
    body["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "1", "controller": True}
    ]
    queued = Lookups(owners={"j": {"kueue.x-k8s.io/queue-name": "lq"}})
    assert await _stored(body, lookups=queued) == body
    assert queued.asked == ["Job ns/j"]
    # Its Job names no queue: the pod, naming one, is managed on its own (as Kueue).
    stored = await _stored(body, lookups=Lookups(owners={"j": {}}))
    assert stored["spec"]["schedulingGates"] == [GATE, TOPOLOGY]


@pytest.mark.asyncio
async def test_validation_kueues_rules_and_pod_group_metadata() -> None:
    assert (await _validate(pod_body("p"))).allowed
    wrong = pod_body("p")
    wrong["metadata"]["labels"]["kueue.x-k8s.io/managed"] = "false"
    assert (await _validate(wrong)).message == (
        "metadata.labels[kueue.x-k8s.io/managed]: Forbidden: managed label value can only be 'true'"
    )
    group = pod_body("p")
    group["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = "g"
    verdict = await _validate(group)
    assert not verdict.allowed
    assert verdict.message == (
        "metadata.annotations[kueue.x-k8s.io/pod-group-total-count]: Required value: both the "
        "'kueue.x-k8s.io/pod-group-total-count' annotation and the 'kueue.x-k8s.io/pod-group-name' "
        "label should be set"
    )
    group["metadata"]["annotations"] = {"kueue.x-k8s.io/pod-group-total-count": "0"}
    assert (await _validate(group)).message == (
        'metadata.annotations[kueue.x-k8s.io/pod-group-total-count]: Invalid value: "0": incorrect '
        "annotation value 'kueue.x-k8s.io/pod-group-total-count=0': group total count should be "
        "greater than zero"
    )
    group["metadata"]["annotations"] = {"kueue.x-k8s.io/pod-group-total-count": "2"}
    assert (await _validate(group)).allowed  # a queue-named group is Kueue's to admit
    # The name read from the annotation first (Kueue's WorkloadIdentifierAnnotations), checked there.
    named = pod_body("p")
    named["metadata"]["annotations"] = {"kueue.x-k8s.io/pod-group-name": "G_1"}
    message = (await _validate(named)).message
    assert message.startswith('[metadata.annotations[kueue.x-k8s.io/pod-group-name]: Invalid value: "G_1": ')
    assert message.endswith(
        "both the 'kueue.x-k8s.io/pod-group-total-count' annotation and the "
        "'kueue.x-k8s.io/pod-group-name' annotation should be set]"
    )


@pytest.mark.asyncio
async def test_a_group_pod_is_held_like_a_single_pod_and_stays_unretriable() -> None:
    group = pod_body("p")
    group["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = "g"
    group["metadata"]["annotations"] = {
        "kueue.x-k8s.io/pod-group-total-count": "2",
        "kueue.x-k8s.io/retriable-in-group": "false",
    }
    stored = await _stored(group)
    assert stored["spec"]["schedulingGates"] == [GATE, TOPOLOGY]
    assert stored["metadata"]["labels"]["kueue.x-k8s.io/managed"] == "true"
    assert stored["metadata"]["finalizers"] == ["kueue.x-k8s.io/managed"]
    assert stored["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"] == role_hash(
        msgspec.json.encode(stored["spec"])
    )
    retriable = {
        **stored,
        "metadata": {
            **stored["metadata"],
            "annotations": {**stored["metadata"]["annotations"], "kueue.x-k8s.io/retriable-in-group": "true"},
        },
    }
    assert (await _validate(retriable, old=stored)).message == (
        "metadata.annotations[kueue.x-k8s.io/retriable-in-group]: Forbidden: unretriable pod group "
        "can't be converted to retriable"
    )
    renamed = {
        **stored,
        "metadata": {
            **stored["metadata"],
            "labels": {**stored["metadata"]["labels"], "kueue.x-k8s.io/pod-group-name": "h"},
        },
    }
    assert (await _validate(renamed, old=stored)).message == (
        'metadata.labels[kueue.x-k8s.io/pod-group-name]: Invalid value: "h": field is immutable'
    )


@pytest.mark.asyncio
async def test_a_managed_label_on_a_managed_jobs_pod_is_warned_about() -> None:
    body = pod_body("p", queue=None)
    body["metadata"]["labels"] = dict(MANAGED)
    assert (await _validate(body)).warnings == ()
    body["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "1", "controller": True}
    ]
    assert (await _validate(body)).warnings == ()  # not a kind the controller manages
    body["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "1", "controller": True}
    ]
    verdict = await _validate(body)
    assert verdict.allowed
    assert verdict.warnings == (
        "pod owner is managed by kueue, label 'kueue.x-k8s.io/managed=true' might lead to "
        "unexpected behaviour",
    )


@pytest.mark.asyncio
async def test_the_queue_name_cannot_change_once_the_pod_is_ungated() -> None:
    gated = await _stored(pod_body("p"))
    moved = {
        **gated,
        "metadata": {
            **gated["metadata"],
            "labels": {**gated["metadata"]["labels"], "kueue.x-k8s.io/queue-name": "other"},
        },
    }
    assert (await _validate(moved, old=gated)).allowed
    running = {**gated, "spec": {**gated["spec"], "schedulingGates": []}}
    moved_running = {**moved, "spec": running["spec"]}
    assert (await _validate(moved_running, old=running)).message == (
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "other": field is immutable'
    )


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "annotation",
    [
        "kueue.x-k8s.io/pod-group-fast-admission",
        "kueue.x-k8s.io/pod-group-serving",
        "kueue.x-k8s.io/pod-group-pod-index-label",
        "kueue.x-k8s.io/elastic-job",
    ],
)
async def test_group_annotations_not_acted_on_for_a_plain_pod_are_refused_by_name(annotation: str) -> None:
    """Kueue reads these on a plain pod group (fast admission, a serving group, the pod index for
    its topology placement); here they are written only on a StatefulSet's pods: on a plain pod
    they are refused naming the annotation, not accepted and ignored."""
    group = pod_body("p")
    group["metadata"]["labels"] |= {"kueue.x-k8s.io/pod-group-name": "g", **MANAGED}
    group["metadata"]["annotations"] = {"kueue.x-k8s.io/pod-group-total-count": "2", annotation: "true"}
    verdict = await _validate(group)
    assert not verdict.allowed
    assert verdict.message.startswith(f"metadata.annotations[{annotation}]: Forbidden: ")
    if annotation.endswith("elastic-job"):  # Kueue's pod webhook refuses it with these words
        assert verdict.message.endswith('Forbidden: elastic job is not supported for "/v1, Kind=Pod"')
    else:
        assert "not supported by this controller for a plain pod: " in verdict.message
    updated = await _validate(group, old={**group, "metadata": {**group["metadata"], "annotations": {}}})
    assert not updated.allowed
    assert annotation in updated.message
    # A parent's pod (the StatefulSet's webhook wrote them) is held for its group, not refused.
    group["metadata"]["annotations"]["kueue.x-k8s.io/pod-suspending-parent"] = "statefulset"
    assert (await _validate(group)).allowed
