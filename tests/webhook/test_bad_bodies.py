"""Bodies the webhook cannot decode: a 400 naming the problem and one log line without a traceback,
never a 500; and field errors that show the value given."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import msgspec
import pytest
from structlog.testing import capture_logs

from reconciler.admission.review import MAX_DEPTH, BadReviewError, decode_object, decode_review
from reconciler.api import ClusterQueue
from tests.support.webhook_server import Running, job_request, serving

DEEP = 100_000
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
