"""TrainJobs on the test-bed with the real Kubeflow Trainer controller (v2.2.1, its CRDs and
webhooks from its Go module, `e2e/build-binaries.sh --trainer`) and the real JobSet v0.12.0
controller, with this controller's TrainJob webhooks (the shipped configurations on loopback,
scoped to the test's namespace).

A ClusterTrainingRuntime whose trainer step's pods ask a GPU each through a ResourceClaimTemplate
(a GPU node pool) and a TrainJob of two nodes naming it: the TrainJob is suspended and given
Kueue's runtime patch at creation, gets one Workload (pod set `node`, 2 pods, 2 GPUs), is
admitted and started through that patch; the trainer makes its JobSet (the TrainJob's child,
never admitted on its own), JobSet makes the Job, whose pods get their claims allocated and run
on the node simulator with the flavor's node labels. A second TrainJob waits with Kueue's message
and is admitted when the first completes and its quota returns.

The session test-bed has one GPU: the first TrainJob's two pods hold 2 GPUs of quota and run one
after the other on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio

from e2e.support.jobset import JobSetProcess, install_jobset_crds, jobset_build, jobset_webhooks
from e2e.support.served import Served, namespace_served, start_controller, stop_controller, workload_where
from e2e.support.trainer import TrainerProcess, install_trainer_crds, trainer_build, trainer_webhooks
from e2e.support.webhooks import (
    register,
    unregister,
)
from e2e.support.workloads import KUEUE
from e2e.testbed import KubeClient, Testbed, api_path
from e2e.testbed.names import RUN_SECONDS_ANNOTATION
from e2e.testbed.scenario import status_condition, wait_for
from reconciler.core.model.workloads import workload_name_for_job

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(300)]

TRAINER_API = "trainer.kubeflow.org/v1alpha1"
OUR_WEBHOOKS = ("mtrainjob.kb.io", "vtrainjob.kb.io")
T4 = {"nvidia.com/gpu.product": "Tesla-T4"}
Obj = dict[str, Any]


@pytest.fixture(scope="module")
def managers(testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrainerProcess]:
    """JobSet's and the trainer's managers with their CRDs and webhooks (JobSet's CRD first: the
    trainer watches JobSets); stopped at the end of the module."""
    jobset, trainer = jobset_build(), trainer_build()
    for build in (jobset, trainer):
        assert not build.missing(), (
            f"{build.name} is not built ({build.missing()}): run e2e/setup.sh --{build.flag}"
        )
    jobset_process = JobSetProcess(jobset, testbed.kubeconfig, tmp_path_factory.mktemp("jobset"))
    trainer_process = TrainerProcess(trainer, testbed.kubeconfig, tmp_path_factory.mktemp("trainer"))

    async def up() -> list[Obj]:
        async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
            await install_jobset_crds(kube, jobset)
            await install_trainer_crds(kube, trainer)
            jobset_process.start()
            trainer_process.start()
            await jobset_process.wait_ready_async()
            await trainer_process.wait_ready_async()
            hooks = jobset_webhooks(jobset, jobset_process.webhook_port, jobset_process.ca_pem)
            hooks += trainer_webhooks(trainer, trainer_process.webhook_port, trainer_process.ca_pem)
            return await register(kube, hooks)

    hooks = asyncio.run(up())
    yield trainer_process

    async def down() -> None:
        async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
            await unregister(kube, hooks)

    asyncio.run(down())
    trainer_code = trainer_process.stop()
    jobset_process.stop()
    assert trainer_code == 0, (
        f"the trainer did not stop cleanly ({trainer_code}):\n{trainer_process.log_tail(30)}"
    )


@pytest.fixture(scope="module")
def controller(
    testbed: Testbed, managers: TrainerProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """`reconciler run` with the trainjob and jobset frameworks on, its webhooks on loopback, GPUs
    charged through DRA."""
    frameworks = ["batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob"]
    served = start_controller(testbed.kubeconfig, tmp_path_factory.mktemp("controller-trainjob"), frameworks)
    yield served
    stop_controller(served)


def runtime(name: str) -> Obj:
    """A ClusterTrainingRuntime: one trainer step (`node`), each pod one GPU from `gpu`."""
    pod = {
        "metadata": {"annotations": {RUN_SECONDS_ANNOTATION: "2"}},
        "spec": {
            "restartPolicy": "Never",
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}],
            "containers": [
                {
                    "name": "node",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": "100m"}, "claims": [{"name": "gpu"}]},
                }
            ],
        },
    }
    node = {
        "name": "node",
        "replicas": 1,
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"backoffLimit": 0, "template": pod},
        },
    }
    return {
        "apiVersion": TRAINER_API,
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name, "labels": {"x": "y"}},
        "spec": {"mlPolicy": {"numNodes": 1}, "template": {"spec": {"replicatedJobs": [node]}}},
    }


@pytest_asyncio.fixture
async def served(controller: Served, kube: KubeClient, namespace: str) -> AsyncIterator[str]:
    """Queues with 2 GPUs, the `gpu` ResourceClaimTemplate, the runtime `gpu-<namespace>`, and
    the shipped TrainJob webhooks registered for this namespace only."""
    async with namespace_served(kube, controller, namespace, OUR_WEBHOOKS, gpus=2, claims=["gpu"]):
        await kube.create(api_path(TRAINER_API, "clustertrainingruntimes"), runtime(f"gpu-{namespace}"))
        try:
            yield namespace
        finally:
            await kube.delete(api_path(TRAINER_API, "clustertrainingruntimes", name=f"gpu-{namespace}"))


async def create_trainjob(
    kube: KubeClient, name: str, namespace: str, nodes: int = 2, patches: list[Obj] | None = None
) -> str:
    """Creates a TrainJob of `nodes` nodes naming the runtime (not suspended: the webhook suspends
    it; `patches`: its own runtime patches); returns its Workload's name."""
    body: Obj = {
        "apiVersion": TRAINER_API,
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "runtimeRef": {"name": f"gpu-{namespace}", "kind": "ClusterTrainingRuntime"},
            "trainer": {"numNodes": nodes},
            "runtimePatches": patches or [],
        },
    }
    created = await kube.create(api_path(TRAINER_API, "trainjobs", namespace), body)
    assert created["spec"]["suspend"] is True
    managers = [p["manager"] for p in created["spec"]["runtimePatches"]]
    assert managers == [*(p["manager"] for p in patches or []), "kueue.x-k8s.io/manager"]
    return workload_name_for_job(name, created["metadata"]["uid"], "TrainJob", "trainer.kubeflow.org")


