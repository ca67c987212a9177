"""A real Kueue v0.18.1 MultiKueue manager over two workers, each running this controller (issue 41).

Three control planes: the manager (a test-bed of its own without nodes) runs Kueue v0.18.1 with
MultiKueue, its ClusterQueue (3 GPUs) guarded by the MultiKueue AdmissionCheck over `worker1`
(the session test-bed) and `worker2` (a second test-bed); each worker has one node with one
Tesla T4 (the fake DRA driver), this controller for batch/v1 Jobs and a ClusterQueue of 1 GPU.
Three GPU Jobs are submitted on the manager one after the other: the first runs on one worker,
the second on the other (the one with a free GPU), the third waits on the manager while its
copies wait on both workers, held by the workers' capacity and not by the manager's quota; once
a GPU is free it is dispatched there. All three finish and the manager mirrors their status.
Sampled throughout: each Job and its pods are on one worker only, the manager's `clusterName`
never changes once set, and no Workload has an Admitted copy on both workers once its Job exists.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio

from e2e.support.deploy import ControllerProcess
from e2e.support.multikueue import Manager, manager_queues, running_manager, worker_controller
from e2e.support.queues import drop_queues, make_queues
from e2e.support.workloads import KUEUE
from e2e.testbed import KubeClient, Testbed, api_path
from e2e.testbed.scenario import gpu_job, status_condition, wait_for
from reconciler.integrations.batchjob import job_workload_name

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(360)]

Obj = dict[str, Any]
WORKERS = ("worker1", "worker2")
CHECK = "multikueue"


@pytest.fixture(scope="module")
def second_bed(testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    """`worker2`: a test-bed of its own (one node, one Tesla T4), started after the session's."""
    with Testbed(run_dir=tmp_path_factory.mktemp("testbed-worker2")) as bed:
        yield bed


@pytest.fixture(scope="module")
def controllers(
    testbed: Testbed, second_bed: Testbed, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, ControllerProcess]]:
    """This controller (batch/v1 Jobs) on each worker."""
    with (
        worker_controller(testbed, tmp_path_factory.mktemp("mk-worker1")) as first,
        worker_controller(second_bed, tmp_path_factory.mktemp("mk-worker2")) as second,
    ):
        yield {"worker1": first, "worker2": second}


@pytest.fixture(scope="module")
def manager(
    testbed: Testbed,
    second_bed: Testbed,
    controllers: dict[str, ControllerProcess],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Manager]:
    """The manager's control plane and Kueue (batch/v1 Jobs), connected to both workers."""
    workers = {"worker1": testbed.kubeconfig, "worker2": second_bed.kubeconfig}
    with running_manager(tmp_path_factory.mktemp("multikueue-two"), workers) as running:
        yield running


@pytest_asyncio.fixture
async def worker2(second_bed: Testbed, namespace: str) -> AsyncIterator[KubeClient]:
    """A client of `worker2`, the test's namespace made there too (deleted after)."""
    async with KubeClient.from_kubeconfig(second_bed.kubeconfig) as kube:
        path = api_path("v1", "namespaces", name=namespace)
        await kube.create(
            api_path("v1", "namespaces"),
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        )
        try:
            yield kube
        finally:
            await kube.delete(path)


