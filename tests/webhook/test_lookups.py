"""What the webhooks ask the API (ApiLookups) against a scripted API server: the pod webhook's
Namespace labels and the metadata of a pod's controlling Job or JobSet, 404 meaning not there."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from reconciler.api.resources import JOBS
from reconciler.api.resources import JOBSETS
from reconciler.api.resources import NAMESPACES
from reconciler.kube import Backoff
from reconciler.kube import KubeClient
from reconciler.webhook.lookups import ApiLookups

from tests.support.fake_apiserver import FakeApiServer
from tests.support.fake_apiserver import json_reply
from tests.support.fake_apiserver import status_reply


@pytest_asyncio.fixture
async def lookups() -> AsyncIterator[tuple[ApiLookups, FakeApiServer]]:
    server = FakeApiServer()
    await server.start()
    client = KubeClient(server.url, token="t0ken", retry_backoff=Backoff(initial=0.01, maximum=0.04))
    try:
        yield ApiLookups(client), server
    finally:
        await client.close()
        await server.close()


@pytest.mark.asyncio
async def test_namespace_labels_and_a_missing_namespace(lookups: tuple[ApiLookups, FakeApiServer]) -> None:
    api, server = lookups
    labels = {"kubernetes.io/metadata.name": "ns", "team": "ml"}
    server.script(
        ("LIST", NAMESPACES.item_path(None, "ns")),
        json_reply(200, {"metadata": {"name": "ns", "labels": labels}}),
    )
    server.script(("LIST", NAMESPACES.item_path(None, "gone")), status_reply(404, "NotFound", "not found"))
    assert await api.namespace_labels("ns") == labels
    assert await api.namespace_labels("gone") == {}


@pytest.mark.asyncio
async def test_the_metadata_of_a_pods_job_or_jobset(lookups: tuple[ApiLookups, FakeApiServer]) -> None:
    api, server = lookups
    job = {"metadata": {"name": "j", "namespace": "ns", "labels": {"kueue.x-k8s.io/queue-name": "lq"}}}
    server.script(("LIST", JOBS.item_path("ns", "j")), json_reply(200, job))
    server.script(("LIST", JOBSETS.item_path("ns", "js")), status_reply(404, "NotFound", "not found"))
    meta = await api.object_meta("batch/v1", "Job", "ns", "j")
    assert meta is not None
    assert meta.labels == {"kueue.x-k8s.io/queue-name": "lq"}
    assert await api.object_meta("jobset.x-k8s.io/v1alpha2", "JobSet", "ns", "js") is None
    # A kind it does not know is not asked for.
    assert await api.object_meta("apps/v1", "ReplicaSet", "ns", "rs") is None
    assert [r.path for r in server.requests] == [JOBS.item_path("ns", "j"), JOBSETS.item_path("ns", "js")]
