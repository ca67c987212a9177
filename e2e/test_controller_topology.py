"""Topology-aware scheduling of batch/v1 Jobs on the test-bed, as Kueue v0.18.1 does it: this
controller reads the `Topology`, the Nodes and the pods bound to them, admits a Job's Workload
with a `topologyAssignment`, starts the Job with Kueue's scheduling gate `kueue.x-k8s.io/topology`
in its pod template, and releases each pod the job controller makes with the node selector of its
domain; the real kube-scheduler places the pods within those node selectors, their GPU claims
allocated by DRA, and the node simulator runs them.

Its own test-bed: two racks of two nodes, rack r1 with two GPUs on each node, rack r2 with one.
A Job of four one-GPU pods with `kueue.x-k8s.io/podset-required-topology: rack` runs all four in
r1 (r2 publishes only two GPUs: the free devices per node are counted from the ResourceSlices,
with `deviceInventory` on); a second such Job waits with Kueue's message, though quota is left,
until r1 frees, then runs there too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio

from e2e.support.served import Served, own_bed, start_controller, stop_controller
from e2e.support.topology_bed import GATE, HOSTNAME, POOL, RACK, SPEC, tas_queues
from e2e.support.workloads import KUEUE
from e2e.testbed import KubeClient, Testbed, api_path
from e2e.testbed.clusters import Cluster
from e2e.testbed.names import RUN_SECONDS_ANNOTATION
from e2e.testbed.scenario import status_condition, wait_for

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(300)]

Obj = dict[str, Any]


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    yield from own_bed(tmp_path_factory, "topology", SPEC)


@pytest.fixture
def cluster(bed: Testbed) -> Cluster:
    """This module's test-bed (the `kube` and `namespace` fixtures use it)."""
    return Cluster(kubeconfig=bed.kubeconfig, target="testbed", testbed=bed)


@pytest.fixture(scope="module")
def controller(bed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`reconciler run` for batch/v1 Jobs with the device inventory on (Report), no webhooks (the
    Jobs are made suspended)."""
    extra = {"deviceInventory": {"mode": "Report"}}
    folder = tmp_path_factory.mktemp("controller-topology")
    served = start_controller(bed.kubeconfig, folder, ["batch/job"], webhooks=False, extra=extra)
    yield served
    stop_controller(served)


@pytest_asyncio.fixture
async def queues(controller: Served, kube: KubeClient, namespace: str) -> AsyncIterator[str]:
    """Topology `rack -> hostname`, a TAS flavor on the pool's nodes, a ClusterQueue with 8 GPUs
    (quota enough for both Jobs: only the topology makes the second wait), LocalQueue `lq`."""
    async with tas_queues(kube, namespace, gpus=8) as ready:
        yield ready


def rack_job(name: str, namespace: str, seconds: int) -> Obj:
    """Four one-GPU pods (Indexed), all in one rack, each running `seconds`; made suspended."""
    annotations = {"kueue.x-k8s.io/podset-required-topology": RACK, RUN_SECONDS_ANNOTATION: str(seconds)}
    resources = {"requests": {"cpu": "100m"}, "claims": [{"name": "gpu"}]}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "suspend": True,
            "parallelism": 4,
            "completions": 4,
            "completionMode": "Indexed",
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 1,
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                    "containers": [{"name": "main", "image": "busybox", "resources": resources}],
                },
            },
        },
    }


async def workload_of(kube: KubeClient, namespace: str, job: str) -> Obj | None:
    workloads: list[Obj] = (await kube.get(api_path(KUEUE, "workloads", namespace)))["items"]
    for workload in workloads:
        if any(r["name"] == job for r in workload["metadata"].get("ownerReferences", [])):
            return workload
    return None


async def running_pods(kube: KubeClient, namespace: str, job: str) -> list[Obj] | None:
    params = {"labelSelector": f"batch.kubernetes.io/job-name={job}"}
    pods = (await kube.get(api_path("v1", "pods", namespace), params=params))["items"]
    up = [p for p in pods if p["status"].get("phase") in ("Running", "Succeeded")]
    return up if len(up) == 4 else None


@pytest.mark.asyncio
async def test_a_required_rack_job_runs_in_one_rack_and_the_next_waits_until_it_frees(
    kube: KubeClient, queues: str
) -> None:
    namespace = queues
    jobs = api_path("batch/v1", "jobs", namespace)
    await kube.create(jobs, rack_job("first", namespace, seconds=8))
    pods = await wait_for(
        "the first Job's four pods to run",
        lambda: running_pods(kube, namespace, "first"),
        within=90,
        interval=0.5,
    )
    # All four in rack r1, two on each node (r2 publishes two GPUs only).
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["tas-n1", "tas-n1", "tas-n2", "tas-n2"]
    for pod in pods:
        assert GATE not in [g["name"] for g in pod["spec"].get("schedulingGates") or []]
        assert pod["spec"]["nodeSelector"] == {**POOL, HOSTNAME: pod["spec"]["nodeName"]}
    template = (await kube.get(api_path("batch/v1", "jobs", namespace, "first")))["spec"]["template"]
    assert [g["name"] for g in template["spec"]["schedulingGates"]] == [GATE]
    workload = await workload_of(kube, namespace, "first")
    assert workload is not None
    assignment = workload["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    assert assignment["levels"] == [HOSTNAME]

    await kube.create(jobs, rack_job("second", namespace, seconds=2))

    async def waiting() -> Obj | None:
        found = await workload_of(kube, namespace, "second")
        reserved = status_condition(found or {}, "QuotaReserved")
        return (
            found if reserved.get("status") == "False" and "topology" in reserved.get("message", "") else None
        )

    second = await wait_for("the second Job to wait for a rack", waiting, within=30, interval=0.5)
    assert status_condition(second, "QuotaReserved")["message"] == (
        f'couldn\'t assign flavors to pod set main: topology "tas-{namespace}" allows to fit only 2 out of 4 '
        'pod(s). Total nodes: 4; excluded: resource "nvidia.com/gpu": 2'
    )
    assert (await kube.get(api_path("batch/v1", "jobs", namespace, "second")))["spec"]["suspend"] is True

    pods = await wait_for(
        "the second Job's four pods to run",
        lambda: running_pods(kube, namespace, "second"),
        within=90,
        interval=0.5,
    )
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["tas-n1", "tas-n1", "tas-n2", "tas-n2"]
    first = (await kube.get(api_path("batch/v1", "jobs", namespace, "first")))["status"]
    assert first.get("succeeded") == 4  # it ran to the end before the second started
