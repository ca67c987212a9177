"""Who may read ``/metrics``: a bearer token, authenticated and authorized by the API server.

An aiohttp middleware in front of the metrics handler, as controller-runtime's
``filters.WithAuthenticationAndAuthorization`` is in front of Kueue's:

- no ``Authorization: Bearer <token>`` header, or a token the API server's
  TokenReview does not authenticate: 401;
- an authenticated user whom the SubjectAccessReview does not allow the
  request's verb (``get``) on its path (``/metrics``, a non-resource URL): 403;
- the TokenReview failing (API server unreachable, timeout): 401, as the
  Kubernetes filters answer; the SubjectAccessReview failing: 500;
- else the request goes through.

Reviews are cached a short while in bounded LRU caches, so a scraper costs the
API server at most one TokenReview and one SubjectAccessReview per TTL:
tokens by their SHA-256 (never the token itself), decisions by user, path and
verb. Denials and rejections are cached for less time than successes. Failed
reviews are not cached. The reviews themselves are done by a ``Reviewer``
(``reconciler.kube.reviews.ApiReviewer`` in the process), which sets the
timeouts of its API calls.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import structlog
from aiohttp import web

__all__ = [
    "AccessGuard",
    "CachePolicy",
    "Decision",
    "Reviewer",
    "TtlCache",
]

log = structlog.get_logger(__name__)

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Subject(Protocol):
    @property
    def username(self) -> str: ...


S = TypeVar("S", bound=Subject)


class Decision(Protocol):
    @property
    def allowed(self) -> bool: ...

    @property
    def reason(self) -> str: ...


class Reviewer(Protocol[S]):
    async def authenticate(self, token: str) -> S | None:
        """The token's user, or None when it is not authenticated; raises when the review fails."""
        ...

    async def authorize(self, user: S, path: str, verb: str) -> Decision:
        """Whether ``user`` may ``verb`` the non-resource URL ``path``; raises when the review fails."""
        ...


@dataclass(frozen=True, slots=True)
class CachePolicy:
    authenticated_ttl: float = 60.0  # a token the API server authenticated
    unauthenticated_ttl: float = 10.0  # a token it rejected
    allowed_ttl: float = 60.0
    denied_ttl: float = 10.0
    max_entries: int = 1024  # per cache

    def __post_init__(self) -> None:
        if self.max_entries < 1:
            raise ValueError("max_entries must be at least 1")


class TtlCache(Generic[K, V]):
    """A bounded LRU map whose entries expire; time from ``clock`` (monotonic seconds)."""

    def __init__(self, max_entries: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._max = max_entries
        self._clock = clock
        self._items: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: K) -> tuple[bool, V | None]:
        """(True, value) while the entry is fresh; (False, None) when absent or expired."""
        entry = self._items.get(key)
        if entry is None:
            return False, None
        expires, value = entry
        if self._clock() >= expires:
            del self._items[key]
            return False, None
        self._items.move_to_end(key)
        return True, value

    def put(self, key: K, value: V, ttl: float) -> None:
        self._items[key] = (self._clock() + ttl, value)
        self._items.move_to_end(key)
        while len(self._items) > self._max:
            self._items.popitem(last=False)


def _refuse(status: int, text: str) -> web.Response:
    headers = {"WWW-Authenticate": 'Bearer realm="metrics"'} if status == 401 else None
    return web.Response(status=status, text=text + "\n", headers=headers)


def _bearer(request: web.Request) -> str | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


class AccessGuard(Generic[S]):
    """Authenticates and authorizes each request through ``reviewer``, with caches."""

    def __init__(
        self,
        reviewer: Reviewer[S],
        policy: CachePolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._reviewer = reviewer
        self._policy = policy or CachePolicy()
        self._users: TtlCache[str, S | None] = TtlCache(self._policy.max_entries, clock)
        self._decisions: TtlCache[tuple[S, str, str], bool] = TtlCache(self._policy.max_entries, clock)

    async def _user(self, token: str) -> S | None:
        key = hashlib.sha256(token.encode()).hexdigest()
        cached, user = self._users.get(key)
        if cached:
            return user
        user = await self._reviewer.authenticate(token)
        ttl = self._policy.authenticated_ttl if user is not None else self._policy.unauthenticated_ttl
        self._users.put(key, user, ttl)
        return user

    async def _allowed(self, user: S, path: str, verb: str) -> bool:
        key = (user, path, verb)
        cached, allowed = self._decisions.get(key)
        if cached and allowed is not None:
            return allowed
        decision = await self._reviewer.authorize(user, path, verb)
        if not decision.allowed:
            log.info(
                "metrics access denied", user=user.username, path=path, verb=verb, reason=decision.reason
            )
        ttl = self._policy.allowed_ttl if decision.allowed else self._policy.denied_ttl
        self._decisions.put(key, decision.allowed, ttl)
        return decision.allowed

    async def refusal(self, request: web.Request) -> web.Response | None:
        """None when the request may go on; else the answer that refuses it."""
        token = _bearer(request)
        if token is None:
            return _refuse(401, "Unauthorized: send a bearer token (Authorization: Bearer <token>)")
        try:
            user = await self._user(token)
        except Exception as err:
            log.warning("metrics: the TokenReview failed", error=str(err))
            return _refuse(401, "Authentication failed")
        if user is None:
            return _refuse(401, "Unauthorized")
        verb = request.method.lower()
        try:
            allowed = await self._allowed(user, request.path, verb)
        except Exception as err:
            log.warning("metrics: the SubjectAccessReview failed", user=user.username, error=str(err))
            return _refuse(500, f"Authorization for user {user.username} failed")
        if not allowed:
            return _refuse(403, f"Authorization denied for user {user.username}: {verb} {request.path}")
        return None

    @web.middleware
    async def middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        refusal = await self.refusal(request)
        return refusal if refusal is not None else await handler(request)
