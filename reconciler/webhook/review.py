"""AdmissionReview (admission.k8s.io/v1): the request as plain data, the verdict, the response.

A handler gets an :class:`AdmissionRequest` and returns a :class:`Verdict`: allowed (with JSON
patch operations for a mutating webhook) or denied (field errors, or a message). The response is
what controller-runtime sends for the same outcome: a denial is ``403 Forbidden`` with the
aggregated field errors as its message (the API server shows it after
``admission webhook "<name>" denied the request:``), and each error is also a cause in
``status.details.causes``.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec

from .fielderrors import FieldError, aggregate, invalid

__all__ = [
    "AdmissionRequest",
    "AdmissionReview",
    "BadReviewError",
    "PatchOp",
    "Verdict",
    "decode_object",
    "decode_review",
    "encode_response",
    "escape",
]

API_VERSION = "admission.k8s.io/v1"
PatchOp = dict[str, Any]
T = TypeVar("T")


class GroupVersionKind(msgspec.Struct):
    group: str = ""
    version: str = ""
    kind: str = ""


class GroupVersionResource(msgspec.Struct):
    group: str = ""
    version: str = ""
    resource: str = ""


class AdmissionRequest(msgspec.Struct, rename="camel"):
    uid: str
    kind: GroupVersionKind = msgspec.field(default_factory=GroupVersionKind)
    resource: GroupVersionResource = msgspec.field(default_factory=GroupVersionResource)
    sub_resource: str = ""
    operation: str = ""  # CREATE, UPDATE, DELETE, CONNECT
    namespace: str = ""
    name: str = ""
    object: msgspec.Raw = msgspec.Raw(b"null")
    old_object: msgspec.Raw = msgspec.Raw(b"null")
    dry_run: bool = False


class AdmissionReview(msgspec.Struct, rename="camel"):
    api_version: str = ""
    kind: str = ""
    request: AdmissionRequest | None = None


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    patch: tuple[PatchOp, ...] = ()
    errors: tuple[FieldError, ...] = ()
    message: str = ""
    code: int = 403
    warnings: tuple[str, ...] = field(default=())

    @classmethod
    def allow(cls, patch: list[PatchOp] | tuple[PatchOp, ...] = ()) -> Verdict:
        return cls(True, tuple(patch))

    @classmethod
    def deny(cls, errors: list[FieldError]) -> Verdict:
        return cls(False, errors=tuple(errors), message=aggregate(errors))

    @classmethod
    def judge(cls, errors: list[FieldError]) -> Verdict:
        """Allowed when there is no error, else denied with them."""
        return cls.deny(errors) if errors else cls.allow()

    @classmethod
    def fail(cls, message: str, code: int = 500) -> Verdict:
        """Not a verdict on the object: the webhook could not decide (the API server reports it)."""
        return cls(False, message=message, code=code)


class BadReviewError(ValueError):
    """The body is not an AdmissionReview v1 with a request."""


def decode_review(body: bytes) -> AdmissionRequest:
    try:
        review = msgspec.json.decode(body, type=AdmissionReview)
    except msgspec.DecodeError as err:
        raise BadReviewError(f"not an AdmissionReview: {err}") from None
    if review.api_version != API_VERSION or review.kind != "AdmissionReview" or review.request is None:
        raise BadReviewError(
            f"expected an {API_VERSION} AdmissionReview with a request, got {review.api_version!r} "
            f"{review.kind!r}; register the webhook with admissionReviewVersions: [v1]"
        )
    return review.request


def decode_object(raw: msgspec.Raw, kind: type[T]) -> tuple[T | None, list[FieldError]]:
    """The object as its slim type; a field error (path from the decoder) when it does not fit."""
    try:
        return msgspec.json.decode(raw, type=kind), []
    except msgspec.ValidationError as err:
        text = str(err)
        where = text.rpartition(" - at `$.")[2].rstrip("`") if " - at `$." in text else ""
        return None, [invalid(where or "(object)", None, text.partition(" - at ")[0])]


def _status(verdict: Verdict) -> dict[str, Any]:
    status: dict[str, Any] = {"metadata": {}, "status": "Failure", "code": verdict.code}
    status["message"] = verdict.message
    status["reason"] = {403: "Forbidden", 400: "BadRequest"}.get(verdict.code, "InternalError")
    if verdict.errors:
        causes = [{"reason": e.reason, "message": e.body(), "field": str(e.field)} for e in verdict.errors]
        status["details"] = {"causes": causes}
    return status


def encode_response(uid: str, verdict: Verdict) -> bytes:
    response: dict[str, Any] = {"uid": uid, "allowed": verdict.allowed}
    if verdict.allowed:
        if verdict.patch:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(msgspec.json.encode(list(verdict.patch))).decode()
    else:
        response["status"] = _status(verdict)
    if verdict.warnings:
        response["warnings"] = list(verdict.warnings)
    return msgspec.json.encode({"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response})


def escape(token: str) -> str:
    """A JSON pointer token (RFC 6901): ``kueue.x-k8s.io/queue-name`` → ``kueue.x-k8s.io~1queue-name``."""
    return token.replace("~", "~0").replace("/", "~1")