@pytest.mark.asyncio
async def test_a_trainjob_runs_as_one_workload_and_the_next_waits_for_its_quota(
    served: str, kube: KubeClient
) -> None:
    namespace = served
    first = await create_trainjob(kube, "first", namespace)
    admitted = await workload_where(kube, namespace, first, "Admitted", "True")
    assert [(ps["name"], ps["count"]) for ps in admitted["spec"]["podSets"]] == [("node", 2)]
    (assignment,) = admitted["status"]["admission"]["podSetAssignments"]
    assert assignment["resourceUsage"] == {"cpu": "200m", "nvidia.com/gpu": "2"}

    second = await create_trainjob(kube, "second", namespace)
    pending = await workload_where(kube, namespace, second, "QuotaReserved", "False")
    assert status_condition(pending, "QuotaReserved")["message"] == (
        "couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu "
        f"in flavor t4-{namespace}, 2 more needed"
    )
    assert (await kube.get(api_path(TRAINER_API, "trainjobs", namespace, "second")))["spec"][
        "suspend"
    ] is True

    # The trainer makes the JobSet, JobSet the Job; its two pods run on the GPU node, one at a time.
    async def succeeded_pods() -> list[Obj] | None:
        pods, _ = await kube.list_all(
            api_path("v1", "pods", namespace), {"labelSelector": "jobset.sigs.k8s.io/jobset-name=first"}
        )
        done = [p for p in pods if p["status"].get("phase") == "Succeeded"]
        return done if len(done) == 2 else None

    pods = await wait_for(
        "the first TrainJob's two pods to succeed", succeeded_pods, within=150, interval=0.5
    )
    assert all(p["spec"]["nodeName"] == "gpu-node-1" for p in pods)
    assert all(p["spec"]["nodeSelector"] == T4 for p in pods)
    assert all(p["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "node" for p in pods)
    assert all(p["status"]["resourceClaimStatuses"][0]["name"] == "gpu" for p in pods)
    jobset = await kube.get(api_path("jobset.x-k8s.io/v1alpha2", "jobsets", namespace, "first"))
    assert jobset["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"

    finished = await workload_where(kube, namespace, first, "Finished", "True")
    assert status_condition(finished, "Finished")["reason"] == "Succeeded"
    await workload_where(kube, namespace, second, "Admitted", "True")
    await workload_where(kube, namespace, second, "Finished", "True")
    # Only the TrainJobs have Workloads: their JobSets and Jobs were never admitted on their own.
    workloads, _ = await kube.list_all(api_path(KUEUE, "workloads", namespace))
    owners = sorted(
        (w["metadata"]["ownerReferences"][0]["kind"], w["metadata"]["ownerReferences"][0]["name"])
        for w in workloads
    )
    assert owners == [("TrainJob", "first"), ("TrainJob", "second")]


def kueue_entries(trainjob: Obj) -> list[Obj]:
    """What Kueue's runtime patch holds: one replicated-job entry per started pod set."""
    (kueue,) = [p for p in trainjob["spec"]["runtimePatches"] if p["manager"] == "kueue.x-k8s.io/manager"]
    entries: list[Obj] = kueue["trainingRuntimeSpec"]["template"]["spec"].get("replicatedJobs", [])
    return entries


@pytest.mark.asyncio
async def test_an_evicted_trainjob_is_suspended_and_kueues_patch_emptied(
    served: str, kube: KubeClient
) -> None:
    """The Workload deactivated while the TrainJob runs: evicted, the TrainJob suspended (the
    trainer suspends its JobSet), Kueue's runtime patch emptied once no Job is active (a write the
    trainer's webhook refuses while one is), the quota back. The TrainJob's own runtime patch (its
    pods run until stopped) goes through the real trainer to the pods."""
    namespace = served
    forever = {
        "manager": "example.com/e2e",
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "spec": {
                                    "template": {
                                        "metadata": {"annotations": {RUN_SECONDS_ANNOTATION: "forever"}}
                                    }
                                }
                            },
                        }
                    ]
                }
            }
        },
    }
    path = api_path(TRAINER_API, "trainjobs", namespace, "long")
    name = await create_trainjob(kube, "long", namespace, nodes=1, patches=[forever])
    await workload_where(kube, namespace, name, "Admitted", "True")

    async def started() -> Obj | None:
        # Admission is written first, the TrainJob's unsuspend with Kueue's patch after it.
        current = await kube.get(path)
        return current if current["spec"].get("suspend") is False else None

    unsuspended = await wait_for("the TrainJob unsuspended", started, within=60, interval=0.2)
    assert [e["name"] for e in kueue_entries(unsuspended)] == ["node"]

    async def running() -> bool:
        pods, _ = await kube.list_all(
            api_path("v1", "pods", namespace), {"labelSelector": "jobset.sigs.k8s.io/jobset-name=long"}
        )
        return any(p["status"].get("phase") == "Running" for p in pods)

    await wait_for("the TrainJob's pod to run", running, within=90, interval=0.3)
    await kube.patch(api_path(KUEUE, "workloads", namespace, name), {"spec": {"active": False}})
    evicted = await workload_where(kube, namespace, name, "Evicted", "True")
    assert status_condition(evicted, "Evicted")["reason"] == "Deactivated"

    async def restored() -> Obj | None:
        current = await kube.get(path)
        return current if current["spec"].get("suspend") and not kueue_entries(current) else None

    stopped = await wait_for(
        "the TrainJob suspended with Kueue's patch emptied", restored, within=90, interval=0.3
    )
    assert [p["manager"] for p in stopped["spec"]["runtimePatches"]] == [
        "example.com/e2e",
        "kueue.x-k8s.io/manager",
    ]
    jobset = await kube.get(api_path("jobset.x-k8s.io/v1alpha2", "jobsets", namespace, "long"))
    assert jobset["spec"]["suspend"] is True

    async def released() -> bool:
        cq = await kube.get(api_path(KUEUE, "clusterqueues", name=f"cq-{namespace}"))
        usage = (cq.get("status") or {}).get("flavorsUsage") or []
        return all(r["total"] in ("0", 0) for f in usage for r in f["resources"])

    await wait_for("the quota to be released", released, within=60, interval=0.3)
