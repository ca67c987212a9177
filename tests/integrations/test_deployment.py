"""Deployments (framework deployment), as Kueue v0.18.1: the framework turns the pod integration on
for the pods it marks only; mdeployment.kb.io marks a managed Deployment's pod template (queue
name, priority class, managed, suspended by its parent) on create and update; vdeployment.kb.io
refuses a queue-name change once a replica is ready, a removed queue name or priority class, and
the elastic-job annotation; the pod webhook then holds the Deployment's pods without a finalizer
and leaves other pods alone while `pod` is only implied."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest

from reconciler.admission.queue_rules import JobPolicy
from reconciler.admission.review import AdmissionRequest, GroupVersionResource, Verdict
from reconciler.api import ObjectMeta
from reconciler.integrations import REGISTRATIONS, enabled, implied_only, with_implied
from reconciler.integrations.pods.pod import ADMISSION_GATE, TOPOLOGY_GATE, pod_is_job
from reconciler.webhook.handlers import handle, routes
from tests.support.pods import apply_ops, pod_body

MUTATE = next(r for r in routes() if r.name == "mdeployment.kb.io")
VALIDATE = next(r for r in routes() if r.name == "vdeployment.kb.io")
POD_MUTATE = next(r for r in routes() if r.name == "mpod.kb.io")
POLICY = JobPolicy(frameworks=frozenset({"batch/job", "deployment"}), own_namespace="kueue-system")
QUEUE = "kueue.x-k8s.io/queue-name"
PRIORITY = "kueue.x-k8s.io/priority-class"
PARENT = "kueue.x-k8s.io/pod-suspending-parent"
MANAGED = "kueue.x-k8s.io/managed"


class Lookups:
    def __init__(self, *, default_queue: bool = False) -> None:
        self.default_queue = default_queue

    async def default_local_queue_exists(self, namespace: str) -> bool:
        return self.default_queue

    async def namespace_labels(self, namespace: str) -> dict[str, str]:
        return {"kubernetes.io/metadata.name": namespace}

    async def object_meta(self, api_version: str, kind: str, namespace: str, name: str) -> ObjectMeta | None:
        return None

    async def workload_admitted(self, namespace: str, name: str) -> bool:
        return False


def deployment_body(
    name: str = "infer", *, labels: dict[str, str] | None = None, ready: int = 0
) -> dict[str, Any]:
    template = {"metadata": {"labels": {"app": name}}, "spec": pod_body("x")["spec"]}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "ns", "labels": {QUEUE: "lq"} if labels is None else labels},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}}, "template": template},
        "status": {"readyReplicas": ready},
    }


def _request(resource: str, body: dict[str, Any], old: dict[str, Any] | None = None) -> AdmissionRequest:
    return AdmissionRequest(
        uid="u",
        resource=GroupVersionResource("apps" if resource != "pods" else "", "v1", resource),
        operation="CREATE" if old is None else "UPDATE",
        namespace="ns",
        object=msgspec.Raw(msgspec.json.encode(body)),
        old_object=msgspec.Raw(msgspec.json.encode(old)) if old is not None else msgspec.Raw(b"null"),
    )


async def _defaulted(body: dict[str, Any], policy: JobPolicy = POLICY, **kw: Any) -> dict[str, Any]:
    old = kw.pop("old", None)
    verdict = await handle(MUTATE, _request("deployments", body, old), policy, Lookups(**kw))
    assert verdict.allowed, verdict.message
    return apply_ops(body, list(verdict.patch))


async def _validate(body: dict[str, Any], old: dict[str, Any] | None = None) -> Verdict:
    return await handle(VALIDATE, _request("deployments", body, old), POLICY, Lookups())


def test_deployment_implies_the_pod_integration_for_its_pods_only() -> None:
    assert REGISTRATIONS["deployment"].integration is None  # never a job itself (Kueue's no-op reconciler)
    assert with_implied(["batch/job", "deployment"]) == ("batch/job", "deployment", "pod")
    assert with_implied(["pod", "deployment"]) == ("pod", "deployment")
    assert [i.framework for i in enabled(["deployment"])] == ["pod"]
    assert implied_only(["deployment"], "pod")
    assert not implied_only(["deployment", "pod"], "pod")
    assert not implied_only(["batch/job"], "pod")
    # With `pod` only implied, a managed pod is a job only when a parent marked it (Kueue's Skip).
    marked = ObjectMeta(labels={MANAGED: "true"}, annotations={PARENT: "deployment"})
    plain = ObjectMeta(labels={MANAGED: "true"})
    assert pod_is_job(marked, implied=True)
    assert not pod_is_job(plain, implied=True)
    assert pod_is_job(plain, implied=False)


@pytest.mark.asyncio
async def test_a_managed_deployments_pod_template_is_marked_for_the_pod_webhook() -> None:
    body = deployment_body(labels={QUEUE: "lq", PRIORITY: "high"})
    template = (await _defaulted(body))["spec"]["template"]["metadata"]
    assert template["labels"] == {"app": "infer", MANAGED: "true", QUEUE: "lq", PRIORITY: "high"}
    assert template["annotations"] == {PARENT: "deployment"}
    # Nothing to add the second time.
    again = await handle(MUTATE, _request("deployments", await _defaulted(body)), POLICY, Lookups())
    assert again.patch == ()


@pytest.mark.asyncio
async def test_the_default_queue_is_named_and_propagated_else_the_deployment_is_left_alone() -> None:
    body = deployment_body(labels={})
    assert await _defaulted(body) == body  # no queue name, no default LocalQueue: not managed
    stored = await _defaulted(body, default_queue=True)
    assert stored["metadata"]["labels"] == {QUEUE: "default"}
    assert stored["spec"]["template"]["metadata"]["labels"][QUEUE] == "default"
    # manageJobsWithoutQueueName: managed without a queue name (a namespace it manages).
    without = JobPolicy(frameworks=POLICY.frameworks, manage_without_queue_name=True)
    marked = (await _defaulted(body, without))["spec"]["template"]["metadata"]
    assert marked["labels"] == {"app": "infer", MANAGED: "true"}
    # The framework off: nothing.
    off = JobPolicy(frameworks=frozenset({"batch/job"}))
    assert await _defaulted(deployment_body(), off) == deployment_body()


@pytest.mark.asyncio
async def test_the_queue_name_cannot_change_once_a_replica_is_ready_nor_be_removed() -> None:
    old = deployment_body()
    moved = copy.deepcopy(old)
    moved["metadata"]["labels"][QUEUE] = "other"
    assert (await _validate(moved, old)).allowed  # no replica ready yet
    ready = deployment_body(ready=1)
    refused = await _validate(moved, ready)
    assert (
        refused.message
        == 'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "other": field is immutable'
    )
    removed = copy.deepcopy(old)
    del removed["metadata"]["labels"][QUEUE]
    gone = await _validate(removed, old)
    assert gone.message == 'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "": field is immutable'


@pytest.mark.asyncio
async def test_priority_class_rules_queue_name_syntax_and_elastic_jobs() -> None:
    ready = deployment_body(ready=2)
    added = copy.deepcopy(ready)
    added["metadata"]["labels"][PRIORITY] = "high"
    assert (await _validate(added, ready)).message == (
        'metadata.labels[kueue.x-k8s.io/priority-class]: Invalid value: "high": '
        "WorkloadPriorityClass cannot be added to a non-suspended workload"
    )
    assert (await _validate(added, deployment_body())).allowed  # none ready: it may be added
    assert (await _validate(deployment_body(), added)).message == (
        'metadata.labels[kueue.x-k8s.io/priority-class]: Invalid value: "": '
        "WorkloadPriorityClass cannot be removed from a workload"
    )
    bad = deployment_body(labels={QUEUE: "Not_A_Name"})
    assert (await _validate(bad)).message.startswith(
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "Not_A_Name": '
        "a lowercase RFC 1123 subdomain"
    )
    elastic = deployment_body()
    elastic["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
    assert (await _validate(elastic)).message == (
        "metadata.annotations[kueue.x-k8s.io/elastic-job]: Forbidden: "
        'elastic job is not supported for "apps/v1, Kind=Deployment"'
    )


@pytest.mark.asyncio
async def test_the_pod_webhook_holds_the_deployments_pods_and_leaves_plain_pods_while_pod_is_implied() -> (
    None
):
    template = (await _defaulted(deployment_body()))["spec"]["template"]
    pod = {
        "metadata": {**template["metadata"], "name": "infer-abc", "namespace": "ns"},
        "spec": template["spec"],
    }
    verdict = await handle(POD_MUTATE, _request("pods", pod), POLICY, Lookups())
    stored = apply_ops(pod, list(verdict.patch))
    assert [g["name"] for g in stored["spec"]["schedulingGates"]] == [ADMISSION_GATE, TOPOLOGY_GATE]
    assert "finalizers" not in stored["metadata"]  # suspended by its parent: no finalizer, as Kueue
    assert "kueue.x-k8s.io/role-hash" in stored["metadata"]["annotations"]
    plain = pod_body("plain")
    untouched = await handle(POD_MUTATE, _request("pods", plain), POLICY, Lookups())
    assert untouched.patch == ()
