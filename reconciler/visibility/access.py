"""Who is asking: the front proxy's certificate, its user headers, and a SubjectAccessReview.

An aggregated API server trusts the user the API server's front proxy names, and only that
proxy, as Kubernetes' delegated authentication does:

- the front proxy's client certificate must verify against the request-header client CA (the
  TLS handshake checks it: ``RequestHeaderConfig.client_ca`` is loaded into the server's
  context) and its common name must be one of the allowed names (any, when none are given);
- the user is then the first non-empty username header (``X-Remote-User``), the groups every
  value of the group headers (``X-Remote-Group``), extras from the extra-header prefixes.

The configuration is the one the API server publishes in the ConfigMap
``kube-system/extension-apiserver-authentication`` (``requestheader-*`` keys).

Without a verified front-proxy certificate or a user header the request is unauthenticated
(401). Each request is then authorized by a SubjectAccessReview (resource attributes for the
pending workloads, a non-resource path for discovery); decisions are cached briefly (10 s, as
Kubernetes' webhook authorizer), failed reviews not at all (500).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import unquote

from reconciler.kube.reviews import AccessDecision, ReviewedUser
from reconciler.observability.access import TtlCache

__all__ = [
    "AUTHENTICATION_CONFIGMAP",
    "AccessReviewer",
    "Authorizer",
    "RequestHeaderConfig",
    "authenticate",
    "common_name",
]

# (namespace, name) of the ConfigMap the API server publishes its authentication settings in.
AUTHENTICATION_CONFIGMAP = ("kube-system", "extension-apiserver-authentication")


@dataclass(frozen=True, slots=True)
class RequestHeaderConfig:
    client_ca: str  # PEM
    allowed_names: tuple[str, ...] = ()
    username_headers: tuple[str, ...] = ("X-Remote-User",)
    group_headers: tuple[str, ...] = ("X-Remote-Group",)
    extra_prefixes: tuple[str, ...] = ("X-Remote-Extra-",)
    uid_headers: tuple[str, ...] = ()

    @classmethod
    def from_configmap(cls, data: Mapping[str, str]) -> RequestHeaderConfig:
        """From the ConfigMap's data; ValueError naming the key when it lacks the CA or is malformed."""
        ca = data.get("requestheader-client-ca-file", "").strip()
        if not ca:
            raise ValueError(
                "requestheader-client-ca-file is missing: start kube-apiserver with "
                "--requestheader-client-ca-file (the front proxy's CA)"
            )

        def names(key: str, default: tuple[str, ...]) -> tuple[str, ...]:
            text = data.get(key)
            if text is None:
                return default
            try:
                value = json.loads(text)
            except ValueError:
                raise ValueError(f"{key}: {text!r} is not a JSON list of strings") from None
            if value is None:
                return ()
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{key}: {text!r} is not a JSON list of strings")
            return tuple(value)

        return cls(
            client_ca=ca + "\n",
            allowed_names=names("requestheader-allowed-names", ()),
            username_headers=names("requestheader-username-headers", ()),
            group_headers=names("requestheader-group-headers", ()),
            extra_prefixes=names("requestheader-extra-headers-prefix", ()),
            uid_headers=names("requestheader-uid-headers", ()),
        )


def common_name(peercert: Mapping[str, Any] | None) -> str | None:
    """The subject's common name of a certificate the TLS handshake verified (Python's dict form)."""
    if not peercert:
        return None
    for rdn in peercert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return ""


@dataclass(frozen=True, slots=True)
class Refusal:
    code: int
    reason: str
    message: str


def authenticate(
    config: RequestHeaderConfig | None,
    proxy_name: str | None,
    headers: Mapping[str, str],
    all_values: Callable[[str], list[str]],
) -> ReviewedUser | Refusal:
    """The user the front proxy names, or why the request is not authenticated.

    ``proxy_name``: the verified client certificate's common name (None: no verified certificate);
    ``all_values(header)``: every value of a header (groups may come in several)."""
    if config is None:
        return Refusal(
            401,
            "Unauthorized",
            "the front proxy's CA is not known yet (extension-apiserver-authentication not read)",
        )
    if proxy_name is None:
        return Refusal(
            401, "Unauthorized", "Unauthorized: no client certificate signed by the request-header CA"
        )
    if config.allowed_names and proxy_name not in config.allowed_names:
        return Refusal(
            401,
            "Unauthorized",
            f"Unauthorized: client certificate CN {proxy_name!r} is not an allowed front proxy",
        )
    username = next((v for h in config.username_headers if (v := headers.get(h, "").strip())), "")
    if not username:
        return Refusal(401, "Unauthorized", "Unauthorized: the front proxy named no user")
    groups = tuple(g for h in config.group_headers for g in all_values(h) if g)
    uid = next((v for h in config.uid_headers if (v := headers.get(h, "").strip())), "")
    extra: dict[str, list[str]] = {}
    lowered = tuple(p.lower() for p in config.extra_prefixes)
    for header in headers:
        low = header.lower()
        for prefix in lowered:
            if low.startswith(prefix) and len(low) > len(prefix):
                key = unquote(low[len(prefix) :])
                extra.setdefault(key, []).extend(all_values(header))
    return ReviewedUser(
        username=username,
        uid=uid,
        groups=groups,
        extra=tuple(sorted((k, tuple(v)) for k, v in extra.items())),
    )


class AccessReviewer(Protocol):
    async def review_access(self, user: ReviewedUser, attributes: dict[str, Any]) -> AccessDecision: ...


Attributes = tuple[tuple[str, str], ...]


class Authorizer:
    """SubjectAccessReviews, cached per user and attributes for ``ttl`` seconds."""

    def __init__(
        self,
        reviewer: AccessReviewer,
        *,
        ttl: float = 10.0,
        max_entries: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._reviewer = reviewer
        self._ttl = ttl
        self._cache: TtlCache[tuple[ReviewedUser, str, Attributes], AccessDecision] = TtlCache(
            max_entries, clock
        )

    async def decide(self, user: ReviewedUser, kind: str, attributes: Mapping[str, str]) -> AccessDecision:
        """``kind``: resourceAttributes or nonResourceAttributes; raises when the review fails."""
        key = (user, kind, tuple(sorted(attributes.items())))
        cached, decision = self._cache.get(key)
        if cached and decision is not None:
            return decision
        decision = await self._reviewer.review_access(user, {kind: dict(attributes)})
        self._cache.put(key, decision, self._ttl)
        return decision