def manager_job(name: str, namespace: str, run_seconds: int) -> Obj:
    job = gpu_job(name, namespace, run_seconds=run_seconds, suspend=True, image="busybox")
    job["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "lq"}
    return job


@dataclass
class Sample:
    """One sample of a Workload: the workers holding an Admitted copy, and whether its Job was
    seen on any worker just before."""

    admitted: frozenset[str]
    job_seen: bool


@dataclass
class Samples:
    """What the sampler saw: per Workload name its samples; per Job, the workers where the Job
    and where its pods were seen; per Workload, the manager's `clusterName` values in order."""

    workloads: dict[str, list[Sample]] = field(default_factory=lambda: defaultdict(list))
    jobs: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    pods: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    cluster_names: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    count: int = 0

    def most_admitted_at_once(self, name: str, *, job_seen: bool | None = None) -> int:
        """The most workers seen holding an Admitted copy of `name` in one sample (`job_seen`:
        only the samples where its Job was, or was not, on a worker)."""
        return max(
            (len(s.admitted) for s in self.workloads[name] if job_seen is None or s.job_seen == job_seen),
            default=0,
        )


async def _jobs_and_pods(kube: KubeClient, namespace: str) -> tuple[set[str], set[str]]:
    jobs, _ = await kube.list_all(api_path("batch/v1", "jobs", namespace))
    pods, _ = await kube.list_all(api_path("v1", "pods", namespace))
    owners = {p["metadata"].get("labels", {}).get("batch.kubernetes.io/job-name", "") for p in pods}
    return {j["metadata"]["name"] for j in jobs}, owners - {""}


async def _admitted(kube: KubeClient, namespace: str) -> dict[str, str]:
    """The worker's Admitted Workloads: name to the name of the Job it is for (the manager's
    Workload of Job `x` is named `job-x-<hash>`)."""
    wls, _ = await kube.list_all(api_path(KUEUE, "workloads", namespace))
    return {
        wl["metadata"]["name"]: wl["metadata"]["name"].removeprefix("job-").rsplit("-", 1)[0]
        for wl in wls
        if status_condition(wl, "Admitted").get("status") == "True"
    }


async def sample(
    mk: KubeClient, workers: dict[str, KubeClient], namespace: str, samples: Samples, stop: asyncio.Event
) -> None:
    """Until `stop`, about four times a second: the Jobs and pods of both workers, then (after
    those lists returned) their Admitted Workloads, then the manager's Workloads. Kueue's manager
    deletes the copies it did not choose before it creates the Job on the chosen worker, so a Job
    seen in a sample's first step means those deletions are already visible to its second."""
    while not stop.is_set():
        seen = await asyncio.gather(*(_jobs_and_pods(kube, namespace) for kube in workers.values()))
        admitted = await asyncio.gather(*(_admitted(kube, namespace) for kube in workers.values()))
        jobs_now: set[str] = set()
        for worker, (jobs, owners) in zip(workers, seen, strict=True):
            jobs_now |= jobs
            for job in jobs:
                samples.jobs[job].add(worker)
            for owner in owners:
                samples.pods[owner].add(worker)
        holders: dict[str, set[str]] = defaultdict(set)
        job_of: dict[str, str] = {}
        for worker, names in zip(workers, admitted, strict=True):
            for name, job in names.items():
                holders[name].add(worker)
                job_of[name] = job
        for name, workers_holding in holders.items():
            samples.workloads[name].append(Sample(frozenset(workers_holding), job_of[name] in jobs_now))
        manager_wls, _ = await mk.list_all(api_path(KUEUE, "workloads", namespace))
        for wl in manager_wls:
            cluster = wl.get("status", {}).get("clusterName")
            names_seen = samples.cluster_names[wl["metadata"]["name"]]
            if cluster and (not names_seen or names_seen[-1] != cluster):
                names_seen.append(cluster)
        samples.count += 1
        await asyncio.sleep(0.25)


async def _condition(kube: KubeClient, path: str, kind: str) -> Obj | None:
    obj = await kube.get_or_none(path)
    if obj is None:
        return None
    return obj if status_condition(obj, kind).get("status") == "True" else None


async def _dispatched(mk: KubeClient, path: str) -> str | None:
    """The worker the manager chose for this Workload (`status.clusterName`), once chosen."""
    wl = await mk.get_or_none(path)
    cluster: str | None = (wl or {}).get("status", {}).get("clusterName")
    return cluster


async def _gone(kube: KubeClient, path: str) -> bool:
    return await kube.get_or_none(path) is None


async def _pending_copy(kube: KubeClient, path: str) -> Obj | None:
    """The worker's copy once this controller has said why it waits."""
    wl = await kube.get_or_none(path)
    if wl is None:
        return None
    reserved = status_condition(wl, "QuotaReserved")
    return wl if reserved.get("status") == "False" and reserved.get("message") else None


@dataclass
class Run:
    """The test's clients and what it learnt: each Job's Workload name and chosen worker."""

    mk: KubeClient
    workers: dict[str, KubeClient]
    namespace: str
    names: dict[str, str] = field(default_factory=dict)
    chosen: dict[str, str] = field(default_factory=dict)

    def workload(self, job: str) -> str:
        return api_path(KUEUE, "workloads", self.namespace, self.names[job])

    async def submit(self, job: str, seconds: int) -> None:
        created = await self.mk.create(
            api_path("batch/v1", "jobs", self.namespace), manager_job(job, self.namespace, seconds)
        )
        # Kueue's webhook on the manager hands the Job to MultiKueue.
        assert created["spec"].get("managedBy") == "kueue.x-k8s.io/multikueue"
        self.names[job] = job_workload_name(job, created["metadata"]["uid"])

    async def dispatched(self, job: str) -> str:
        """The worker the manager chose for `job`; its copy there admitted, one GPU charged."""
        path = self.workload(job)
        self.chosen[job] = await wait_for(
            f"the manager to dispatch {job}", lambda: _dispatched(self.mk, path), within=120
        )
        admitted = await wait_for(
            f"{job}'s copy admitted on {self.chosen[job]}",
            lambda: _condition(self.workers[self.chosen[job]], path, "Admitted"),
            within=60,
        )
        (assignment,) = admitted["status"]["admission"]["podSetAssignments"]
        assert assignment["resourceUsage"]["nvidia.com/gpu"] == "1", assignment
        return self.chosen[job]

    async def finished(self, job: str) -> None:
        """The manager's Workload finished (Succeeded, on the chosen worker), its Job Complete."""
        done = await wait_for(
            f"the manager's Workload {job} to finish",
            lambda: _condition(self.mk, self.workload(job), "Finished"),
            within=120,
        )
        assert status_condition(done, "Finished")["reason"] == "Succeeded"
        assert done["status"]["clusterName"] == self.chosen[job]
        complete = await wait_for(
            f"the manager's Job {job} to complete",
            lambda: _condition(self.mk, api_path("batch/v1", "jobs", self.namespace, job), "Complete"),
            within=60,
        )
        assert complete["status"].get("succeeded") == 1


async def _waiting_copy(kube: KubeClient, path: str, worker: str) -> Obj:
    return await wait_for(f"c's copy waiting on {worker}", lambda: _pending_copy(kube, path), within=60)


async def _third_waits(run: Run) -> None:
    """c: the manager's quota has room (reserved there), the workers' have none: a copy waits on
    each worker with this controller's pending message, the manager's check stays Pending."""
    path = run.workload("c")
    for w, client in run.workers.items():
        copy = await _waiting_copy(client, path, w)
        reserved = status_condition(copy, "QuotaReserved")
        assert reserved["reason"] == "Pending", (w, reserved)
        assert reserved["message"] == (
            "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu"
            f" in flavor t4-{run.namespace}, 1 more needed"
        ), (w, reserved)
        assert status_condition(copy, "Admitted").get("status") != "True", w
    held = await run.mk.get(path)
    assert status_condition(held, "QuotaReserved").get("status") == "True"
    assert status_condition(held, "Admitted").get("status") != "True"
    assert not held["status"].get("clusterName")
    assert sorted(held["status"].get("nominatedClusterNames", [])) == list(WORKERS)
    (check,) = [c for c in held["status"]["admissionChecks"] if c["name"] == CHECK]
    assert check["state"] == "Pending", check


@pytest.mark.asyncio
async def test_three_gpu_jobs_over_two_workers_two_run_one_waits_for_a_free_gpu(
    manager: Manager,
    controllers: dict[str, ControllerProcess],
    kube: KubeClient,
    worker2: KubeClient,
    namespace: str,
) -> None:
    workers = {"worker1": kube, "worker2": worker2}
    for client in workers.values():
        await make_queues(client, namespace, gpus=1)
    samples = Samples()
    stop = asyncio.Event()
    try:
        async with KubeClient.from_kubeconfig(manager.bed.kubeconfig) as mk:
            device_class = await kube.get(
                api_path("resource.k8s.io/v1", "deviceclasses", name="gpu.nvidia.com")
            )
            await manager_queues(mk, namespace, device_class, gpus=3)
            run = Run(mk, workers, namespace)
            sampler = asyncio.create_task(sample(mk, workers, namespace, samples, stop))
            try:
                # a on one worker, then b on the other, the one with a free GPU. b runs longer
                # than a, so that a's worker is the first with a free GPU again.
                await run.submit("a", 20)
                await run.dispatched("a")
                await run.submit("b", 30)
                assert await run.dispatched("b") != run.chosen["a"], run.chosen
                await run.submit("c", 8)
                await _third_waits(run)
                await run.finished("a")
                # Then c goes to a's worker and runs there; b and c finish.
                assert await run.dispatched("c") == run.chosen["a"]
                other = run.workers[run.chosen["b"]]
                await wait_for(
                    "c's waiting copy removed from b's worker",
                    lambda: _gone(other, run.workload("c")),
                    within=30,
                )
                await run.finished("b")
                await run.finished("c")
            finally:
                stop.set()
                await sampler
    finally:
        for client in workers.values():
            await drop_queues(client, namespace)

    # Sampled throughout: each Job and its pods on its chosen worker only, the manager's choice
    # never changed; once its Job existed, one Admitted copy of its Workload only.
    assert samples.count > 20, samples.count
    for job, name in run.names.items():
        assert samples.jobs[job] == {run.chosen[job]}, (job, samples.jobs[job])
        assert samples.pods[job] == {run.chosen[job]}, (job, samples.pods[job])
        assert samples.cluster_names[name] == [run.chosen[job]], (job, samples.cluster_names[name])
        assert samples.most_admitted_at_once(name, job_seen=True) == 1, (job, samples.workloads[name])
    # b and c were dispatched while only one worker had a free GPU: admitted there only. (a,
    # sent to both free workers at once, may be admitted on both for a moment: Kueue's manager
    # keeps the first it sees and deletes the other before it creates the Job.)
    for job in ("b", "c"):
        assert samples.most_admitted_at_once(run.names[job]) == 1, (job, samples.workloads[run.names[job]])
    print(
        f"a: at most {samples.most_admitted_at_once(run.names['a'])} worker(s) held an Admitted copy at once"
    )
