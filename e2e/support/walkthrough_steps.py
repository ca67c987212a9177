"""The walkthrough, items 1 to 6, as steps against a running controller (whatever runs it).

The manifests are applied verbatim from examples/walkthrough (the seed's own
copies). Used by e2e/test_controller_walkthrough.py (the controller as a child
process with the admin kubeconfig), e2e/test_deploy.py (as the manifests'
ServiceAccount) and e2e/test_prometheus.py (scraped by Prometheus while job B
waits). The steps assert what a user would check; a failing step fails the test.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from e2e.support.deploy import ROOT, apply_manifests
from e2e.support.workloads import KUEUE
from e2e.testbed import KubeClient, api_path
from e2e.testbed.kubeclient import ApiError
from e2e.testbed.scenario import status_condition, wait_for
from reconciler.integrations.batchjob import job_workload_name

EXAMPLES = ROOT / "examples" / "walkthrough"
NS = "p3-dra-demo"
PENDING_MESSAGE = (
    "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
    "in flavor p3-t4, 1 more needed"
)
Obj = dict[str, Any]


async def cleanup_walkthrough(kube: KubeClient) -> None:
    for path in (
        api_path("v1", "namespaces", name=NS),
        api_path(KUEUE, "clusterqueues", name="p3-dra-cq"),
        api_path(KUEUE, "resourceflavors", name="p3-t4"),
    ):
        try:
            await kube.delete(path)
        except ApiError as err:
            if err.status != 404:
                raise

    async def gone() -> bool:
        return await kube.get_or_none(api_path("v1", "namespaces", name=NS)) is None

    await wait_for("the walkthrough namespace to be deleted", gone, within=90)

    # The running controller releases their in-use finalizers once nothing uses them; wait, so
    # the next walkthrough never applies to a ClusterQueue or flavor that is about to go.
    async def queues_gone() -> bool:
        for path in (
            api_path(KUEUE, "clusterqueues", name="p3-dra-cq"),
            api_path(KUEUE, "resourceflavors", name="p3-t4"),
        ):
            if await kube.get_or_none(path) is not None:
                return False
        return True

    await wait_for("the walkthrough's ClusterQueue and flavor to be deleted", queues_gone, within=60)


async def _workload_of(kube: KubeClient, job_name: str) -> Obj | None:
    job = await kube.get_or_none(api_path("batch/v1", "jobs", NS, job_name))
    if job is None:
        return None
    name = job_workload_name(job_name, job["metadata"]["uid"])
    return await kube.get_or_none(api_path(KUEUE, "workloads", NS, name))


async def walkthrough_items_1_to_6(
    kube: KubeClient, while_b_waits: Callable[[], Awaitable[None]] | None = None
) -> None:
    """Items 1 to 6 against a running controller; `while_b_waits` runs once job A is
    admitted and running and job B waits for quota (before job A is deleted)."""
    await apply_manifests(
        kube,
        EXAMPLES / "10-queues.yaml",
        EXAMPLES / "20-resourceclaimtemplate.yaml",
        EXAMPLES / "30-job-running-a.yaml",
    )
    # The simulated pod of job A keeps running for the whole scenario.
    jobs = api_path("batch/v1", "jobs", NS)

    # 1. Job A is admitted, unsuspended and runs on the flavor's nodes with its claim allocated.
    async def a_running() -> Obj | None:
        job = await kube.get_or_none(f"{jobs}/kueue-dra-running-a")
        return job if job and job.get("status", {}).get("ready", 0) >= 1 else None

    job_a = await wait_for("job A to run", a_running)
    assert job_a["spec"]["suspend"] is False
    assert job_a["spec"]["template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "Tesla-T4"}
    pods = (await kube.get(api_path("v1", "pods", NS), {"labelSelector": "job-name=kueue-dra-running-a"}))[
        "items"
    ]
    assert len(pods) == 1
    assert pods[0]["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "Tesla-T4"}
    assert pods[0]["spec"]["nodeName"] == "gpu-node-1"
    claim_name = pods[0]["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    claim = await kube.get(api_path("resource.k8s.io/v1", "resourceclaims", NS, claim_name))
    assert claim["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    assert [r["name"] for r in claim["status"]["reservedFor"]] == [pods[0]["metadata"]["name"]]

    # 2. Its Workload, named as Kueue names it, is admitted to p3-dra-cq with the GPU charged to p3-t4.
    wl_a = await _workload_of(kube, "kueue-dra-running-a")
    assert wl_a is not None
    assert re.fullmatch(r"job-kueue-dra-running-a-[0-9a-f]{5}", wl_a["metadata"]["name"])
    admission = wl_a["status"]["admission"]
    assert admission["clusterQueue"] == "p3-dra-cq"
    (assignment,) = admission["podSetAssignments"]
    assert assignment["count"] == 1
    assert assignment["flavors"]["nvidia.com/gpu"] == "p3-t4"
    assert assignment["resourceUsage"]["nvidia.com/gpu"] == "1"
    assert status_condition(wl_a, "QuotaReserved")["status"] == "True"
    assert status_condition(wl_a, "QuotaReserved")["message"] == "Quota reserved in ClusterQueue p3-dra-cq"
    assert status_condition(wl_a, "Admitted")["status"] == "True"
    assert wl_a["metadata"]["ownerReferences"][0]["uid"] == job_a["metadata"]["uid"]
    assert "kueue.x-k8s.io/resource-in-use" in wl_a["metadata"]["finalizers"]

    # 4. Job B stays suspended and its Workload waits with Kueue's exact message.
    await apply_manifests(kube, EXAMPLES / "31-job-pending-b.yaml")

    async def b_waiting() -> Obj | None:
        wl = await _workload_of(kube, "kueue-dra-pending-b")
        return wl if wl and status_condition(wl, "QuotaReserved").get("reason") == "Pending" else None

    wl_b = await wait_for("job B's Workload to wait for quota", b_waiting)
    quota = status_condition(wl_b, "QuotaReserved")
    assert (quota["status"], quota["reason"], quota["message"]) == ("False", "Pending", PENDING_MESSAGE)
    assert wl_b["status"]["resourceRequests"] == [{"name": "main", "resources": {"nvidia.com/gpu": "1"}}]
    assert "admission" not in wl_b["status"]
    job_b = await kube.get(f"{jobs}/kueue-dra-pending-b")
    assert job_b["spec"]["suspend"] is True

    # 3. The ClusterQueue counts A as admitted and B as pending, with the GPU in use.
    async def cq_settled() -> Obj | None:
        cq = await kube.get(api_path(KUEUE, "clusterqueues", name="p3-dra-cq"))
        status = cq.get("status", {})
        ok = status.get("admittedWorkloads") == 1 and status.get("pendingWorkloads") == 1
        return status if ok else None

    cq_status = await wait_for("the ClusterQueue status", cq_settled)
    (usage,) = cq_status["flavorsUsage"]
    assert usage["name"] == "p3-t4"
    assert {r["name"]: r["total"] for r in usage["resources"]}["nvidia.com/gpu"] == "1"
    assert status_condition({"status": cq_status}, "Active")["status"] == "True"

    async def lq_settled() -> Obj | None:
        lq = await kube.get(api_path(KUEUE, "localqueues", NS, "p3-dra-queue"))
        status = lq.get("status", {})
        return status if (status.get("admittedWorkloads"), status.get("pendingWorkloads")) == (1, 1) else None

    lq_status = await wait_for("the LocalQueue status", lq_settled)
    assert status_condition({"status": lq_status}, "Active")["status"] == "True"

    # 5. `kubectl get workload` columns: NAME QUEUE RESERVED IN ADMITTED (FINISHED, AGE).
    table = await _as_table(kube, api_path(KUEUE, "workloads", NS))
    columns = [c["name"] for c in table["columnDefinitions"]]
    assert columns[:5] == ["Name", "Queue", "Reserved in", "Admitted", "Finished"]
    rows = {r["cells"][0]: r["cells"][1:4] for r in table["rows"]}
    assert rows[wl_a["metadata"]["name"]] == ["p3-dra-queue", "p3-dra-cq", "True"]
    assert rows[wl_b["metadata"]["name"]][:1] == ["p3-dra-queue"]
    assert rows[wl_b["metadata"]["name"]][1:] in (["", ""], [None, None])

    # Events a user sees with kubectl describe.
    events = (await kube.get(api_path("v1", "events", NS)))["items"]
    reasons = {(e["involvedObject"]["name"], e["reason"]) for e in events}
    assert ("kueue-dra-running-a", "CreatedWorkload") in reasons
    assert ("kueue-dra-running-a", "Started") in reasons
    assert (wl_a["metadata"]["name"], "QuotaReserved") in reasons
    assert (wl_b["metadata"]["name"], "Pending") in reasons

    if while_b_waits is not None:
        await while_b_waits()

    # 6. Job A goes away: its quota is released and job B is admitted without any manual step.
    await kube.delete(f"{jobs}/kueue-dra-running-a", params={"propagationPolicy": "Background"})

    async def b_running() -> Obj | None:
        job = await kube.get(f"{jobs}/kueue-dra-pending-b")
        return job if not job["spec"]["suspend"] and job.get("status", {}).get("ready", 0) >= 1 else None

    await wait_for("job B to be admitted and run", b_running, within=90)
    admitted_b = await _workload_of(kube, "kueue-dra-pending-b")
    assert admitted_b is not None
    assert admitted_b["status"]["admission"]["clusterQueue"] == "p3-dra-cq"
    assert "resourceRequests" not in admitted_b["status"]

    async def a_workload_gone() -> bool:
        name = wl_a["metadata"]["name"]
        return await kube.get_or_none(api_path(KUEUE, "workloads", NS, name)) is None

    await wait_for("job A's Workload to be garbage-collected (finalizer released)", a_workload_gone)
    cq_status = await wait_for("the ClusterQueue to count only job B", cq_settled_only_b(kube))
    assert cq_status["admittedWorkloads"] == 1


def cq_settled_only_b(kube: KubeClient) -> Callable[[], Awaitable[Obj | None]]:
    async def probe() -> Obj | None:
        cq = await kube.get(api_path(KUEUE, "clusterqueues", name="p3-dra-cq"))
        status = cq.get("status", {})
        return (
            status if status.get("admittedWorkloads") == 1 and status.get("pendingWorkloads") == 0 else None
        )

    return probe


async def _as_table(kube: KubeClient, path: str) -> Obj:
    """What `kubectl get` asks for: the server-side Table with the CRD's printer columns."""
    headers = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
    async with kube.session.get(kube.server + path, headers=headers) as resp:
        assert resp.status == 200, await resp.text()
        table: Obj = await resp.json()
        return table
