"""The JobSet defaulting webhook: a queue-named JobSet is suspended at creation, the default
LocalQueue is named when the namespace has one, and nothing changes when the jobset framework
is not enabled."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from reconciler.admission.queue_rules import JobPolicy
from reconciler.admission.review import AdmissionRequest, GroupVersionResource
from reconciler.api import ObjectMeta
from reconciler.webhook.handlers import handle, routes
from tests.support.jobsets import jobset_body

ON = JobPolicy(frameworks=frozenset({"batch/job", "jobset.x-k8s.io/jobset"}))
ROUTE = next(r for r in routes() if r.path == "/mutate-jobset-x-k8s-io-v1alpha2-jobset")
TWO = [("leader", 1, 1, 1, "gpu-a"), ("workers", 2, 1, 1, "gpu-b")]


class Lookups:
    def __init__(self, *, default_queue: bool) -> None:
        self.default_queue = default_queue
        self.asked: list[str] = []

    async def default_local_queue_exists(self, namespace: str) -> bool:
        self.asked.append(namespace)
        return self.default_queue

    async def namespace_labels(self, namespace: str) -> dict[str, str]:
        raise AssertionError("not asked by these webhooks")

    async def object_meta(self, api_version: str, kind: str, namespace: str, name: str) -> ObjectMeta | None:
        raise AssertionError("not asked by these webhooks")

    async def workload_admitted(self, namespace: str, name: str) -> bool:
        return False


def _request(body: dict[str, Any]) -> AdmissionRequest:
    return AdmissionRequest(
        uid="u",
        resource=GroupVersionResource("jobset.x-k8s.io", "v1alpha2", "jobsets"),
        operation="CREATE",
        namespace="ns",
        object=msgspec.Raw(msgspec.json.encode(body)),
    )


async def _patch(body: dict[str, Any], policy: JobPolicy, *, default_queue: bool = False) -> list[Any]:
    verdict = await handle(ROUTE, _request(body), policy, Lookups(default_queue=default_queue))
    assert verdict.allowed
    return list(verdict.patch)


@pytest.mark.asyncio
async def test_a_queue_named_jobset_is_suspended_at_creation() -> None:
    assert await _patch(jobset_body("js", TWO, suspend=False), ON) == [
        {"op": "add", "path": "/spec/suspend", "value": True}
    ]
    assert await _patch(jobset_body("js", TWO, suspend=True), ON) == []


@pytest.mark.asyncio
async def test_the_default_local_queue_is_named_and_the_jobset_suspended() -> None:
    body = jobset_body("js", TWO, queue=None, suspend=False)
    assert await _patch(body, ON, default_queue=True) == [
        {"op": "add", "path": "/metadata/labels", "value": {"kueue.x-k8s.io/queue-name": "default"}},
        {"op": "add", "path": "/spec/suspend", "value": True},
    ]
    labelled = jobset_body("js", TWO, queue=None, suspend=True)
    labelled["metadata"]["labels"]["team"] = "a"
    assert await _patch(labelled, ON, default_queue=True) == [
        {"op": "add", "path": "/metadata/labels/kueue.x-k8s.io~1queue-name", "value": "default"}
    ]
    # No default LocalQueue, no queue name: left alone (unless manageJobsWithoutQueueName).
    assert await _patch(body, ON) == []
    managing = JobPolicy(frameworks=ON.frameworks, manage_without_queue_name=True)
    assert await _patch(body, managing) == [{"op": "add", "path": "/spec/suspend", "value": True}]


@pytest.mark.asyncio
async def test_nothing_changes_when_the_jobset_framework_is_not_enabled() -> None:
    assert await _patch(jobset_body("js", TWO, suspend=False), JobPolicy()) == []


VALIDATE = next(r for r in routes() if r.path == "/validate-jobset-x-k8s-io-v1alpha2-jobset")


def _update(new: dict[str, Any], old: dict[str, Any]) -> AdmissionRequest:
    request = _request(new)
    request.operation = "UPDATE"
    request.old_object = msgspec.Raw(msgspec.json.encode(old))
    return request


@pytest.mark.asyncio
async def test_a_jobset_with_a_bad_queue_name_is_refused_naming_the_label() -> None:
    body = jobset_body("js", TWO)
    body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "Not_A_Queue"
    verdict = await handle(VALIDATE, _request(body), ON, Lookups(default_queue=False))
    assert not verdict.allowed
    assert "metadata.labels[kueue.x-k8s.io/queue-name]" in verdict.message
    # The framework not enabled: JobSets are not this controller's to judge.
    assert (await handle(VALIDATE, _request(body), JobPolicy(), Lookups(default_queue=False))).allowed


@pytest.mark.asyncio
async def test_the_queue_name_of_a_running_jobset_cannot_change() -> None:
    old = jobset_body("js", TWO, suspend=False)
    new = jobset_body("js", TWO, suspend=False)
    new["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "other"
    verdict = await handle(VALIDATE, _update(new, old), ON, Lookups(default_queue=False))
    assert not verdict.allowed
    assert "field is immutable" in verdict.message
    # Suspended, it may move to another queue.
    new["spec"]["suspend"] = True
    assert (await handle(VALIDATE, _update(new, old), ON, Lookups(default_queue=False))).allowed


@pytest.mark.asyncio
async def test_the_elastic_job_annotation_is_refused_by_name_as_kueue_refuses_it() -> None:
    """Kueue v0.18.1 reads kueue.x-k8s.io/elastic-job on a Job and Ray's kinds only; its webhook
    refuses it on a JobSet (and every other kind), with this message; it is not accepted and
    ignored here."""
    body = jobset_body("js", TWO)
    body["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
    verdict = await handle(VALIDATE, _request(body), ON, Lookups(default_queue=False))
    assert not verdict.allowed
    assert verdict.message == (
        "metadata.annotations[kueue.x-k8s.io/elastic-job]: Forbidden: elastic job is not supported for "
        '"jobset.x-k8s.io/v1alpha2, Kind=JobSet"'
    )
    updated = await handle(VALIDATE, _update(body, jobset_body("js", TWO)), ON, Lookups(default_queue=False))
    assert not updated.allowed
    assert "kueue.x-k8s.io/elastic-job" in updated.message
    body["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "false"}
    assert (await handle(VALIDATE, _request(body), ON, Lookups(default_queue=False))).allowed
