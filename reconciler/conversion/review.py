"""The conversion webhook's protocol: an ``apiextensions.k8s.io/v1`` ConversionReview in, one out.

Every answer is a ConversionReview: its ``response.result`` is ``Success`` with the converted
objects in order, or ``Failure`` with a message naming the field at fault (``request.uid``,
``request.desiredAPIVersion``, ``request.objects[2].spec.admissionChecks[0]``, ...) and, for an
object, its kind and name. The API server refuses the request that needed the conversion with
that message. Pure: bytes in, bytes out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from .fields import ConversionError
from .kinds import VERSIONS, convert

__all__ = ["REVIEW_API_VERSION", "Outcome", "convert_review"]

REVIEW_API_VERSION = "apiextensions.k8s.io/v1"


@dataclass(frozen=True)
class Outcome:
    """What a review asked and how it ended (for the log line)."""

    uid: str
    desired: str
    objects: int
    failure: str | None = None


def _describe(obj: Any) -> str:
    if not isinstance(obj, dict):
        return "an object"
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    name = "/".join(str(p) for p in (meta.get("namespace"), meta.get("name")) if p)
    return f"{obj.get('kind', 'object')} {name or '(no name)'}"


def _request(body: bytes) -> tuple[str, str, list[Any]]:
    try:
        review = msgspec.json.decode(body)
    except msgspec.DecodeError as err:
        raise ConversionError("body", f"not a JSON ConversionReview ({err})") from None
    if not isinstance(review, dict):
        raise ConversionError("body", "must be a ConversionReview object")
    if review.get("apiVersion") != REVIEW_API_VERSION or review.get("kind") != "ConversionReview":
        got = f"{review.get('apiVersion')!r}, {review.get('kind')!r}"
        raise ConversionError(
            "apiVersion", f"must be {REVIEW_API_VERSION} with kind ConversionReview, not {got}"
        )
    request = review.get("request")
    if not isinstance(request, dict):
        raise ConversionError("request", "missing: a ConversionReview must carry its request")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise ConversionError("request.uid", "missing: the request's uid is echoed in the response")
    desired = request.get("desiredAPIVersion")
    if desired not in VERSIONS:
        raise ConversionError("request.desiredAPIVersion", f"{desired!r} is not one of {', '.join(VERSIONS)}")
    objects = request.get("objects")
    if not isinstance(objects, list):
        raise ConversionError("request.objects", "must be an array of the objects to convert")
    return uid, desired, objects


def _uid_of(body: bytes) -> str:
    """The request's uid when the body has one (a failure echoes it too)."""
    try:
        uid = msgspec.json.decode(body).get("request", {}).get("uid")
    except (msgspec.DecodeError, AttributeError):
        return ""
    return uid if isinstance(uid, str) else ""


def _answer(uid: str, converted: list[Any] | None, failure: str | None) -> bytes:
    result: dict[str, Any] = (
        {"status": "Success"} if failure is None else {"status": "Failure", "message": failure}
    )
    response: dict[str, Any] = {"uid": uid, "result": result}
    if converted is not None:
        response["convertedObjects"] = converted
    return msgspec.json.encode(
        {"apiVersion": REVIEW_API_VERSION, "kind": "ConversionReview", "response": response}
    )


def convert_review(body: bytes) -> tuple[bytes, Outcome]:
    """The response to one ConversionReview, and what happened."""
    try:
        uid, desired, objects = _request(body)
    except ConversionError as err:
        uid = _uid_of(body)
        message = f"conversion refused: {err}"
        return _answer(uid, None, message), Outcome(uid, "", 0, message)
    converted: list[Any] = []
    for i, obj in enumerate(objects):
        try:
            converted.append(convert(obj, desired))
        except ConversionError as err:
            where = f"request.objects[{i}]" + (f".{err.field}" if err.field else "")
            message = f"conversion to {desired} refused for {_describe(obj)}: {where}: {err.problem}"
            return _answer(uid, None, message), Outcome(uid, desired, len(objects), message)
    return _answer(uid, converted, None), Outcome(uid, desired, len(objects))
