"""A managed parent's child cannot be changed to run more than its parent was charged for
(beyond Kueue v0.18.1, whose webhooks guard the parent only): a JobSet's Job raised from
parallelism 1 to 3 while the JobSet's Workload is admitted is refused, naming the field."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from reconciler.admission.queue_rules import JobPolicy
from reconciler.admission.review import AdmissionRequest, GroupVersionResource
from reconciler.api import ObjectMeta
from reconciler.core.model.workloads import workload_name_for_job
from reconciler.webhook.handlers import handle, routes
from tests.support.builders import job_body
from tests.support.rays import raycluster_body

ON = JobPolicy(
    frameworks=frozenset({"batch/job", "jobset.x-k8s.io/jobset"}),
    job_kinds=frozenset({("jobset.x-k8s.io/v1alpha2", "JobSet"), ("batch/v1", "Job")}),
)
ROUTE = next(r for r in routes() if r.path == "/validate-batch-v1-job")
JS_WORKLOAD = workload_name_for_job("js", "js-uid", "JobSet", "jobset.x-k8s.io")


class Lookups:
    def __init__(
        self, *, parent_labels: dict[str, str] | None, admitted: set[str], broken: bool = False
    ) -> None:
        self.parent_labels, self.admitted, self.broken = parent_labels, admitted, broken
        self.asked: list[str] = []

    async def default_local_queue_exists(self, namespace: str) -> bool:
        return False

    async def namespace_labels(self, namespace: str) -> dict[str, str]:
        raise AssertionError("not asked by this webhook")

    async def object_meta(self, api_version: str, kind: str, namespace: str, name: str) -> ObjectMeta | None:
        self.asked.append(f"{kind} {namespace}/{name}")
        if self.parent_labels is None:
            return None
        return ObjectMeta(name=name, namespace=namespace, uid="js-uid", labels=self.parent_labels)

    async def workload_admitted(self, namespace: str, name: str) -> bool:
        self.asked.append(f"Workload {namespace}/{name}")
        if self.broken:
            raise TimeoutError("no answer from the API server within 3s")
        return name in self.admitted


def child(parallelism: int, *, owned: bool = True) -> dict[str, Any]:
    body = job_body("js-workers-0", queue=None, parallelism=parallelism, completions=None)
    if owned:
        body["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "name": "js",
                "uid": "js-uid",
                "controller": True,
            }
        ]
    return body


def _update(new: dict[str, Any], old: dict[str, Any]) -> AdmissionRequest:
    return AdmissionRequest(
        uid="u",
        resource=GroupVersionResource("batch", "v1", "jobs"),
        operation="UPDATE",
        namespace="ns",
        object=msgspec.Raw(msgspec.json.encode(new)),
        old_object=msgspec.Raw(msgspec.json.encode(old)),
    )


QUEUED = {"kueue.x-k8s.io/queue-name": "lq"}


@pytest.mark.asyncio
async def test_raising_a_child_of_an_admitted_parent_is_refused_naming_the_field() -> None:
    lookups = Lookups(parent_labels=QUEUED, admitted={JS_WORKLOAD})
    verdict = await handle(ROUTE, _update(child(3), child(1)), ON, lookups)
    assert not verdict.allowed
    (error,) = verdict.errors
    assert error.field == "spec.parallelism"
    assert str(error).startswith(
        "spec.parallelism: Forbidden: would run 3 pods where 1 ran: its parent JobSet ns/js"
    )
    assert JS_WORKLOAD in str(error)
    assert lookups.asked == ["JobSet ns/js", f"Workload ns/{JS_WORKLOAD}"]


@pytest.mark.asyncio
async def test_other_changes_to_children_pass() -> None:
    admitted = {JS_WORKLOAD}
    # Lowered, or unchanged: allowed without asking.
    for new, old in ((child(1), child(3)), (child(2), child(2))):
        lookups = Lookups(parent_labels=QUEUED, admitted=admitted)
        assert (await handle(ROUTE, _update(new, old), ON, lookups)).allowed
        assert lookups.asked == []
    # The parent not admitted (its child is suspended until it is; the parent's next admission
    # charges the parent as it is then), unmanaged, or gone: allowed.
    for lookups in (
        Lookups(parent_labels=QUEUED, admitted=set()),
        Lookups(parent_labels={}, admitted=admitted),
        Lookups(parent_labels=None, admitted=admitted),
    ):
        assert (await handle(ROUTE, _update(child(3), child(1)), ON, lookups)).allowed
    # A Job of its own is its own Workload's (the controller replaces a Workload it no longer matches).
    lookups = Lookups(parent_labels=QUEUED, admitted=admitted)
    assert (await handle(ROUTE, _update(child(3, owned=False), child(1, owned=False)), ON, lookups)).allowed
    assert lookups.asked == []


@pytest.mark.asyncio
async def test_a_parent_that_cannot_be_looked_up_fails_the_request() -> None:
    lookups = Lookups(parent_labels=QUEUED, admitted=set(), broken=True)
    verdict = await handle(ROUTE, _update(child(3), child(1)), ON, lookups)
    assert not verdict.allowed
    assert verdict.code == 500
    assert verdict.message.startswith("cannot tell whether the parent of ns/js-workers-0 is admitted")


RAY_ON = JobPolicy(
    frameworks=frozenset({"ray.io/rayjob", "ray.io/raycluster"}),
    job_kinds=frozenset({("ray.io/v1", "RayJob"), ("ray.io/v1", "RayCluster")}),
)
CLUSTER_ROUTE = next(r for r in routes() if r.path == "/validate-ray-io-v1-raycluster")
RAYJOB_WORKLOAD = workload_name_for_job("js", "js-uid", "RayJob", "ray.io")


def ray_child(workers: int) -> dict[str, Any]:
    """The RayCluster a RayJob named `js` made (no queue label of its own)."""
    body = raycluster_body("js-raycluster", [("gpu-workers", workers, "gpu-b")], queue=None, suspend=None)
    body["metadata"]["ownerReferences"] = [
        {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "js", "uid": "js-uid", "controller": True}
    ]
    return body


def _cluster_update(new: dict[str, Any], old: dict[str, Any]) -> AdmissionRequest:
    return AdmissionRequest(
        uid="u",
        resource=GroupVersionResource("ray.io", "v1", "rayclusters"),
        operation="UPDATE",
        namespace="ns",
        object=msgspec.Raw(msgspec.json.encode(new)),
        old_object=msgspec.Raw(msgspec.json.encode(old)),
    )


@pytest.mark.asyncio
async def test_a_rayjobs_cluster_given_more_workers_while_admitted_is_refused() -> None:
    lookups = Lookups(parent_labels=QUEUED, admitted={RAYJOB_WORKLOAD})
    verdict = await handle(CLUSTER_ROUTE, _cluster_update(ray_child(4), ray_child(2)), RAY_ON, lookups)
    assert not verdict.allowed
    (error,) = verdict.errors
    assert error.field == "spec.workerGroupSpecs"
    # The head and 4 workers where the head and 2 ran.
    assert str(error).startswith(
        "spec.workerGroupSpecs: Forbidden: would run 5 pods where 3 ran: its parent RayJob ns/js"
    )
    assert lookups.asked == ["RayJob ns/js", f"Workload ns/{RAYJOB_WORKLOAD}"]
    # Not admitted yet: allowed (its next admission charges the RayJob as it is then).
    lookups = Lookups(parent_labels=QUEUED, admitted=set())
    assert (await handle(CLUSTER_ROUTE, _cluster_update(ray_child(4), ray_child(2)), RAY_ON, lookups)).allowed
