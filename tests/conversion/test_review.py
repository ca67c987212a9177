"""The ConversionReview in and out: converted objects in order with the request's uid; a malformed
review or object a Failure result whose message names the field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from reconciler.conversion import convert_review
from tests.support.conversion_samples import objects


def review(request: dict[str, Any] | None, **top: Any) -> bytes:
    body: dict[str, Any] = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", **top}
    if request is not None:
        body["request"] = request
    return json.dumps(body).encode()


def answer(body: bytes) -> dict[str, Any]:
    out, _ = convert_review(body)
    decoded: dict[str, Any] = json.loads(out)
    assert decoded["apiVersion"] == "apiextensions.k8s.io/v1"
    assert decoded["kind"] == "ConversionReview"
    response: dict[str, Any] = decoded["response"]
    return response


def test_objects_converted_in_order_with_the_uid() -> None:
    old = objects("v1beta1")
    request = {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "desiredAPIVersion": "kueue.x-k8s.io/v1beta2",
        "objects": [old["ClusterQueue"], old["Workload"]],
    }
    response = answer(review(request))
    assert response["uid"] == request["uid"]
    assert response["result"] == {"status": "Success"}
    new = objects("v1beta2")
    assert response["convertedObjects"] == [new["ClusterQueue"], new["Workload"]]


def failure(body: bytes) -> tuple[str, str]:
    response = answer(body)
    assert response["result"]["status"] == "Failure"
    assert "convertedObjects" not in response
    return response["uid"], response["result"]["message"]


OK = {"uid": "u1", "desiredAPIVersion": "kueue.x-k8s.io/v1beta1", "objects": []}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "conversion refused: body: not a JSON ConversionReview"),
        (b"[]", "conversion refused: body: must be a ConversionReview object"),
        (
            json.dumps({"apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "ConversionReview"}).encode(),
            "conversion refused: apiVersion: must be apiextensions.k8s.io/v1 with kind ConversionReview",
        ),
        (review(None), "conversion refused: request: missing"),
        (review({**OK, "uid": ""}), "conversion refused: request.uid: missing"),
        (
            review({**OK, "desiredAPIVersion": "kueue.x-k8s.io/v1alpha1"}),
            "conversion refused: request.desiredAPIVersion: 'kueue.x-k8s.io/v1alpha1' is not one of "
            "kueue.x-k8s.io/v1beta1, kueue.x-k8s.io/v1beta2",
        ),
        (review({**OK, "objects": {}}), "conversion refused: request.objects: must be an array"),
    ],
)
def test_a_malformed_review_fails_naming_the_field(body: bytes, message: str) -> None:
    _, got = failure(body)
    assert got.startswith(message), got


def _one(obj: Any, desired: str = "kueue.x-k8s.io/v1beta2") -> str:
    uid, message = failure(
        review({"uid": "u2", "desiredAPIVersion": desired, "objects": [objects("v1beta1")["Topology"], obj]})
    )
    assert uid == "u2"
    return message


def test_an_unknown_kind_or_version_is_named() -> None:
    assert _one(
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "AdmissionCheck", "metadata": {"name": "ac"}}
    ).startswith(
        "conversion to kueue.x-k8s.io/v1beta2 refused for AdmissionCheck ac: request.objects[1].kind: "
        "'AdmissionCheck' is not a kind served in two versions here"
    )
    assert "request.objects[1].apiVersion: 'kueue.x-k8s.io/v1' is not one of" in _one(
        {"apiVersion": "kueue.x-k8s.io/v1", "kind": "Workload"}
    )
    assert "request.objects[1]: must be an object" in _one("a string")


def test_a_malformed_object_field_is_named() -> None:
    cq = objects("v1beta1")["ClusterQueue"]
    cq["spec"]["admissionChecks"] = ["prov", 7]
    assert _one(cq).endswith(
        "refused for ClusterQueue gpu: request.objects[1].spec.admissionChecks[1]: "
        "must be the name of an AdmissionCheck (a string)"
    )
    wl = objects("v1beta1")["Workload"]
    wl["spec"] = []
    assert "request.objects[1].spec: must be an object, not array" in _one(wl)


def test_a_malformed_topology_assignment_is_named() -> None:
    wl = objects("v1beta1")["Workload"]
    where = "status.admission.podSetAssignments[0].topologyAssignment"
    wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]["domains"][2]["values"] = [
        "rack-13"
    ]
    assert (
        f"request.objects[1].{where}.domains[2].values: must be 2 strings, one per level of {where}.levels"
        in _one(wl)
    )
    wl = objects("v1beta2")["Workload"]
    wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]["slices"][0]["podCounts"] = {
        "individual": [1]
    }
    message = _one(wl, "kueue.x-k8s.io/v1beta1")
    assert (
        f"request.objects[1].{where}.slices[0].podCounts: must have a universal count or 3 individual counts"
        in message
    )
    wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]["slices"][0][
        "valuesPerLevel"
    ].pop()
    assert f"{where}.slices[0].valuesPerLevel: must have 2 entries, one per level" in _one(
        wl, "kueue.x-k8s.io/v1beta1"
    )
