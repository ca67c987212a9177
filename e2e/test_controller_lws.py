"""LeaderWorkerSets on the test-bed with the real LeaderWorkerSet controller (v0.8.0, its CRD and
webhooks from its Go module, `e2e/build-binaries.sh --lws`) and this controller's LWS and pod
webhooks (the shipped configurations on loopback, scoped to the test's namespace).

A set of one group (a leader with a GPU from a ResourceClaimTemplate, one CPU-only worker) gets
one Workload for its group, with a `leader` and a `worker` pod set, owned by the set; the LWS
controller makes the leader's StatefulSet and, from the leader pod, the workers' StatefulSet;
every pod is created held at Kueue's scheduling gate, ungated with its flavor's node labels once
the group is admitted, scheduled by the real kube-scheduler (the leader's claim allocated) and
runs on the node simulator. A second set waits with Kueue's message, its pods gated and
unscheduled; deleting the first gives its quota back and the second is admitted and runs.

The session test-bed has one GPU and the ClusterQueue one GPU of quota: only leaders ask for one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from e2e.support.deploy import ControllerProcess, free_port, install_crds
from e2e.support.lws import LWS_API, LwsProcess, install_lws_crds, lws_build, lws_webhooks
from e2e.support.queues import drop_queues, make_queues
from e2e.support.webhooks import (
    loopback_certificate,
    on_loopback,
    register,
    scoped,
    shipped_configurations,
    unregister,
)
from e2e.support.workloads import KUEUE
from e2e.testbed import KubeClient, Testbed, api_path
from e2e.testbed.names import DEVICE_CLASS_NAME, RUN_SECONDS_ANNOTATION
from e2e.testbed.scenario import single_gpu_claim_spec, status_condition, wait_for
from reconciler.core.model.workloads import workload_name_for_job

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(300)]

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

    async def up() -> list[Obj]:
        async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
            await install_lws_crds(kube, build)
            process.start()
            await process.wait_ready_async()
            return await register(kube, lws_webhooks(build, process.webhook_port, process.ca_pem))

    hooks = asyncio.run(up())
    yield process

    async def down() -> None:
        async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
            await unregister(kube, hooks)

    asyncio.run(down())
    code = process.stop()
    assert code == 0, f"the LWS manager did not stop cleanly (exit {code}):\n{process.log_tail(30)}"


class Served:
    def __init__(self, process: ControllerProcess, ca_pem: bytes) -> None:
        self.process, self.ca_pem = process, ca_pem

    @property
    def port(self) -> int:
        assert self.process.webhook_port is not None
        return self.process.webhook_port


@pytest.fixture(scope="module")
def controller(
    testbed: Testbed, lws_manager: LwsProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """`reconciler run` with the LWS framework on (after the LWS CRD: its watch starts with
    it), its webhooks on loopback with a certificate made here, GPUs charged through DRA."""

    async def install() -> None:
        async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
            await install_crds(kube)

    asyncio.run(install())
    folder: Path = tmp_path_factory.mktemp("controller-lws")
    bundle = loopback_certificate(folder / "certs")
    config = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "internalCertManagement": {"enable": False},
        "integrations": {"frameworks": ["leaderworkerset.x-k8s.io/leaderworkerset"]},
        "resources": {
            "deviceClassMappings": [{"name": "nvidia.com/gpu", "deviceClassNames": [DEVICE_CLASS_NAME]}]
        },
    }
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    process = ControllerProcess(
        folder / "config.yaml",
        testbed.kubeconfig,
        folder / "controller.log",
        "--webhook-cert-dir",
        str(folder / "certs"),
        webhook_port=free_port(),
    )
    process.start()
    process.wait_ready()
    yield Served(process, bundle.ca.cert_pem)
    code = process.stop()
    assert code == 0, f"the controller did not stop cleanly (exit {code}):\n{process.log_tail(30)}"


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
    await make_queues(kube, namespace, gpus=1)
    await kube.create(
        api_path("resource.k8s.io/v1", "resourceclaimtemplates", namespace),
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu", "namespace": namespace},
            "spec": {"spec": single_gpu_claim_spec()},
        },
    )
    shipped = []
    for configuration in shipped_configurations():
        webhooks = [w for w in configuration["webhooks"] if w["name"] in OUR_WEBHOOKS]
        shipped.append({**configuration, "webhooks": webhooks})
    # Named as Kueue's are (kueue-...), they sort before LWS's own: called first, as in a real install.
    hooks = scoped(
        on_loopback(shipped, controller.port, controller.ca_pem), f"kueue-{namespace}", namespace, ("x", "y")
    )
    await register(kube, hooks)

    async def marked() -> bool:
        created = await kube.request(
            "POST",
            api_path(LWS_API, "leaderworkersets", namespace),
            params={"dryRun": "All"},
            body=leader_worker_set("probe", namespace),
        )
        template = created["spec"]["leaderWorkerTemplate"]["workerTemplate"]
        return SUSPENDING_PARENT in (template["metadata"].get("annotations") or {})

    try:
        await wait_for("the LWS webhook to mark pod templates", marked, within=60, interval=0.5)
        yield namespace
    finally:
        await unregister(kube, hooks)
        await drop_queues(kube, namespace)


async def create_lws(kube: KubeClient, name: str, namespace: str) -> str:
    """Creates the set; returns its group 0's Workload name (Kueue's: a job `<set>-0`)."""
    created = await kube.create(
        api_path(LWS_API, "leaderworkersets", namespace), leader_worker_set(name, namespace)
    )
    uid = created["metadata"]["uid"]
    return workload_name_for_job(f"{name}-0", uid, "LeaderWorkerSet", "leaderworkerset.x-k8s.io")


async def workload_where(kube: KubeClient, namespace: str, name: str, kind: str, status: str) -> Obj:
    async def probe() -> Obj | None:
        workload = await kube.get_or_none(api_path(KUEUE, "workloads", namespace, name))
        if workload is None or status_condition(workload, kind).get("status") != status:
            return None
        return workload

    found: Obj = await wait_for(f"Workload {name}: {kind}={status}", probe, within=120, interval=0.3)
    return found


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


@pytest.mark.asyncio
async def test_a_group_is_admitted_and_runs_and_the_next_set_waits_for_its_quota(
    kube: KubeClient, served: str
) -> None:
    namespace = served
    first = await create_lws(kube, "first", namespace)
    admitted = await workload_where(kube, namespace, first, "Admitted", "True")
    assert [(ps["name"], ps["count"]) for ps in admitted["spec"]["podSets"]] == [("leader", 1), ("worker", 1)]
    usage = {a["name"]: a["resourceUsage"] for a in admitted["status"]["admission"]["podSetAssignments"]}
    assert usage == {"leader": {"cpu": "100m", "nvidia.com/gpu": "1"}, "worker": {"cpu": "100m"}}
    owner = admitted["metadata"]["ownerReferences"][0]  # then the group's pods, as Kueue's pod groups
    assert (owner["kind"], owner["name"], owner.get("controller")) == ("LeaderWorkerSet", "first", None)

    # The LWS controller's pods: created gated, ungated with the flavor's node labels, scheduled.
    leader, worker = await running_group(kube, namespace, "first")
    assert (leader["metadata"]["name"], worker["metadata"]["name"]) == ("first-0", "first-0-1")
    for pod in (leader, worker):
        assert not pod["spec"].get("schedulingGates")
        assert pod["spec"]["nodeSelector"] == T4
        assert pod["spec"]["nodeName"] == "gpu-node-1"
        assert pod["metadata"]["labels"]["kueue.x-k8s.io/prebuilt-workload-name"] == first
    assert leader["status"]["resourceClaimStatuses"][0]["name"] == "gpu"
    assert leader["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "leader"
    # Kueue's pod-group rule: the group's pods own its Workload too, next to the set.
    owners = (await kube.get(api_path(KUEUE, "workloads", namespace, first)))["metadata"]["ownerReferences"]
    assert {(r["kind"], r["name"], r["uid"]) for r in owners[1:]} == {
        ("Pod", p["metadata"]["name"], p["metadata"]["uid"]) for p in (leader, worker)
    }
    assert worker["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "worker"

    second = await create_lws(kube, "second", namespace)
    pending = await workload_where(kube, namespace, second, "QuotaReserved", "False")
    assert status_condition(pending, "QuotaReserved")["message"] == (
        "couldn't assign flavors to pod set leader: insufficient unused quota for nvidia.com/gpu "
        f"in flavor t4-{namespace}, 1 more needed"
    )

    # The second set's pods exist, held at the gate: the scheduler reports them gated, no node.
    async def held() -> list[Obj] | None:
        pods = await group_pods(kube, namespace, "second")
        gated = [p for p in pods if status_condition(p, "PodScheduled").get("reason") == "SchedulingGated"]
        return gated if len(gated) == 2 else None

    waiting = await wait_for("the second set's pods to be held", held, within=60, interval=0.5)
    for pod in waiting:
        assert [g["name"] for g in pod["spec"]["schedulingGates"]] == [GATE, TOPOLOGY_GATE]
        assert not pod["spec"].get("nodeName")

    # Deleting the first set: its Workload goes with it, its quota and GPU come back.
    await kube.delete(api_path(LWS_API, "leaderworkersets", namespace, "first"))
    await workload_where(kube, namespace, second, "Admitted", "True")
    leader, worker = await running_group(kube, namespace, "second")
    assert leader["spec"]["nodeSelector"] == worker["spec"]["nodeSelector"] == T4
    assert leader["status"]["resourceClaimStatuses"][0]["name"] == "gpu"

    # Its quota came back when its set went; the Workload itself goes once it is let go of
    # (garbage collection of an object whose owner is gone takes its own time under load).
    async def first_gone() -> bool:
        return await kube.get_or_none(api_path(KUEUE, "workloads", namespace, first)) is None

    await wait_for("the first set's Workload to be gone", first_gone, within=60, interval=0.5)


@pytest.mark.asyncio
async def test_a_second_group_waits_runs_when_the_first_is_evicted_and_goes_on_a_scale_down(
    kube: KubeClient, served: str
) -> None:
    """Scaled to two groups, the second group's Workload waits for the first's GPU; the first's
    Workload deactivated: evicted, its running pods deleted (the LWS controller makes them again,
    held at the gate), its quota to the second group, whose pods run. Scaled back to one group:
    the second group's Workload is deleted."""
    namespace = served
    path = api_path(LWS_API, "leaderworkersets", namespace, "scaled")
    group0 = await create_lws(kube, "scaled", namespace)
    uid = (await kube.get(path))["metadata"]["uid"]
    group1 = workload_name_for_job("scaled-1", uid, "LeaderWorkerSet", "leaderworkerset.x-k8s.io")
    await workload_where(kube, namespace, group0, "Admitted", "True")
    await running_group(kube, namespace, "scaled")

    await kube.patch(path, {"spec": {"replicas": 2}})
    pending = await workload_where(kube, namespace, group1, "QuotaReserved", "False")
    assert pending["metadata"]["annotations"]["kueue.x-k8s.io/component-workload-index"] == "1"
    assert status_condition(pending, "QuotaReserved")["message"] == (
        "couldn't assign flavors to pod set leader: insufficient unused quota for nvidia.com/gpu "
        f"in flavor t4-{namespace}, 1 more needed"
    )

    await kube.patch(api_path(KUEUE, "workloads", namespace, group0), {"spec": {"active": False}})
    evicted = await workload_where(kube, namespace, group0, "Evicted", "True")
    assert status_condition(evicted, "Evicted")["reason"] == "Deactivated"
    await workload_where(kube, namespace, group1, "Admitted", "True")

    async def swapped() -> list[Obj] | None:
        pods = await group_pods(kube, namespace, "scaled")
        by_group: dict[str, list[Obj]] = {}
        for pod in pods:
            by_group.setdefault(
                pod["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-index"], []
            ).append(pod)
        first, second = by_group.get("0", []), by_group.get("1", [])
        held = len(first) == 2 and all(
            GATE in [g["name"] for g in p["spec"].get("schedulingGates") or []] for p in first
        )
        running = len(second) == 2 and all(p["status"].get("phase") == "Running" for p in second)
        return pods if held and running else None

    await wait_for("group 0 held again and group 1 running", swapped, within=120, interval=0.5)

    await kube.patch(path, {"spec": {"replicas": 1}})

    async def deleted() -> bool:
        return await kube.get_or_none(api_path(KUEUE, "workloads", namespace, group1)) is None

    await wait_for("group 1's Workload to be deleted", deleted, within=60, interval=0.5)
    remaining = await kube.get(api_path(KUEUE, "workloads", namespace, group0))
    assert remaining["spec"]["active"] is False


