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

import pytest

from e2e.support.lws import LWS_API
from e2e.support.lws_cases import (
    GATE,
    T4,
    TOPOLOGY_GATE,
    Obj,
    controller,
    create_lws,
    group_pods,
    leader_worker_set,
    lws_manager,
    pod_template,
    running_group,
    served,
)
from e2e.support.served import workload_where
from e2e.support.workloads import KUEUE
from e2e.testbed import KubeClient, api_path
from e2e.testbed.scenario import status_condition, wait_for
from reconciler.core.model.workloads import workload_name_for_job

__all__ = ["controller", "lws_manager", "served"]  # the module fixtures, shared with the PodsReady module
pytestmark = [pytest.mark.testbed, pytest.mark.timeout(300)]


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
