"""Scheduling beyond first-come on the test-bed: priorities, preemption and borrowing in a cohort."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from e2e.support.deploy import ControllerProcess
from e2e.support.workloads import KUEUE
from e2e.testbed import KubeClient, api_path
from e2e.testbed.kubeclient import ApiError
from e2e.testbed.names import RUN_SECONDS_ANNOTATION
from e2e.testbed.scenario import single_gpu_claim_template, status_condition, wait_for
from reconciler.integrations.batchjob import job_workload_name

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(300)]

Obj = dict[str, Any]


def job(name: str, namespace: str, queue: str, *, run_seconds: int, priority_class: str | None = None) -> Obj:
    labels = {"kueue.x-k8s.io/queue-name": queue}
    if priority_class:
        labels["kueue.x-k8s.io/priority-class"] = priority_class
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "suspend": True,
            "template": {
                "metadata": {"annotations": {RUN_SECONDS_ANNOTATION: str(run_seconds)}},
                "spec": {
                    "restartPolicy": "Never",
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "gpu"}]},
                        }
                    ],
                },
            },
        },
    }


def cluster_queue(name: str, namespace: str, flavor: str, gpus: int, **spec: Any) -> Obj:
    return {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": flavor,
                            "resources": [
                                {"name": "cpu", "nominalQuota": "4"},
                                {"name": "nvidia.com/gpu", "nominalQuota": gpus},
                            ],
                        }
                    ],
                }
            ],
            **spec,
        },
    }


class Scene:
    """Cluster-scoped objects made for one test, removed afterwards."""

    def __init__(self, kube: KubeClient, namespace: str) -> None:
        self.kube, self.namespace = kube, namespace
        self.cluster_paths: list[str] = []

    async def cluster_object(self, plural: str, body: Obj, group: str = KUEUE) -> None:
        await self.kube.create(api_path(group, plural), body)
        self.cluster_paths.append(api_path(group, plural, name=body["metadata"]["name"]))

    async def flavor(self) -> str:
        name = f"t4-{self.namespace}"
        spec = {"nodeLabels": {"nvidia.com/gpu.product": "Tesla-T4"}}
        await self.cluster_object(
            "resourceflavors",
            {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec},
        )
        await self.kube.create(
            api_path("resource.k8s.io/v1", "resourceclaimtemplates", self.namespace),
            single_gpu_claim_template(self.namespace),
        )
        return name

    async def local_queue(self, name: str, cq: str) -> None:
        body = {
            "apiVersion": KUEUE,
            "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {"clusterQueue": cq},
        }
        await self.kube.create(api_path(KUEUE, "localqueues", self.namespace), body)

    async def workload(self, job_name: str) -> Obj:
        created = await self.kube.get(api_path("batch/v1", "jobs", self.namespace, job_name))
        name = job_workload_name(job_name, created["metadata"]["uid"])
        return await self.kube.get(api_path(KUEUE, "workloads", self.namespace, name))

    async def last_seen(self, job_name: str) -> str:
        """The Job's Workload's status (or why there is none), for a failure's message."""
        try:
            found = await self.workload(job_name)
        except ApiError as err:
            return f"not found ({err.status})"
        return repr({"labels": found["metadata"].get("labels"), "status": found.get("status")})

    async def condition(self, job_name: str, kind: str) -> Obj:
        try:
            return status_condition(await self.workload(job_name), kind)
        except ApiError as err:
            if err.status == 404:  # not created yet
                return {}
            raise

    async def cleanup(self) -> None:
        for path in reversed(self.cluster_paths):
            await self.kube.delete(path)


@pytest_asyncio.fixture
async def scene(kube: KubeClient, namespace: str) -> AsyncIterator[Scene]:
    made = Scene(kube, namespace)
    try:
        yield made
    finally:
        await made.cleanup()