@pytest.mark.asyncio
async def test_a_group_recreated_by_the_lws_controller_runs_again_on_its_admission(
    kube: KubeClient, served: str
) -> None:
    """A worker of a running group deleted: the LWS controller recreates the whole group (its
    default restart policy), the new pods come held at the gate, and the group's Workload, still
    admitted, has them ungated and running again, with no second Workload."""
    namespace = served
    name = await create_lws(kube, "restarted", namespace)
    await workload_where(kube, namespace, name, "Admitted", "True")
    before = await running_group(kube, namespace, "restarted")
    await kube.delete(api_path("v1", "pods", namespace, "restarted-0-1"))

    async def replaced() -> list[Obj] | None:
        pods = await group_pods(kube, namespace, "restarted", "Running")
        old = {p["metadata"]["uid"] for p in before}
        fresh = [p for p in pods if p["metadata"]["uid"] not in old]
        return fresh if len(fresh) == 2 else None

    fresh = await wait_for("the recreated group to run", replaced, within=120, interval=0.5)
    assert sorted(p["metadata"]["name"] for p in fresh) == ["restarted-0", "restarted-0-1"]
    assert all(p["spec"]["nodeSelector"] == T4 for p in fresh)
    workloads, _ = await kube.list_all(api_path(KUEUE, "workloads", namespace))
    assert [w["metadata"]["name"] for w in workloads] == [name]
    assert status_condition(workloads[0], "Admitted")["status"] == "True"


