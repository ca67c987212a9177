"""`reconciler explain`'s reads against the fake API server: the target, paged lists, 403s noted."""

from __future__ import annotations

from typing import Any

import pytest
from reconciler.api import CLUSTER_QUEUES
from reconciler.api import DEVICE_CLASSES
from reconciler.api import EVENTS
from reconciler.api import JOBS
from reconciler.api import LOCAL_QUEUES
from reconciler.api import NAMESPACES
from reconciler.api import PODS
from reconciler.api import RESOURCE_CLAIM_TEMPLATES
from reconciler.api import RESOURCE_CLAIMS
from reconciler.api import RESOURCE_FLAVORS
from reconciler.api import WORKLOADS
from reconciler.api import Resource
from reconciler.api.resources import COHORTS
from reconciler.api.resources import NODES
from reconciler.api.resources import RESOURCE_SLICES
from reconciler.explain.fetch import ExplainError
from reconciler.explain.fetch import fetch_state
from reconciler.explain.state import Target
from reconciler.kube import KubeClient
from reconciler.kube import ServerError

from tests.support.fake_apiserver import FakeApiServer
from tests.support.fake_apiserver import json_reply
from tests.support.fake_apiserver import obj
from tests.support.fake_apiserver import page
from tests.support.fake_apiserver import status_reply

NS = "team"
JOB: dict[str, Any] = {
    **obj("train", 5, NS, spec={"template": {"spec": {"containers": []}}}),
    "kind": "Job",
}
JOB["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "q"}
LISTS: list[tuple[Resource, str | None]] = [
    (WORKLOADS, None),
    (CLUSTER_QUEUES, None),
    (COHORTS, None),
    (LOCAL_QUEUES, None),
    (RESOURCE_FLAVORS, None),
    (NAMESPACES, None),
    (RESOURCE_CLAIM_TEMPLATES, None),
    (DEVICE_CLASSES, None),
    (RESOURCE_CLAIMS, NS),
    (RESOURCE_SLICES, None),
    (NODES, None),
    (EVENTS, NS),
    (PODS, NS),
]


def _empty_lists(fake: FakeApiServer) -> None:
    for resource, namespace in LISTS:
        fake.fallback(("LIST", resource.list_path(namespace)), page([], 10))


@pytest.mark.asyncio
async def test_fetches_the_job_and_every_list(fake: FakeApiServer, client: KubeClient) -> None:
    fake.script(("LIST", JOBS.item_path(NS, "train")), json_reply(200, JOB))
    _empty_lists(fake)
    workloads = WORKLOADS.list_path()
    wl = obj("job-train-abcde", 7, NS, spec={"queueName": "q", "podSets": []})
    other = obj("other", 8, NS, spec={"queueName": "q", "podSets": []})
    fake.script(("LIST", workloads), page([wl], 9, cont="next"), page([other], 9))
    fake.script(("LIST", CLUSTER_QUEUES.list_path()), status_reply(403, "Forbidden", "no"))
    fake.script(("LIST", LOCAL_QUEUES.list_path()), status_reply(404, "NotFound", "no such resource"))
    state = await fetch_state(
        client, Target("job", NS, "train"), now="2025-01-01T00:00:00Z", request_timeout=5
    )
    assert state.job is not None
    assert state.job.metadata.name == "train"
    assert [w.metadata.name for w in state.workloads] == ["job-train-abcde", "other"]
    assert sorted(state.unreadable) == [
        "ClusterQueues (forbidden)",
        "LocalQueues (not served: are the CRDs installed?)",
    ]
    pages = [r.query for r in fake.recorded("GET") if r.path == workloads]
    assert pages == [{"limit": "500"}, {"limit": "500", "continue": "next"}]
    (pods,) = [r.query for r in fake.recorded("GET") if r.path == PODS.list_path(NS)]
    assert pods["labelSelector"] == "batch.kubernetes.io/job-name=train"
    (events,) = [r.query for r in fake.recorded("GET") if r.path == EVENTS.list_path(NS)]
    assert events["fieldSelector"] == "type=Warning"
    assert {r.method for r in fake.recorded()} == {"GET"}  # it only reads


@pytest.mark.asyncio
async def test_a_workload_brings_its_owner_job(fake: FakeApiServer, client: KubeClient) -> None:
    wl = obj("job-train-abcde", 7, NS, spec={"queueName": "q", "podSets": []})
    wl["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "train", "uid": "uid-train"}]
    fake.script(("LIST", WORKLOADS.item_path(NS, "job-train-abcde")), json_reply(200, wl))
    fake.script(("LIST", JOBS.item_path(NS, "train")), json_reply(200, JOB))
    _empty_lists(fake)
    state = await fetch_state(client, Target("workload", NS, "job-train-abcde"), now="", request_timeout=5)
    assert state.workload is not None
    assert state.job is not None
    assert state.job.metadata.name == "train"


@pytest.mark.asyncio
async def test_a_missing_target_is_named(fake: FakeApiServer, client: KubeClient) -> None:
    fake.script(("LIST", JOBS.item_path(NS, "nope")), status_reply(404, "NotFound", "jobs nope not found"))
    with pytest.raises(ExplainError, match=f"^Job {NS}/nope not found$"):
        await fetch_state(client, Target("job", NS, "nope"), now="", request_timeout=5)


@pytest.mark.asyncio
async def test_a_failing_list_fails_the_whole_read(fake: FakeApiServer, client: KubeClient) -> None:
    fake.script(("LIST", JOBS.item_path(NS, "train")), json_reply(200, JOB))
    _empty_lists(fake)
    fake.fallback(("LIST", RESOURCE_FLAVORS.list_path()), status_reply(500, "InternalError", "etcd down"))
    with pytest.raises(ServerError, match="etcd down"):
        await fetch_state(client, Target("job", NS, "train"), now="", request_timeout=5)


@pytest.mark.asyncio
async def test_cohort_objects_are_read(fake: FakeApiServer, client: KubeClient) -> None:
    """Hierarchical cohorts: the Cohort objects are listed like the queues (their quota counts)."""
    fake.script(("LIST", JOBS.item_path(NS, "train")), json_reply(200, JOB))
    _empty_lists(fake)
    org = obj("org", 3, "", spec={"resourceGroups": []})
    research = obj("research", 4, "", spec={"parentName": "org"})
    fake.script(("LIST", COHORTS.list_path()), page([org, research], 5))
    state = await fetch_state(client, Target("job", NS, "train"), now="", request_timeout=5)
    assert [(c.metadata.name, c.spec.parent_name) for c in state.cohorts] == [
        ("org", None),
        ("research", "org"),
    ]
    assert state.unreadable == []


@pytest.mark.asyncio
async def test_unreadable_cohorts_are_named(fake: FakeApiServer, client: KubeClient) -> None:
    fake.script(("LIST", JOBS.item_path(NS, "train")), json_reply(200, JOB))
    _empty_lists(fake)
    fake.script(("LIST", COHORTS.list_path()), status_reply(403, "Forbidden", "no"))
    state = await fetch_state(client, Target("job", NS, "train"), now="", request_timeout=5)
    assert state.cohorts == []
    assert state.unreadable == ["Cohorts (forbidden)"]