@pytest.mark.asyncio
async def test_a_high_priority_job_preempts_a_running_low_one(
    controller: ControllerProcess, kube: KubeClient, scene: Scene
) -> None:
    ns = scene.namespace
    flavor = await scene.flavor()
    preemption = {"preemption": {"withinClusterQueue": "LowerPriority"}}
    await scene.cluster_object("clusterqueues", cluster_queue(f"cq-{ns}", ns, flavor, 1, **preemption))
    await scene.local_queue("lq", f"cq-{ns}")
    for name, value in ((f"low-{ns}", 10), (f"high-{ns}", 1000)):
        await scene.cluster_object(
            "workloadpriorityclasses",
            {
                "apiVersion": KUEUE,
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": name},
                "value": value,
            },
        )
    jobs = api_path("batch/v1", "jobs", ns)
    await kube.create(jobs, job("low", ns, "lq", run_seconds=300, priority_class=f"low-{ns}"))

    async def running(job_name: str) -> bool:
        found = await kube.get(api_path("batch/v1", "jobs", ns, job_name))
        return found["spec"].get("suspend") is False and found.get("status", {}).get("active", 0) > 0

    await wait_for("the low-priority Job to run", lambda: running("low"), within=60)
    assert (await scene.workload("low"))["spec"]["priority"] == 10
    await kube.create(jobs, job("high", ns, "lq", run_seconds=2, priority_class=f"high-{ns}"))

    async def preempted() -> Obj | None:
        evicted = await scene.condition("low", "Evicted")
        return evicted if evicted.get("reason") == "Preempted" else None

    evicted = await wait_for("the low-priority Workload to be preempted", preempted, within=60)
    high = await scene.workload("high")
    assert evicted["message"] == (
        f"Preempted to accommodate a workload (UID: {high['metadata']['uid']}, "
        f"JobUID: {high['metadata']['labels']['kueue.x-k8s.io/job-uid']}) due to prioritization in the "
        f"ClusterQueue; preemptor path: /cq-{ns}; preemptee path: /cq-{ns}"
    )
    preempted_condition = await scene.condition("low", "Preempted")
    assert (preempted_condition["status"], preempted_condition["reason"]) == ("True", "InClusterQueue")
    low_job = await kube.get(api_path("batch/v1", "jobs", ns, "low"))
    assert low_job["spec"]["suspend"] is True  # stopped, its GPU freed

    async def high_finished() -> bool:
        return (await scene.condition("high", "Finished")).get("status") == "True"

    await wait_for("the high-priority Job to be admitted and finish", high_finished, within=90)

    async def low_back() -> bool:
        return (await scene.condition("low", "QuotaReserved")).get("status") == "True"

    await wait_for("the preempted Job to be admitted again once the GPU is free", low_back, within=60)
    for name in ("low", "high"):
        await kube.delete(api_path("batch/v1", "jobs", ns, name), params={"propagationPolicy": "Background"})


@pytest.mark.asyncio
async def test_a_cluster_queue_borrows_an_idle_gpu_from_its_cohort(
    controller: ControllerProcess, kube: KubeClient, scene: Scene
) -> None:
    ns = scene.namespace
    flavor = await scene.flavor()
    cohort = {"cohortName": f"pool-{ns}"}
    await scene.cluster_object("clusterqueues", cluster_queue(f"borrower-{ns}", ns, flavor, 0, **cohort))
    await scene.cluster_object("clusterqueues", cluster_queue(f"lender-{ns}", ns, flavor, 1, **cohort))
    await scene.local_queue("lq", f"borrower-{ns}")
    await kube.create(api_path("batch/v1", "jobs", ns), job("borrowing", ns, "lq", run_seconds=2))

    async def finished() -> bool:
        return (await scene.condition("borrowing", "Finished")).get("status") == "True"

    async def borrowed() -> Obj | None:
        status = (await kube.get(api_path(KUEUE, "clusterqueues", name=f"borrower-{ns}"))).get("status", {})
        for flavor_usage in status.get("flavorsReservation", []):
            for resource in flavor_usage["resources"]:
                if resource["name"] == "nvidia.com/gpu" and resource.get("borrowed") == "1":
                    found: Obj = resource
                    return found
        return None

    seen = await wait_for("the borrower's status to show one borrowed GPU", borrowed, within=60)
    assert seen["total"] == "1"
    admission = (await scene.workload("borrowing"))["status"]["admission"]
    assert admission["clusterQueue"] == f"borrower-{ns}"
    await wait_for("the borrowing Job to run and finish", finished, within=90)


