"""Scrapers of the controller's secure /metrics on the test-bed: ServiceAccounts, tokens, RBAC.

The shipped objects are applied as they are: the ClusterRole
dra-quota-reconciler-metrics-reader of manifests/rbac.yaml and the ClusterRoleBinding of
manifests/prometheus/metrics-reader-binding.yaml, which binds it to the ServiceAccount
prometheus-k8s in monitoring. A second ServiceAccount there, bound to nothing, is the
authenticated user without the permission. Tokens come from the TokenRequest API, so the
real kube-apiserver answers the controller's TokenReviews and SubjectAccessReviews.
"""

from __future__ import annotations

from dataclasses import dataclass

import aiohttp

from e2e.support.deploy import ROOT, apply_objects, load_documents, request_token
from e2e.testbed import KubeClient, api_path
from e2e.testbed.scenario import wait_for

__all__ = ["READER_ROLE", "Scrapers", "make_scrapers", "remove_scrapers", "scrape", "wait_listening"]

READER_ROLE = "dra-quota-reconciler-metrics-reader"
BINDING_FILE = ROOT / "manifests" / "prometheus" / "metrics-reader-binding.yaml"
UNBOUND = "metrics-nobody"
FIELD_MANAGER = "e2e-metrics-access"


@dataclass(frozen=True)
class Scrapers:
    namespace: str
    reader_token: str  # the ServiceAccount the shipped binding names
    unbound_token: str  # authenticated, not allowed get on /metrics


async def make_scrapers(kube: KubeClient) -> Scrapers:
    (role,) = [
        d
        for d in load_documents(ROOT / "manifests" / "rbac.yaml")
        if d["kind"] == "ClusterRole" and d["metadata"]["name"] == READER_ROLE
    ]
    (binding,) = load_documents(BINDING_FILE)
    (subject,) = binding["subjects"]
    namespace = subject["namespace"]
    accounts = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}}
        for name in (subject["name"], UNBOUND)
    ]
    namespace_object = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    await apply_objects(kube, [namespace_object, *accounts, role, binding], FIELD_MANAGER)
    return Scrapers(
        namespace,
        await request_token(kube, namespace, subject["name"]),
        await request_token(kube, namespace, UNBOUND),
    )


async def remove_scrapers(kube: KubeClient, scrapers: Scrapers) -> None:
    (binding,) = load_documents(BINDING_FILE)
    rbac = "rbac.authorization.k8s.io/v1"
    await kube.delete(api_path(rbac, "clusterrolebindings", None, binding["metadata"]["name"]))
    await kube.delete(api_path(rbac, "clusterroles", None, READER_ROLE))
    await kube.delete(api_path("v1", "namespaces", None, scrapers.namespace))


async def scrape(http: aiohttp.ClientSession, port: int, token: str | None) -> tuple[int, str]:
    """GET https://127.0.0.1:port/metrics (self-signed: not verified) with the bearer token, if any."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with http.get(f"https://127.0.0.1:{port}/metrics", headers=headers, ssl=False) as resp:
        return resp.status, await resp.text()


async def wait_listening(http: aiohttp.ClientSession, port: int, within: float = 60.0) -> None:
    """Until the metrics server answers HTTPS at all (the process may still be starting)."""

    async def answers() -> bool:
        try:
            await scrape(http, port, None)
        except aiohttp.ClientConnectionError:
            return False
        return True

    await wait_for(f"the metrics server on 127.0.0.1:{port}", answers, within=within)
