"""Topology-aware scheduling of JobSets on the test-bed, as Kueue v0.18.1 does it, with the real
JobSet controller (v0.12.0, its CRD and webhooks) and the real kube-scheduler: each replicated job
is a pod set with its own `kueue.x-k8s.io/podset-required-topology`, placed on its own; the JobSet
starts with Kueue's gate `kueue.x-k8s.io/topology` in each replicated job's pod template, the
JobSet controller makes the Jobs, the job controller their pods (gated), and this controller
releases each pod with the node selector of its domain, ranked by the Job's index within its
replicated job (`jobset.sigs.k8s.io/job-index`) and the pod's completion index.

Its own test-bed: two racks of two nodes, rack r1 with two GPUs on each node, rack r2 with one.
A JobSet of a one-pod `leader` and `workers` of two Jobs of two pods (one GPU each), both
`required: rack`: the leader, placed first, lands in r2 (Kueue's best fit: the rack with the
least free room that holds it), the workers can only fit r1 (r2 publishes two GPUs, counted from
the ResourceSlices with `deviceInventory` on). A second such JobSet waits with Kueue's message,
though quota is left, until r1 frees, then runs there too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import msgspec
import pytest
import pytest_asyncio

from e2e.support.jobset import JobSetProcess, jobset_build
from e2e.support.served import Served, own_bed, start_controller, stop_controller
from e2e.support.topology_bed import GATE, HOSTNAME, POOL, RACK, RACKS, SPEC, tas_queues
from e2e.support.upstream import run_for_module
from e2e.support.workloads import KUEUE
from e2e.testbed import KubeClient, Testbed, api_path
from e2e.testbed.clusters import Cluster
from e2e.testbed.names import RUN_SECONDS_ANNOTATION
from e2e.testbed.scenario import status_condition, wait_for
from reconciler.api import TopologyAssignment
from reconciler.core.topology.assignment import decode_assignment

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(400)]

Obj = dict[str, Any]
JOBSET_API = "jobset.x-k8s.io/v1alpha2"


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    yield from own_bed(tmp_path_factory, "topology-jobset", SPEC)


@pytest.fixture
def cluster(bed: Testbed) -> Cluster:
    """This module's test-bed (the `kube` and `namespace` fixtures use it)."""
    return Cluster(kubeconfig=bed.kubeconfig, target="testbed", testbed=bed)


@pytest.fixture(scope="module")
def jobset_manager(bed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[JobSetProcess]:
    """JobSet's manager with its CRD and webhooks registered on this test-bed."""
    build = jobset_build()
    missing = build.missing()
    assert not missing, f"JobSet {build.version} is not built ({missing}): run e2e/setup.sh --jobset"
    process = JobSetProcess(build, bed.kubeconfig, tmp_path_factory.mktemp("jobset-tas"))
    yield from run_for_module(process, bed.kubeconfig, "JobSet")


@pytest.fixture(scope="module")
def controller(
    bed: Testbed, jobset_manager: JobSetProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """`reconciler run` for Jobs and JobSets with the device inventory on (Report), no webhooks of
    its own (the JobSets are made suspended)."""
    extra = {"deviceInventory": {"mode": "Report"}}
    folder = tmp_path_factory.mktemp("controller-topology-jobset")
    frameworks = ["batch/job", "jobset.x-k8s.io/jobset"]
    served = start_controller(bed.kubeconfig, folder, frameworks, webhooks=False, extra=extra)
    yield served
    stop_controller(served)


@pytest_asyncio.fixture
async def queues(controller: Served, kube: KubeClient, namespace: str) -> AsyncIterator[str]:
    """Topology `rack -> hostname`, a TAS flavor on the pool's nodes, a ClusterQueue with 12 GPUs
    (quota enough for both JobSets: only the topology makes the second wait), LocalQueue `lq`."""
    async with tas_queues(kube, namespace, gpus=12) as ready:
        yield ready


def replicated_job(name: str, replicas: int, pods: int, seconds: int) -> Obj:
    """`replicas` Jobs of `pods` one-GPU pods each, all in one rack, each pod running `seconds`."""
    annotations = {"kueue.x-k8s.io/podset-required-topology": RACK, RUN_SECONDS_ANNOTATION: str(seconds)}
    resources = {"requests": {"cpu": "100m"}, "claims": [{"name": "gpu"}]}
    pod = {
        "metadata": {"annotations": annotations},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
            "containers": [{"name": "main", "image": "busybox", "resources": resources}],
        },
    }
    job = {"parallelism": pods, "completions": pods, "backoffLimit": 0, "template": pod}
    return {"name": name, "replicas": replicas, "template": {"spec": job}}


def rack_jobset(name: str, namespace: str, seconds: int) -> Obj:
    return {
        "apiVersion": JOBSET_API,
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "suspend": True,
            "replicatedJobs": [
                replicated_job("leader", 1, 1, seconds),
                replicated_job("workers", 2, 2, seconds),
            ],
        },
    }


