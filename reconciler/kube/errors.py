"""The errors of the API layer: one tree, so callers catch what they mean.

::

    KubeError                     anything this layer raises
    ├── ConfigError               no usable kubeconfig / in-cluster configuration
    ├── TransportError            connection refused/reset, TLS, timeouts: retryable
    ├── DecodeError               a body or watch line that is not what it should be
    └── ApiError(status, reason, message)
        │                         a non-2xx answer, built from its ``Status`` body
        ├── Unauthorized          401
        ├── Forbidden             403
        │   └── NamespaceTerminating  403 for a create in a namespace being deleted
        ├── NotFound              404
        ├── Conflict              409 (also a failed resourceVersion precondition)
        ├── Gone                  410 (resourceVersion or continue token too old)
        ├── Invalid               422
        ├── TooManyRequests       429, ``retry_after`` in seconds when the server said
        └── ServerError           5xx

Library exceptions (aiohttp, msgspec) never leave this package: they are
wrapped, with the original kept as ``__cause__``.
"""

from __future__ import annotations

import msgspec

__all__ = [
    "ApiError",
    "ConfigError",
    "Conflict",
    "DecodeError",
    "Forbidden",
    "Gone",
    "Invalid",
    "KubeError",
    "NamespaceTerminating",
    "NotFound",
    "ServerError",
    "TooManyRequests",
    "TransportError",
    "Unauthorized",
    "api_error",
]


class KubeError(Exception):
    """Base of every error raised by reconciler.kube."""


class ConfigError(KubeError):
    """The client cannot be configured (kubeconfig or in-cluster environment)."""


class TransportError(KubeError):
    """The request did not get a complete HTTP answer; retrying may help."""


class DecodeError(KubeError):
    """A response body or a watch line could not be decoded."""


class ApiError(KubeError):
    """The API server answered with a non-2xx status."""

    def __init__(self, status: int, reason: str = "", message: str = "") -> None:
        super().__init__(f"{status} {reason}: {message}" if message else f"{status} {reason}")
        self.status = status
        self.reason = reason
        self.message = message


class Unauthorized(ApiError):  # noqa: N818 (Kubernetes' status names)
    """401: credentials missing, wrong or expired."""


class Forbidden(ApiError):  # noqa: N818 (Kubernetes' status names)
    """403: RBAC does not allow the request."""


class NamespaceTerminating(Forbidden):
    """403 with the cause ``NamespaceTerminating``: nothing new can be created in a namespace
    that is being deleted. Not an RBAC problem: the namespace's objects are going away too."""


class NotFound(ApiError):  # noqa: N818 (Kubernetes' status names)
    """404: the object (or the resource type) does not exist."""


class Conflict(ApiError):  # noqa: N818 (Kubernetes' status names)
    """409: already exists, or the resourceVersion precondition failed."""


class Gone(ApiError):  # noqa: N818 (Kubernetes' status names)
    """410: the resourceVersion or continue token has expired; list again."""


class Invalid(ApiError):  # noqa: N818 (Kubernetes' status names)
    """422: the object failed validation (or a JSON patch test op failed)."""


class TooManyRequests(ApiError):  # noqa: N818 (Kubernetes' status names)
    """429: throttled; ``retry_after`` seconds if the server said so."""

    def __init__(
        self, status: int, reason: str = "", message: str = "", retry_after: float | None = None
    ) -> None:
        super().__init__(status, reason, message)
        self.retry_after = retry_after


class ServerError(ApiError):
    """5xx: the server (or a proxy in front of it) failed; retrying may help."""


_BY_STATUS: dict[int, type[ApiError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
}


class _StatusCause(msgspec.Struct):
    # metav1.StatusCause's Type field, which is spelled "reason" in JSON.
    reason: str = ""


class _StatusDetails(msgspec.Struct, rename="camel"):
    retry_after_seconds: int | None = None
    causes: list[_StatusCause] = []


class _Status(msgspec.Struct):
    """A ``meta/v1 Status`` body: only what the error needs."""

    kind: str = ""
    reason: str = ""
    message: str = ""
    code: int = 0
    details: _StatusDetails | None = None


def _parse_retry_after(header: str | None, status: _Status | None) -> float | None:
    if header:
        try:
            return max(0.0, float(header))
        except ValueError:
            pass  # an HTTP date: rare from kube-apiserver; fall back to the body
    if status is not None and status.details is not None and status.details.retry_after_seconds is not None:
        return float(max(0, status.details.retry_after_seconds))
    return None


def decode_status(body: bytes) -> _Status | None:
    """The ``Status`` in a body, or None when the body is something else."""
    try:
        status = msgspec.json.decode(body, type=_Status)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return status if status.kind == "Status" else None


def _has_cause(status: _Status | None, cause: str) -> bool:
    details = None if status is None else status.details
    return details is not None and any(c.reason == cause for c in details.causes)


def api_error(status: int, body: bytes, *, retry_after_header: str | None = None) -> ApiError:
    """The error for a non-2xx answer: reason and message from a ``Status`` body when present."""
    parsed = decode_status(body)
    if parsed is not None:
        reason, message = parsed.reason, parsed.message
    else:
        reason = ""
        message = body[:500].decode("utf-8", "replace").strip()
    if status == 429:
        return TooManyRequests(status, reason, message, _parse_retry_after(retry_after_header, parsed))
    if status >= 500:
        return ServerError(status, reason, message)
    if status == 403 and _has_cause(parsed, "NamespaceTerminating"):
        return NamespaceTerminating(status, reason, message)
    return _BY_STATUS.get(status, ApiError)(status, reason, message)
