"""The LeaderWorkerSet tests' shared parts (e2e/test_controller_lws.py and
e2e/test_controller_lws_pods_ready.py): the real LeaderWorkerSet manager and this controller with
its LWS and pod webhooks on loopback as module fixtures, the sets they create and what they wait
for."""

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio

from e2e.support.lws import LWS_API, LwsProcess, lws_build
from e2e.support.served import Served, namespace_served, start_controller, stop_controller
from e2e.support.upstream import run_for_module
from e2e.testbed import KubeClient, Testbed, api_path
from e2e.testbed.names import RUN_SECONDS_ANNOTATION
from e2e.testbed.scenario import wait_for
from reconciler.core.model.workloads import workload_name_for_job

Obj = dict[str, Any]
GATE = "kueue.x-k8s.io/admission"
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"  # Kueue's pod webhook sets both
OUR_WEBHOOKS = ("mleaderworkerset.kb.io", "vleaderworkerset.kb.io", "mpod.kb.io", "vpod.kb.io")
SUSPENDING_PARENT = "kueue.x-k8s.io/pod-suspending-parent"
T4 = {"nvidia.com/gpu.product": "Tesla-T4"}


@pytest.fixture(scope="module")
def lws_manager(testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LwsProcess]:
    """LeaderWorkerSet's manager with its CRD and webhooks registered; stopped at the end."""
    build = lws_build()
    missing = build.missing()
    assert not missing, f"LeaderWorkerSet {build.version} is not built ({missing}): run e2e/setup.sh --lws"
    process = LwsProcess(build, testbed.kubeconfig, tmp_path_factory.mktemp("lws"))
    code = yield from run_for_module(process, testbed.kubeconfig, "LeaderWorkerSet")
    assert code == 0, f"the LWS manager did not stop cleanly (exit {code}):\n{process.log_tail(30)}"


@pytest.fixture(scope="module")
def controller(
    testbed: Testbed, lws_manager: LwsProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """`reconciler run` with the LWS framework on (after the LWS CRD: its watch starts with
    it), its webhooks on loopback with a certificate made here, GPUs charged through DRA."""
    frameworks = ["leaderworkerset.x-k8s.io/leaderworkerset"]
    served = start_controller(testbed.kubeconfig, tmp_path_factory.mktemp("controller-lws"), frameworks)
    yield served
    stop_controller(served)


def pod_template(*, gpu: bool) -> Obj:
    """A serving pod (runs until deleted); with a GPU claim from `one-gpu` when `gpu`."""
    resources: Obj = {"requests": {"cpu": "100m"}}
    spec: Obj = {"containers": [{"name": "main", "image": "busybox", "resources": resources}]}
    if gpu:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
        resources["claims"] = [{"name": "gpu"}]
    return {"metadata": {"annotations": {RUN_SECONDS_ANNOTATION: "forever"}}, "spec": spec}


def leader_worker_set(name: str, namespace: str) -> Obj:
    return {
        "apiVersion": LWS_API,
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": 2,
                "leaderTemplate": pod_template(gpu=True),
                "workerTemplate": pod_template(gpu=False),
            },
        },
    }


@pytest_asyncio.fixture
async def served(controller: Served, kube: KubeClient, namespace: str) -> AsyncIterator[str]:
    """Queues with 1 GPU, a one-GPU ResourceClaimTemplate, and the shipped LWS and pod webhooks
    registered for this namespace only; waits until the API server calls them."""

    async def marked() -> bool:
        created = await kube.request(
            "POST",
            api_path(LWS_API, "leaderworkersets", namespace),
            params={"dryRun": "All"},
            body=leader_worker_set("probe", namespace),
        )
        template = created["spec"]["leaderWorkerTemplate"]["workerTemplate"]
        return SUSPENDING_PARENT in (template["metadata"].get("annotations") or {})

    ready = ("the LWS webhook to mark pod templates", marked)
    async with namespace_served(kube, controller, namespace, OUR_WEBHOOKS, gpus=1, ready=ready):
        yield namespace


async def create_lws(kube: KubeClient, name: str, namespace: str) -> str:
    """Creates the set; returns its group 0's Workload name (Kueue's: a job `<set>-0`)."""
    created = await kube.create(
        api_path(LWS_API, "leaderworkersets", namespace), leader_worker_set(name, namespace)
    )
    uid = created["metadata"]["uid"]
    return workload_name_for_job(f"{name}-0", uid, "LeaderWorkerSet", "leaderworkerset.x-k8s.io")


async def group_pods(kube: KubeClient, namespace: str, name: str, phase: str | None = None) -> list[Obj]:
    pods, _ = await kube.list_all(
        api_path("v1", "pods", namespace), {"labelSelector": f"leaderworkerset.sigs.k8s.io/name={name}"}
    )
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    return [p for p in live if phase is None or p["status"].get("phase") == phase]


async def running_group(kube: KubeClient, namespace: str, name: str) -> list[Obj]:
    """Until both pods of the set's one group run; returns them, leader first."""

    async def both() -> list[Obj] | None:
        pods = await group_pods(kube, namespace, name, "Running")
        return sorted(pods, key=lambda p: p["metadata"]["name"]) if len(pods) == 2 else None

    found: list[Obj] = await wait_for(f"both pods of {name} to run", both, within=120, interval=0.5)
    return found