@pytest.mark.asyncio
async def test_a_borrowing_cluster_queue_preempts_a_lower_priority_borrower(
    controller: ControllerProcess, kube: KubeClient, scene: Scene
) -> None:
    """borrowWithinCohort: both queues have no GPU of their own; the high-priority one takes the
    lender's GPU back from the low-priority borrower (InCohortReclaimWhileBorrowing)."""
    ns = scene.namespace
    flavor = await scene.flavor()
    cohort = {"cohortName": f"pool-{ns}"}
    borrow = {
        "preemption": {
            "reclaimWithinCohort": "LowerPriority",
            "borrowWithinCohort": {"policy": "LowerPriority"},
        }
    }
    await scene.cluster_object(
        "clusterqueues", cluster_queue(f"urgent-{ns}", ns, flavor, 0, **cohort, **borrow)
    )
    await scene.cluster_object("clusterqueues", cluster_queue(f"batch-{ns}", ns, flavor, 0, **cohort))
    await scene.cluster_object("clusterqueues", cluster_queue(f"lender-{ns}", ns, flavor, 1, **cohort))
    await scene.local_queue("urgent", f"urgent-{ns}")
    await scene.local_queue("batch", f"batch-{ns}")
    for name, value in ((f"low-{ns}", 10), (f"high-{ns}", 1000)):
        body = {
            "apiVersion": KUEUE,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        await scene.cluster_object("workloadpriorityclasses", body)
    jobs = api_path("batch/v1", "jobs", ns)
    await kube.create(jobs, job("low", ns, "batch", run_seconds=300, priority_class=f"low-{ns}"))

    async def reserved(job_name: str) -> bool:
        return (await scene.condition(job_name, "QuotaReserved")).get("status") == "True"

    await wait_for("the low-priority Job to borrow the GPU", lambda: reserved("low"), within=60)
    await kube.create(jobs, job("high", ns, "urgent", run_seconds=2, priority_class=f"high-{ns}"))

    async def preempted() -> Obj | None:
        found = await scene.condition("low", "Preempted")
        return found if found.get("status") == "True" else None

    condition = await wait_for("the borrower to be preempted", preempted, within=60)
    high = await scene.workload("high")
    assert condition["reason"] == "InCohortReclaimWhileBorrowing"
    assert condition["message"] == (
        f"Preempted to accommodate a workload (UID: {high['metadata']['uid']}, "
        f"JobUID: {high['metadata']['labels']['kueue.x-k8s.io/job-uid']}) due to reclamation within the "
        f"cohort while borrowing; preemptor path: /pool-{ns}/urgent-{ns}; "
        f"preemptee path: /pool-{ns}/batch-{ns}"
    )
    await wait_for("the high-priority Job to be admitted", lambda: reserved("high"), within=60)
    admission = (await scene.workload("high"))["status"]["admission"]
    assert admission["clusterQueue"] == f"urgent-{ns}"
    for name in ("low", "high"):
        await kube.delete(api_path("batch/v1", "jobs", ns, name), params={"propagationPolicy": "Background"})


@pytest.mark.asyncio
async def test_a_cluster_queue_borrows_the_gpu_a_cohort_object_holds(
    controller: ControllerProcess, kube: KubeClient, scene: Scene
) -> None:
    """Hierarchical cohorts: the GPU quota is the parent Cohort's; the ClusterQueue has none."""
    ns = scene.namespace
    flavor = await scene.flavor()
    quota = [{"name": "cpu", "nominalQuota": "4"}, {"name": "nvidia.com/gpu", "nominalQuota": 1}]
    groups = [
        {"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [{"name": flavor, "resources": quota}]}
    ]
    await scene.cluster_object(
        "cohorts",
        {
            "apiVersion": KUEUE,
            "kind": "Cohort",
            "metadata": {"name": f"org-{ns}"},
            "spec": {"resourceGroups": groups},
        },
    )
    await scene.cluster_object(
        "cohorts",
        {
            "apiVersion": KUEUE,
            "kind": "Cohort",
            "metadata": {"name": f"team-{ns}"},
            "spec": {"parentName": f"org-{ns}"},
        },
    )
    await scene.cluster_object(
        "clusterqueues", cluster_queue(f"team-{ns}", ns, flavor, 0, cohortName=f"team-{ns}")
    )
    await scene.local_queue("lq", f"team-{ns}")
    jobs = api_path("batch/v1", "jobs", ns)

    async def condition_is(job_name: str, status: str) -> Obj | None:
        found = await scene.condition(job_name, "QuotaReserved")
        return found if found.get("status") == status else None

    # One after the other: two Workloads created at once reach the queue in either order (CI saw
    # the second one take the GPU, finish within its 2 s and leave it to the first).
    await kube.create(jobs, job("first", ns, "lq", run_seconds=300))
    await wait_for("the first Job to get the Cohort's GPU", lambda: condition_is("first", "True"), within=60)
    await kube.create(jobs, job("second", ns, "lq", run_seconds=2))
    try:
        pending = await wait_for("the second Job to wait", lambda: condition_is("second", "False"), within=60)
    except AssertionError as err:
        raise AssertionError(f"{err}; its Workload as last seen: {await scene.last_seen('second')}") from None
    assert pending["message"].endswith(
        f"insufficient unused quota for nvidia.com/gpu in flavor {flavor}, 1 more needed"
    )
    for name in ("first", "second"):
        await kube.delete(api_path("batch/v1", "jobs", ns, name), params={"propagationPolicy": "Background"})
