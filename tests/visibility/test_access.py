"""Who asks the visibility API: the front proxy's settings, its user headers, cached reviews."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from multidict import CIMultiDict

from reconciler.kube.reviews import AccessDecision, ReviewedUser
from reconciler.visibility.access import Authorizer, Refusal, RequestHeaderConfig, authenticate

CONFIGMAP = {
    "requestheader-client-ca-file": "-----BEGIN CERTIFICATE-----\nX\n-----END CERTIFICATE-----",
    "requestheader-allowed-names": '["front-proxy-client"]',
    "requestheader-username-headers": '["X-Remote-User"]',
    "requestheader-group-headers": '["X-Remote-Group"]',
    "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]',
}


def _auth(config: RequestHeaderConfig | None, cn: str | None, headers: CIMultiDict[str]) -> Any:
    return authenticate(config, cn, headers, lambda h: headers.getall(h, []))


def test_the_configmap_is_read_and_a_missing_ca_or_bad_list_is_named() -> None:
    config = RequestHeaderConfig.from_configmap(CONFIGMAP)
    assert config.allowed_names == ("front-proxy-client",)
    assert config.group_headers == ("X-Remote-Group",)
    with pytest.raises(ValueError, match="requestheader-client-ca-file is missing"):
        RequestHeaderConfig.from_configmap({})
    with pytest.raises(ValueError, match="requestheader-allowed-names"):
        RequestHeaderConfig.from_configmap({**CONFIGMAP, "requestheader-allowed-names": "front"})


def test_the_user_groups_and_extras_come_from_the_proxy_headers() -> None:
    config = RequestHeaderConfig.from_configmap(CONFIGMAP)
    headers = CIMultiDict(
        [
            ("X-Remote-User", "alice"),
            ("X-Remote-Group", "team"),
            ("X-Remote-Group", "system:authenticated"),
            ("X-Remote-Extra-Scopes%2fa", "one"),
        ]
    )
    user = _auth(config, "front-proxy-client", headers)
    assert user == ReviewedUser("alice", "", ("team", "system:authenticated"), (("scopes/a", ("one",)),))


def test_a_user_without_groups_is_authenticated() -> None:
    # The aggregator's own discovery requests name a user and no group.
    user = _auth(
        RequestHeaderConfig.from_configmap(CONFIGMAP),
        "front-proxy-client",
        CIMultiDict([("X-Remote-User", "system:kube-aggregator")]),
    )
    assert user == ReviewedUser("system:kube-aggregator")


@pytest.mark.parametrize(
    ("cn", "headers", "why"),
    [
        (None, [("X-Remote-User", "admin")], "no client certificate"),
        ("someone-else", [("X-Remote-User", "admin")], "not an allowed front proxy"),
        ("front-proxy-client", [], "named no user"),
    ],
)
def test_without_the_proxy_certificate_or_a_user_the_request_is_unauthorized(
    cn: str | None, headers: list[tuple[str, str]], why: str
) -> None:
    refusal = _auth(RequestHeaderConfig.from_configmap(CONFIGMAP), cn, CIMultiDict(headers))
    assert isinstance(refusal, Refusal)
    assert refusal.code == 401
    assert why in refusal.message


def test_before_the_ca_is_read_nobody_is_authenticated() -> None:
    refusal = _auth(None, "front-proxy-client", CIMultiDict([("X-Remote-User", "admin")]))
    assert isinstance(refusal, Refusal)
    assert "extension-apiserver-authentication" in refusal.message


class _Reviews:
    def __init__(self, allowed: bool) -> None:
        self.allowed = allowed
        self.asked: list[dict[str, Any]] = []

    async def review_access(self, user: ReviewedUser, attributes: dict[str, Any]) -> AccessDecision:
        self.asked.append(attributes)
        return AccessDecision(self.allowed)


def test_decisions_are_cached_for_their_ttl_per_user_and_attributes() -> None:
    now = [0.0]
    reviews = _Reviews(allowed=False)
    authorizer = Authorizer(reviews, ttl=10.0, clock=lambda: now[0])
    alice, bob = ReviewedUser("alice"), ReviewedUser("bob")
    attributes = {"verb": "get", "resource": "clusterqueues"}

    async def run() -> list[bool]:
        answers = [
            await authorizer.decide(alice, "resourceAttributes", attributes),
            await authorizer.decide(alice, "resourceAttributes", attributes),
            await authorizer.decide(bob, "resourceAttributes", attributes),
        ]
        now[0] = 11.0
        reviews.allowed = True
        answers.append(await authorizer.decide(alice, "resourceAttributes", attributes))
        return [a.allowed for a in answers]

    assert asyncio.run(run()) == [False, False, False, True]
    assert len(reviews.asked) == 3  # alice once, bob once, alice again after the TTL
