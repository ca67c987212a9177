"""The RayCluster and RayJob webhooks: suspended at creation with the default LocalQueue, a
RayJob's RayCluster left to its RayJob, and Kueue v0.18.1's rules for managed ray objects (with
its messages), the elastic-job annotation refused by name."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from reconciler.admission.queue_rules import JobPolicy
from reconciler.admission.review import AdmissionRequest, GroupVersionResource, Verdict
from reconciler.api import ObjectMeta
from reconciler.webhook.handlers import handle, routes
from tests.support.rays import raycluster_body, rayjob_body

ON = JobPolicy(
    frameworks=frozenset({"batch/job", "ray.io/rayjob", "ray.io/raycluster"}),
    job_kinds=frozenset({("ray.io/v1", "RayJob"), ("ray.io/v1", "RayCluster"), ("batch/v1", "Job")}),
)


def _route(path: str) -> Any:
    return next(r for r in routes() if r.path == path)


MUTATE_CLUSTER = _route("/mutate-ray-io-v1-raycluster")
VALIDATE_CLUSTER = _route("/validate-ray-io-v1-raycluster")
MUTATE_JOB = _route("/mutate-ray-io-v1-rayjob")
VALIDATE_JOB = _route("/validate-ray-io-v1-rayjob")


class Lookups:
    def __init__(self, *, default_queue: bool = False, owners: dict[str, ObjectMeta] | None = None) -> None:
        self.default_queue = default_queue
        self.owners = owners or {}

    async def default_local_queue_exists(self, namespace: str) -> bool:
        return self.default_queue

    async def namespace_labels(self, namespace: str) -> dict[str, str]:
        raise AssertionError("not asked by these webhooks")

    async def object_meta(self, api_version: str, kind: str, namespace: str, name: str) -> ObjectMeta | None:
        return self.owners.get(f"{kind}/{name}")

    async def workload_admitted(self, namespace: str, name: str) -> bool:
        return False


def _request(body: dict[str, Any], old: dict[str, Any] | None = None) -> AdmissionRequest:
    plural = body["kind"].lower() + "s"
    request = AdmissionRequest(
        uid="u",
        resource=GroupVersionResource("ray.io", "v1", plural),
        operation="CREATE" if old is None else "UPDATE",
        namespace="ns",
        object=msgspec.Raw(msgspec.json.encode(body)),
    )
    if old is not None:
        request.old_object = msgspec.Raw(msgspec.json.encode(old))
    return request


async def _verdict(route: Any, body: dict[str, Any], policy: JobPolicy = ON, **lookups: Any) -> Verdict:
    return await handle(route, _request(body), policy, Lookups(**lookups))


@pytest.mark.asyncio
async def test_queue_named_ray_objects_are_suspended_at_creation_and_get_the_default_queue() -> None:
    suspend = [{"op": "add", "path": "/spec/suspend", "value": True}]
    assert list((await _verdict(MUTATE_CLUSTER, raycluster_body("rc", suspend=None))).patch) == suspend
    assert list((await _verdict(MUTATE_JOB, rayjob_body("rj", suspend=False))).patch) == suspend
    assert list((await _verdict(MUTATE_JOB, rayjob_body("rj", suspend=True))).patch) == []
    unnamed = await _verdict(MUTATE_JOB, rayjob_body("rj", queue=None, suspend=False), default_queue=True)
    assert list(unnamed.patch) == [
        {"op": "add", "path": "/metadata/labels", "value": {"kueue.x-k8s.io/queue-name": "default"}},
        *suspend,
    ]
    # Not enabled: left as they are.
    off = JobPolicy(frameworks=frozenset({"batch/job"}))
    assert list((await _verdict(MUTATE_JOB, rayjob_body("rj", suspend=False), off)).patch) == []


@pytest.mark.asyncio
async def test_the_raycluster_of_a_managed_rayjob_is_not_suspended_nor_queued_at_the_door() -> None:
    body = raycluster_body("rj-raycluster-x", suspend=False)  # KubeRay copies the RayJob's labels
    body["metadata"]["ownerReferences"] = [
        {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "rj", "uid": "u", "controller": True}
    ]
    managed = ObjectMeta(name="rj", namespace="ns", labels={"kueue.x-k8s.io/queue-name": "lq"})
    verdict = await _verdict(MUTATE_CLUSTER, body, owners={"RayJob/rj": managed})
    assert verdict.allowed
    assert list(verdict.patch) == []
    # A RayJob that is not managed leaves its cluster to the rules of any queue-named cluster.
    unmanaged = ObjectMeta(name="rj", namespace="ns")
    verdict = await _verdict(MUTATE_CLUSTER, body, owners={"RayJob/rj": unmanaged})
    assert list(verdict.patch) == [{"op": "add", "path": "/spec/suspend", "value": True}]


@pytest.mark.asyncio
async def test_kueues_rules_for_a_managed_raycluster() -> None:
    body = raycluster_body("rc", [("head", 1, None), *[(f"g{i}", 1, None) for i in range(9)]])
    body["spec"]["enableInTreeAutoscaling"] = True
    verdict = await _verdict(VALIDATE_CLUSTER, body)
    assert not verdict.allowed
    assert verdict.message == (
        "[spec.enableInTreeAutoscaling: Invalid value: true: a kueue managed job can use autoscaling only "
        "when the ElasticJobsViaWorkloadSlices feature gate is on and the job is an elastic job, "
        "spec.workerGroupSpecs: Too many: 10: must have at most 9 items, "
        'spec.workerGroupSpecs[0].groupName: Forbidden: "head" is reserved for the head group]'
    )
    # Without a queue name (and manageJobsWithoutQueueName off) Kueue's ray rules do not apply.
    assert (
        await _verdict(VALIDATE_CLUSTER, raycluster_body("rc", queue=None) | {"spec": body["spec"]})
    ).allowed
    assert (await _verdict(VALIDATE_CLUSTER, raycluster_body("rc"))).allowed


@pytest.mark.asyncio
async def test_kueues_rules_for_a_managed_rayjob() -> None:
    body = rayjob_body("rj")
    body["spec"]["shutdownAfterJobFinishes"] = False
    body["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] = True
    verdict = await _verdict(VALIDATE_JOB, body)
    assert verdict.message == (
        "[spec.shutdownAfterJobFinishes: Invalid value: false: a kueue managed job should delete the "
        "cluster after finishing, spec.rayClusterSpec.enableInTreeAutoscaling: Invalid value: true: a kueue "
        "managed job should only use autoscaling when workload slicing is enabled]"
    )
    both = rayjob_body("rj")
    both["spec"]["clusterSelector"] = {"ray.io/cluster": "shared"}
    verdict = await _verdict(VALIDATE_JOB, both)
    assert verdict.message == (
        'spec.clusterSelector: Invalid value: {"ray.io/cluster":"shared"}: a kueue managed job should not '
        "use an existing cluster"
    )
    del both["spec"]["rayClusterSpec"]
    assert (await _verdict(VALIDATE_JOB, both)).allowed  # on an existing cluster: not Kueue's to manage
    del both["spec"]["clusterSelector"]
    verdict = await _verdict(VALIDATE_JOB, both)
    assert verdict.message == (
        "spec.rayClusterSpec: Required value: rayClusterSpec is required for Kueue-managed jobs that "
        "don't use clusterSelector"
    )


@pytest.mark.asyncio
async def test_the_elastic_job_annotation_is_refused_by_name_and_queue_rules_apply_on_update() -> None:
    body = raycluster_body("rc")
    body["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
    verdict = await _verdict(VALIDATE_CLUSTER, body)
    assert not verdict.allowed
    assert verdict.message.startswith(
        'metadata.annotations[kueue.x-k8s.io/elastic-job]: Invalid value: "true": elastic jobs'
    )
    old, new = rayjob_body("rj", suspend=False), rayjob_body("rj", suspend=False)
    new["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "other"
    verdict = await handle(VALIDATE_JOB, _request(new, old), ON, Lookups())
    assert not verdict.allowed
    assert "field is immutable" in verdict.message