@pytest.mark.asyncio
async def test_a_set_without_a_leader_template_is_one_main_pod_set(kube: KubeClient, served: str) -> None:
    """Without a leader template the LWS controller makes the leader from the worker template:
    the group's Workload has one `main` pod set of the group's size, and every pod runs with it."""
    namespace = served
    body = leader_worker_set("plain", namespace)
    template = body["spec"]["leaderWorkerTemplate"]
    del template["leaderTemplate"]
    template["workerTemplate"] = pod_template(gpu=False)
    created = await kube.create(api_path(LWS_API, "leaderworkersets", namespace), body)
    name = workload_name_for_job(
        "plain-0", created["metadata"]["uid"], "LeaderWorkerSet", "leaderworkerset.x-k8s.io"
    )
    admitted = await workload_where(kube, namespace, name, "Admitted", "True")
    assert [(ps["name"], ps["count"]) for ps in admitted["spec"]["podSets"]] == [("main", 2)]
    (assignment,) = admitted["status"]["admission"]["podSetAssignments"]
    assert assignment["resourceUsage"] == {"cpu": "200m"}
    pods = await running_group(kube, namespace, "plain")
    assert [p["metadata"]["labels"]["kueue.x-k8s.io/podset"] for p in pods] == ["main", "main"]
    assert all(p["spec"]["nodeSelector"] == T4 for p in pods)


