"""Bodies the webhook cannot decode: a 400 naming the problem and one log line without a traceback,
never a 500; and field errors that name the field (a missing one, a map's key) and show the value
given."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import msgspec
import pytest
from structlog.testing import capture_logs

from reconciler.admission.queue_rules import JobPolicy
from reconciler.admission.review import (
    MAX_DEPTH,
    AdmissionRequest,
    BadReviewError,
    GroupVersionResource,
    decode_object,
    decode_review,
)
from reconciler.api import ClusterQueue
from reconciler.webhook.handlers import handle, routes
from tests.support.jobsets import jobset_body
from tests.support.webhook_server import Running, job_request, serving

DEEP = 100_000
JOBSET_ON = JobPolicy(frameworks=frozenset({"batch/job", "jobset.x-k8s.io/jobset"}))
PATH = "/mutate-batch-v1-job"


def _review(obj: Any) -> bytes:
    request = {**job_request(), "object": "OBJ"}
    text = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
    return text.replace('"OBJ"', obj).encode()


BAD_BODIES = {
    "nested": b"[" * DEEP + b"]" * DEEP,
    "nested object": _review('{"a":' * DEEP + "1" + "}" * DEEP),
    "just deep enough to hurt": _review("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)),
    "not JSON": b"<xml/>",
    "not UTF-8": b'{"kind": "\xff"}',
    "wrong types": b'{"apiVersion": 1, "kind": [], "request": "x"}',
    "empty": b"",
}


@pytest.mark.parametrize("name", list(BAD_BODIES))
def test_decode_review_refuses_with_a_clear_message(name: str) -> None:
    with pytest.raises(BadReviewError, match=r"^not an AdmissionReview: "):
        decode_review(BAD_BODIES[name])


@pytest.mark.asyncio
async def test_the_server_answers_400_and_logs_one_line(running: Running) -> None:
    bundle = await serving(running)
    url = f"https://127.0.0.1:{running.server.bound_port}{PATH}"
    connector = aiohttp.TCPConnector(ssl=running.client_context(bundle))
    async with aiohttp.ClientSession(connector=connector) as session:
        for name, body in BAD_BODIES.items():
            with capture_logs() as logs:
                async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
                    text = await resp.text()
            assert resp.status == 400, (name, text)
            assert text.startswith("not an AdmissionReview: "), (name, text)
            assert [(e["log_level"], e["event"]) for e in logs] == [
                ("warning", "webhook request rejected: its body cannot be decoded")
            ], name
            assert "exc_info" not in logs[0]
            assert "exception" not in logs[0]


def _cq(quota: Any) -> msgspec.Raw:
    resources = [{"name": "nvidia.com/gpu", "nominalQuota": quota}]
    body = {
        "metadata": {"name": "cq"},
        "spec": {
            "resourceGroups": [
                {"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "t4", "resources": resources}]}
            ]
        },
    }
    return msgspec.Raw(msgspec.json.encode(body))


@pytest.mark.parametrize(
    ("given", "shown"),
    [([1, 2], "[1,2]"), ({"a": 1}, '{"a":1}'), (True, "true")],
)
def test_a_value_of_the_wrong_type_is_shown_as_given(given: Any, shown: str) -> None:
    _, errors = decode_object(_cq(given), ClusterQueue)
    (error,) = errors
    where = "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"
    assert str(error).startswith(f"{where}: Invalid value: {shown}: Expected `")
    assert "null" not in str(error)


def test_an_int_where_a_string_belongs_is_shown_as_the_int() -> None:
    raw = msgspec.json.decode(_cq(1))
    raw["spec"]["resourceGroups"][0]["coveredResources"] = [5]
    _, errors = decode_object(msgspec.Raw(msgspec.json.encode(raw)), ClusterQueue)
    assert [str(e) for e in errors] == [
        "spec.resourceGroups[0].coveredResources[0]: Invalid value: 5: Expected `str`, got `int`"
    ]


async def _jobset_refusal(body: Any) -> str:
    route = next(r for r in routes() if r.path == "/validate-jobset-x-k8s-io-v1alpha2-jobset")
    request = AdmissionRequest(
        uid="u",
        resource=GroupVersionResource("jobset.x-k8s.io", "v1alpha2", "jobsets"),
        operation="CREATE",
        namespace="ns",
        object=msgspec.Raw(msgspec.json.encode(body)),
    )
    verdict = await handle(route, request, JOBSET_ON, None)  # type: ignore[arg-type]
    assert not verdict.allowed
    return verdict.message


@pytest.mark.asyncio
async def test_a_jobset_decode_error_names_its_field() -> None:
    """A JobSet without metadata was refused as `(object): Required value: Object missing required
    field ...`; a label of the wrong type as `metadata.labels[...]`: both now name the field."""
    body = jobset_body("js", [("main", 1, 1, 1, "gpu-a")])
    without_meta = {k: v for k, v in body.items() if k != "metadata"}
    assert await _jobset_refusal(without_meta) == "metadata: Required value"
    body["metadata"]["labels"]["team"] = 7
    assert await _jobset_refusal(body) == "metadata.labels[team]: Invalid value: 7: Expected `str`, got `int`"


def test_a_missing_field_and_a_map_value_are_named_as_kubernetes_names_them() -> None:
    raw = msgspec.json.decode(_cq(1))
    del raw["spec"]["resourceGroups"][0]["flavors"][0]["name"]
    _, errors = decode_object(msgspec.Raw(msgspec.json.encode(raw)), ClusterQueue)
    assert [str(e) for e in errors] == ["spec.resourceGroups[0].flavors[0].name: Required value"]
    raw = msgspec.json.decode(_cq(1))
    raw["metadata"]["annotations"] = {"a": "x", "b/c": None, "d": False}
    _, errors = decode_object(msgspec.Raw(msgspec.json.encode(raw)), ClusterQueue)
    assert [str(e) for e in errors] == [
        "metadata.annotations[b/c]: Invalid value: null: Expected `str`, got `null`"
    ]
