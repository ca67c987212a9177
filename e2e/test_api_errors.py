"""The controller's API client against a real kube-apiserver: the errors it raises are the ones
the code above it tells apart (here: a create refused because the namespace is being deleted,
which the controller must not take for an RBAC problem)."""

from __future__ import annotations

import uuid

import msgspec
import pytest

from e2e.testbed import KubeClient, api_path
from e2e.testbed.clusters import Cluster
from e2e.testbed.scenario import wait_for
from reconciler.api.resources import SECRETS
from reconciler.kube import KubeClient as ControllerClient
from reconciler.kube import NamespaceTerminating

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(120)]

HOLD = "e2e.dra-quota.dev/hold"


@pytest.mark.asyncio
async def test_a_create_in_a_terminating_namespace_raises_namespace_terminating(
    kube: KubeClient, cluster: Cluster
) -> None:
    name = f"t-{uuid.uuid4().hex[:8]}"
    namespace_path = api_path("v1", "namespaces", name=name)
    await kube.create(
        api_path("v1", "namespaces"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    held = api_path("v1", "secrets", name, name="held")
    # A finalizer nobody removes keeps the namespace in Terminating until the test lets go.
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "held", "finalizers": [HOLD]}}
    await kube.create(api_path("v1", "secrets", name), secret)
    await kube.delete(namespace_path)
    try:
        async with await ControllerClient.from_kubeconfig(str(cluster.kubeconfig)) as client:

            async def refused() -> NamespaceTerminating | None:
                body = {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": f"s-{uuid.uuid4().hex[:6]}"},
                }
                try:
                    await client.create(SECRETS, name, msgspec.json.encode(body))
                except NamespaceTerminating as err:
                    return err
                return None  # the admission's namespace cache had not seen the deletion yet

            error = await wait_for(
                "a create refused as NamespaceTerminating", refused, within=30, interval=0.5
            )
        assert error.status == 403
        assert "being terminated" in error.message
    finally:
        await kube.patch(held, {"metadata": {"finalizers": None}})
        await wait_for(f"namespace {name} to be deleted", lambda: _gone(kube, namespace_path), within=60)


async def _gone(kube: KubeClient, path: str) -> bool:
    return await kube.get_or_none(path) is None