@pytest.mark.asyncio
async def test_a_rolling_update_with_a_surge_queues_the_surge_group_until_the_rollout_is_over(
    kube: KubeClient, served: str
) -> None:
    """A CPU-only set of two groups rolled to a new image with `maxSurge: 1`, `maxUnavailable: 0`:
    the LWS controller adds a surge group (index 2), which gets a Workload of its own (as
    Kueue's), is admitted and runs; the LWS controller then remakes groups 0 and 1 at the new
    revision, ungated under their Workloads, and drops the surge group, whose Workload is
    deleted: two Workloads remain and the groups run the new image."""
    namespace = served
    body = leader_worker_set("rolled", namespace)
    template = body["spec"]["leaderWorkerTemplate"]
    template["leaderTemplate"] = pod_template(gpu=False)
    body["spec"]["replicas"] = 2
    body["spec"]["rolloutStrategy"] = {
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": {"maxSurge": 1, "maxUnavailable": 0},
    }
    path = api_path(LWS_API, "leaderworkersets", namespace, "rolled")
    created = await kube.create(api_path(LWS_API, "leaderworkersets", namespace), body)
    uid = created["metadata"]["uid"]
    group0 = workload_name_for_job("rolled-0", uid, "LeaderWorkerSet", "leaderworkerset.x-k8s.io")
    group2 = workload_name_for_job("rolled-2", uid, "LeaderWorkerSet", "leaderworkerset.x-k8s.io")
    first = await workload_where(kube, namespace, group0, "Admitted", "True")

    async def running(count: int) -> list[Obj] | None:
        pods = await group_pods(kube, namespace, "rolled", "Running")
        return pods if len(pods) == count else None

    await wait_for("both groups to run", lambda: running(4), within=120, interval=0.5)

    image = "busybox:1.36"
    for role in ("leaderTemplate", "workerTemplate"):
        template[role]["spec"]["containers"][0]["image"] = image
    await kube.patch(path, {"spec": {"leaderWorkerTemplate": template}})

    surge = await workload_where(kube, namespace, group2, "Admitted", "True")
    assert surge["metadata"]["annotations"]["kueue.x-k8s.io/component-workload-index"] == "2"

    async def rolled() -> list[Obj] | None:
        pods = await group_pods(kube, namespace, "rolled", "Running")
        new = [p for p in pods if p["spec"]["containers"][0]["image"] == image]
        return new if len(pods) == len(new) == 4 else None

    pods = await wait_for("both groups to run the new image", rolled, within=180, interval=1.0)
    assert sorted(p["metadata"]["name"] for p in pods) == ["rolled-0", "rolled-0-1", "rolled-1", "rolled-1-1"]

    async def surge_gone() -> bool:
        return await kube.get_or_none(api_path(KUEUE, "workloads", namespace, group2)) is None

    await wait_for("the surge group's Workload to be deleted", surge_gone, within=60, interval=0.5)
    workloads, _ = await kube.list_all(api_path(KUEUE, "workloads", namespace))
    mine = [w for w in workloads if w["metadata"]["ownerReferences"][0]["name"] == "rolled"]
    assert len(mine) == 2
    assert all(status_condition(w, "Admitted")["status"] == "True" for w in mine)
    # Kueue's pod group rule: a new image is no new Workload (group 0's kept its quota throughout).
    kept = next(w for w in mine if w["metadata"]["name"] == group0)
    assert kept["metadata"]["uid"] == first["metadata"]["uid"]
    await kube.delete(path)
