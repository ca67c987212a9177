"""The AppWrapper webhooks (Kueue's mappwrapper.kb.io and vappwrapper.kb.io): suspended at
creation with the default LocalQueue, left alone when the framework is off, the queue-name rules
on create and update, and the elastic-job annotation refused as Kueue refuses it on a kind
without elastic jobs."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from reconciler.admission.queue_rules import JobPolicy
from reconciler.admission.review import AdmissionRequest, GroupVersionResource, Verdict
from reconciler.api import ObjectMeta
from reconciler.webhook.handlers import handle, routes
from tests.support.appwrappers import appwrapper_body

ON = JobPolicy(
    frameworks=frozenset({"batch/job", "workload.codeflare.dev/appwrapper"}),
    job_kinds=frozenset({("workload.codeflare.dev/v1beta2", "AppWrapper"), ("batch/v1", "Job")}),
)
OFF = JobPolicy(frameworks=frozenset({"batch/job"}), job_kinds=frozenset({("batch/v1", "Job")}))


def _route(path: str) -> Any:
    return next(r for r in routes() if r.path == path)


MUTATE = _route("/mutate-workload-codeflare-dev-v1beta2-appwrapper")
VALIDATE = _route("/validate-workload-codeflare-dev-v1beta2-appwrapper")


class Lookups:
    def __init__(self, *, default_queue: bool = False) -> None:
        self.default_queue = default_queue

    async def default_local_queue_exists(self, namespace: str) -> bool:
        return self.default_queue

    async def namespace_labels(self, namespace: str) -> dict[str, str]:
        raise AssertionError("not asked by these webhooks")

    async def object_meta(self, api_version: str, kind: str, namespace: str, name: str) -> ObjectMeta | None:
        return None

    async def workload_admitted(self, namespace: str, name: str) -> bool:
        return False


def _request(body: dict[str, Any], old: dict[str, Any] | None = None) -> AdmissionRequest:
    request = AdmissionRequest(
        uid="u",
        resource=GroupVersionResource("workload.codeflare.dev", "v1beta2", "appwrappers"),
        operation="CREATE" if old is None else "UPDATE",
        namespace="ns",
        object=msgspec.Raw(msgspec.json.encode(body)),
    )
    if old is not None:
        request.old_object = msgspec.Raw(msgspec.json.encode(old))
    return request


async def _verdict(route: Any, body: dict[str, Any], policy: JobPolicy = ON, **lookups: Any) -> Verdict:
    return await handle(route, _request(body), policy, Lookups(**lookups))


@pytest.mark.asyncio
async def test_a_queue_named_appwrapper_is_suspended_at_creation_and_gets_the_default_queue() -> None:
    suspend = [{"op": "add", "path": "/spec/suspend", "value": True}]
    assert list((await _verdict(MUTATE, appwrapper_body("aw", suspend=False))).patch) == suspend
    assert list((await _verdict(MUTATE, appwrapper_body("aw", suspend=True))).patch) == []
    unnamed = await _verdict(MUTATE, appwrapper_body("aw", queue=None, suspend=False), default_queue=True)
    assert list(unnamed.patch) == [
        {"op": "add", "path": "/metadata/labels", "value": {"kueue.x-k8s.io/queue-name": "default"}},
        *suspend,
    ]
    # Without a queue or a default LocalQueue, or with the framework off: left as it is.
    assert list((await _verdict(MUTATE, appwrapper_body("aw", queue=None, suspend=False))).patch) == []
    assert list((await _verdict(MUTATE, appwrapper_body("aw", suspend=False), OFF)).patch) == []


@pytest.mark.asyncio
async def test_queue_name_rules_and_the_elastic_job_annotation_refused_as_kueue_refuses_it() -> None:
    bad = appwrapper_body("aw")
    bad["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "Not_A_Name"
    verdict = await _verdict(VALIDATE, bad)
    assert not verdict.allowed
    assert verdict.message.startswith("metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value"), (
        verdict.message
    )
    elastic = appwrapper_body("aw")
    elastic["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
    verdict = await _verdict(VALIDATE, elastic)
    assert not verdict.allowed
    assert verdict.message == (
        "metadata.annotations[kueue.x-k8s.io/elastic-job]: Forbidden: elastic job is not supported for "
        '"workload.codeflare.dev/v1beta2, Kind=AppWrapper"'
    )
    old, new = appwrapper_body("aw", suspend=False), appwrapper_body("aw", suspend=False)
    new["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "other"
    verdict = await handle(VALIDATE, _request(new, old), ON, Lookups())
    assert not verdict.allowed
    assert "field is immutable" in verdict.message
    assert (await _verdict(VALIDATE, appwrapper_body("aw"))).allowed
