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
import re
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec

from .fielderrors import FieldError, Path, aggregate, invalid, invalid_omitted, required

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
# Deeper than any Kubernetes object, well within what the decoder can read.
MAX_DEPTH = 100
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
    """Raises BadReviewError, naming what is wrong, for any body that cannot be decoded."""
    try:
        review = msgspec.json.decode(body, type=AdmissionReview)
        if review.request is not None:
            # Its objects are read later: one that cannot be (nested too deeply) fails here.
            _check_decodable(review.request.object, "request.object")
            _check_decodable(review.request.old_object, "request.oldObject")
    except msgspec.DecodeError as err:
        raise BadReviewError(f"not an AdmissionReview: {err}") from None
    except RecursionError:
        raise BadReviewError(
            f"not an AdmissionReview: JSON nested deeper than {MAX_DEPTH} levels cannot be decoded"
        ) from None
    if review.api_version != API_VERSION or review.kind != "AdmissionReview" or review.request is None:
        raise BadReviewError(
            f"expected an {API_VERSION} AdmissionReview with a request, got {review.api_version!r} "
            f"{review.kind!r}; register the webhook with admissionReviewVersions: [v1]"
        )
    return review.request


def _depth(value: object) -> int:
    """How deeply lists and objects nest in a decoded JSON value (iterative: no recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


def _check_decodable(raw: msgspec.Raw, where: str) -> None:
    value = msgspec.json.decode(raw)
    if _depth(value) > MAX_DEPTH:
        raise BadReviewError(
            f"not an AdmissionReview: {where} is nested deeper than {MAX_DEPTH} levels; "
            "no Kubernetes object is, send the object as the API server does"
        )


_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\['((?:[^'\\]|\\.)*)'\]")


def _value_at(raw: msgspec.Raw, where: str) -> tuple[bool, object]:
    """(found, value) at a decoder path such as `spec.podSets[0].count`."""
    value: object = msgspec.json.decode(raw)
    for key, index, quoted in _STEP.findall("." + where):
        if isinstance(value, list) and index and int(index) < len(value):
            value = value[int(index)]
            continue
        name = quoted or key
        if not (isinstance(value, dict) and name and name in value):
            return False, None
        value = value[name]
    return True, value


_MISSING = re.compile(r"Object missing required field `([^`]+)`")
_GOT = re.compile(r", got `([^`]+)`$")
# msgspec's names of JSON types, as its "got `...`" words them.
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "float": (float,),
    "bool": (bool,),
    "str": (str,),
    "null": (type(None),),
    "array": (list,),
    "object": (dict,),
}


def _map_key(raw: msgspec.Raw, where: str, detail: str) -> tuple[str, bool, object]:
    """A decoder path with the key of the map value that did not fit in place of msgspec's
    ``[...]``: the first value of the type it got (the decoder stops at the first that does not
    fit, and any value of that type fails alike)."""
    head, _, tail = where.partition("[...]")
    got = _GOT.search(detail)
    found, mapping = _value_at(raw, head)
    if not (found and isinstance(mapping, dict) and got and got.group(1) in _JSON_TYPES):
        return where, False, None
    kinds = _JSON_TYPES[got.group(1)]
    for key, value in mapping.items():
        if isinstance(value, kinds) and (bool not in kinds) == (not isinstance(value, bool)):
            if tail:  # deeper inside the value: not shown
                return str(Path(head).key(key)) + tail, False, None
            return str(Path(head).key(key)), True, value
    return where, False, None


def decode_object(raw: msgspec.Raw, kind: type[T]) -> tuple[T | None, list[FieldError]]:
    """The object as its slim type; a field error (path from the decoder, the value given) when it
    does not fit: a missing field named by its own path (``metadata: Required value``), a map's
    value by its key (``metadata.labels[team]``), as Kubernetes names them."""
    try:
        return msgspec.json.decode(raw, type=kind), []
    except msgspec.ValidationError as err:
        text = str(err)
        where = text.rpartition(" - at `$.")[2].rstrip("`") if " - at `$." in text else ""
        detail = text.partition(" - at ")[0]
        missing = _MISSING.fullmatch(detail)
        if missing:
            return None, [required(Path(where).child(missing.group(1)))]
        if "[...]" in where:
            where, found, value = _map_key(raw, where, detail)
        else:
            found, value = _value_at(raw, where) if where else (False, None)
        if not found:
            return None, [invalid_omitted(where or "(object)", detail)]
        return None, [invalid(where, value, detail)]


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
