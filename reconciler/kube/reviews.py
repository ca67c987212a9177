"""Delegated authentication and authorization: TokenReview and SubjectAccessReview.

The metrics server asks the API server who a bearer token belongs to
(``authentication.k8s.io/v1`` TokenReview) and whether that user may ``get``
a non-resource URL (``authorization.k8s.io/v1`` SubjectAccessReview), as
controller-runtime's secure metrics filter does. Both are POSTs of a review
object; the answer is in its ``status``. Every call has a timeout; errors are
raised as the error tree of ``reconciler.kube.errors`` (the caller decides
what a failed review means).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from reconciler.api.resources import SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS
from reconciler.kube.client import KubeClient

__all__ = ["REVIEW_TIMEOUT", "AccessDecision", "ApiReviewer", "ReviewError", "ReviewedUser"]

REVIEW_TIMEOUT = 10.0


class ReviewError(Exception):
    """The API server answered, but not with a review status this module understands."""


@dataclass(frozen=True, slots=True)
class ReviewedUser:
    """Who a token belongs to, as the TokenReview's status says (hashable: a cache key)."""

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class AccessDecision:
    allowed: bool
    reason: str = ""


def _status(body: bytes, kind: str) -> dict[str, Any]:
    try:
        answer = json.loads(body)
    except ValueError as err:
        raise ReviewError(f"the {kind} answer is not JSON: {err}") from None
    status = answer.get("status") if isinstance(answer, dict) else None
    if not isinstance(status, dict):
        raise ReviewError(f"the {kind} answer has no status")
    return status


def _user(status: dict[str, Any]) -> ReviewedUser:
    user = status.get("user") or {}
    extra = user.get("extra") or {}
    return ReviewedUser(
        username=str(user.get("username", "")),
        uid=str(user.get("uid", "")),
        groups=tuple(str(g) for g in user.get("groups") or ()),
        extra=tuple(sorted((str(k), tuple(str(v) for v in values or ())) for k, values in extra.items())),
    )


class ApiReviewer:
    """Reviews tokens and access through the API server the client talks to."""

    def __init__(self, client: KubeClient, *, timeout: float = REVIEW_TIMEOUT) -> None:
        self._client = client
        self._timeout = timeout

    async def authenticate(self, token: str) -> ReviewedUser | None:
        """The token's user, or None when the API server does not authenticate it."""
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        body = await self._client.request(
            "POST", TOKEN_REVIEWS.list_path(), body=json.dumps(review).encode(), timeout=self._timeout
        )
        status = _status(body, "TokenReview")
        if status.get("authenticated") is not True:
            return None
        user = _user(status)
        return user if user.username else None

    async def authorize(self, user: ReviewedUser, path: str, verb: str) -> AccessDecision:
        """May ``user`` use ``verb`` on the non-resource URL ``path``?"""
        return await self.review_access(user, {"nonResourceAttributes": {"path": path, "verb": verb}})

    async def review_access(self, user: ReviewedUser, attributes: dict[str, Any]) -> AccessDecision:
        """May ``user`` do what ``attributes`` say (a SubjectAccessReview spec's
        ``resourceAttributes`` or ``nonResourceAttributes``, keyed so)?"""
        spec: dict[str, Any] = {"user": user.username, "groups": list(user.groups), **attributes}
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {key: list(values) for key, values in user.extra}
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        body = await self._client.request(
            "POST",
            SUBJECT_ACCESS_REVIEWS.list_path(),
            body=json.dumps(review).encode(),
            timeout=self._timeout,
        )
        status = _status(body, "SubjectAccessReview")
        reason = str(status.get("reason") or status.get("evaluationError") or "")
        return AccessDecision(status.get("allowed") is True and status.get("denied") is not True, reason)