async def workload_of(kube: KubeClient, namespace: str, jobset: str) -> Obj | None:
    workloads: list[Obj] = (await kube.get(api_path(KUEUE, "workloads", namespace)))["items"]
    for workload in workloads:
        if any(r["name"] == jobset for r in workload["metadata"].get("ownerReferences", [])):
            return workload
    return None


async def running_pods(kube: KubeClient, namespace: str, jobset: str) -> list[Obj] | None:
    """The JobSet's five pods once all run (or have run)."""
    params = {"labelSelector": f"jobset.sigs.k8s.io/jobset-name={jobset}"}
    pods = (await kube.get(api_path("v1", "pods", namespace), params=params))["items"]
    up = [p for p in pods if p["status"].get("phase") in ("Running", "Succeeded")]
    return up if len(up) == 5 else None


def by_replicated_job(pods: list[Obj]) -> dict[str, list[Obj]]:
    out: dict[str, list[Obj]] = {}
    for pod in pods:
        out.setdefault(pod["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"], []).append(pod)
    return out


def check_placed(pods: list[Obj]) -> None:
    """Each replicated job's pods in one rack (the workers in r1, the only rack with 4 GPUs, the
    leader in r2), each
    released with its domain's node selector; the workers' Jobs by rank: Job 0 on the first node
    of the assignment's order, Job 1 on the second (the pod's completion index alone would not
    tell Job 0's pods from Job 1's)."""
    groups = by_replicated_job(pods)
    assert sorted(groups) == ["leader", "workers"]
    for members in groups.values():
        assert len({RACKS[p["spec"]["nodeName"]] for p in members}) == 1
    assert sorted(p["spec"]["nodeName"] for p in groups["workers"]) == [
        "tas-n1",
        "tas-n1",
        "tas-n2",
        "tas-n2",
    ]
    # The leader, placed first, in the rack with the least free room that holds it (Kueue's best fit).
    assert RACKS[groups["leader"][0]["spec"]["nodeName"]] == "r2"
    for pod in pods:
        assert GATE not in [g["name"] for g in pod["spec"].get("schedulingGates") or []]
        assert pod["spec"]["nodeSelector"] == {**POOL, HOSTNAME: pod["spec"]["nodeName"]}
    nodes: dict[str, set[str]] = {}
    for pod in groups["workers"]:
        nodes.setdefault(pod["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"], set()).add(
            pod["spec"]["nodeName"]
        )
    assert sorted(nodes) == ["0", "1"]
    assert len(nodes["0"]) == len(nodes["1"]) == 1  # each Job's two pods on one node
    assert nodes["0"] != nodes["1"]


@pytest.mark.asyncio
async def test_each_replicated_job_runs_in_one_rack_and_the_next_jobset_waits_until_it_frees(
    kube: KubeClient, queues: str
) -> None:
    namespace = queues
    jobsets = api_path(JOBSET_API, "jobsets", namespace)
    await kube.create(jobsets, rack_jobset("first", namespace, seconds=10))
    pods = await wait_for(
        "the first JobSet's five pods to run",
        lambda: running_pods(kube, namespace, "first"),
        within=120,
        interval=0.5,
    )
    check_placed(pods)
    started = await kube.get(api_path(JOBSET_API, "jobsets", namespace, "first"))
    for rj in started["spec"]["replicatedJobs"]:
        assert [g["name"] for g in rj["template"]["spec"]["template"]["spec"]["schedulingGates"]] == [GATE]
    workload = await workload_of(kube, namespace, "first")
    assert workload is not None
    assignments = {a["name"]: a for a in workload["status"]["admission"]["podSetAssignments"]}
    assert all(a["topologyAssignment"]["levels"] == [HOSTNAME] for a in assignments.values())
    # Job 0's workers on the assignment's first node (ranks 0 and 1), Job 1's on the second.
    placed = decode_assignment(
        msgspec.convert(assignments["workers"]["topologyAssignment"], TopologyAssignment)
    )
    order = [domain.values[-1] for domain in placed.domains]
    workers = by_replicated_job(pods)["workers"]
    on = {p["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"]: p["spec"]["nodeName"] for p in workers}
    assert [on["0"], on["1"]] == order

    await kube.create(jobsets, rack_jobset("second", namespace, seconds=2))

    async def waiting() -> Obj | None:
        found = await workload_of(kube, namespace, "second")
        reserved = status_condition(found or {}, "QuotaReserved")
        return (
            found if reserved.get("status") == "False" and "topology" in reserved.get("message", "") else None
        )

    second = await wait_for("the second JobSet to wait for a rack", waiting, within=30, interval=0.5)
    # Its leader fits r2's other node; its workers find no free GPU in the four nodes.
    assert status_condition(second, "QuotaReserved")["message"] == (
        f"couldn't assign flavors to pod set workers: topology \"tas-{namespace}\" doesn't allow to fit "
        'any of 4 pod(s). Total nodes: 4; excluded: resource "nvidia.com/gpu": 4'
    )
    assert (await kube.get(api_path(JOBSET_API, "jobsets", namespace, "second")))["spec"]["suspend"] is True

    pods = await wait_for(
        "the second JobSet's five pods to run",
        lambda: running_pods(kube, namespace, "second"),
        within=120,
        interval=0.5,
    )
    check_placed(pods)
