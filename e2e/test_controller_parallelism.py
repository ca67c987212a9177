"""Issue 28 item 1 on the test-bed: raising an admitted Job's parallelism does not bypass quota.

The Job is charged for one pod (1.5 CPU of a 4 CPU quota) and its parallelism raised to 3
(4.5 CPU). As Kueue v0.18.1, the controller stops the Job, deletes the Workload that no longer
matches and creates one for 3 pods, which waits for quota: after that no more pods run than
are charged (without the fix the Job kept running 3 pods on a charge of 1)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from e2e.support.deploy import ControllerProcess
from e2e.support.queues import drop_queues, make_queues
from e2e.support.workloads import KUEUE
from e2e.testbed import KubeClient, api_path
from e2e.testbed.scenario import status_condition, wait_for

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(240)]

Obj = dict[str, Any]


def cpu_job(name: str, namespace: str) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "parallelism": 1,
            "suspend": True,
            "template": {
                "metadata": {"annotations": {"testbed.dra-quota.dev/run-seconds": "forever"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "command": ["sleep", "3600"],
                            "resources": {"requests": {"cpu": "1500m"}},
                        }
                    ],
                },
            },
        },
    }


async def running_pods(kube: KubeClient, namespace: str, job: str) -> int:
    pods = (await kube.get(api_path("v1", "pods", namespace), {"labelSelector": f"job-name={job}"}))["items"]
    return sum(
        1
        for p in pods
        if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    )


async def charged_pods(kube: KubeClient, namespace: str, job: str) -> tuple[int, list[Obj]]:
    """Pods the Job's Workloads hold quota for, and those Workloads."""
    workloads = [
        wl
        for wl in (await kube.get(api_path(KUEUE, "workloads", namespace)))["items"]
        if any(ref["name"] == job for ref in wl["metadata"].get("ownerReferences") or [])
    ]
    charged = sum(
        assignment.get("count", 0)
        for wl in workloads
        if status_condition(wl, "QuotaReserved").get("status") == "True"
        for assignment in wl["status"]["admission"]["podSetAssignments"]
    )
    return charged, workloads


@pytest.mark.asyncio
async def test_raising_parallelism_after_admission_runs_no_more_pods_than_charged(
    controller: ControllerProcess, kube: KubeClient, namespace: str
) -> None:
    await make_queues(kube, namespace)
    try:
        jobs = api_path("batch/v1", "jobs", namespace)
        await kube.create(jobs, cpu_job("grow", namespace))

        async def one_running() -> bool:
            return await running_pods(kube, namespace, "grow") == 1

        await wait_for("the admitted Job's pod to run", one_running, within=90)
        assert (await charged_pods(kube, namespace, "grow"))[0] == 1
        await kube.patch(api_path("batch/v1", "jobs", namespace, "grow"), {"spec": {"parallelism": 3}})

        async def replaced() -> Obj | None:
            charged, workloads = await charged_pods(kube, namespace, "grow")
            job = await kube.get(api_path("batch/v1", "jobs", namespace, "grow"))
            if len(workloads) != 1 or not job["spec"].get("suspend") or charged:
                return None
            (workload,) = workloads
            pending = status_condition(workload, "QuotaReserved")
            counts = [ps["count"] for ps in workload["spec"]["podSets"]]
            return workload if counts == [3] and pending.get("reason") == "Pending" else None

        workload = await wait_for("the Job stopped and a Workload for 3 pods pending", replaced, within=90)
        assert "insufficient quota" in status_condition(workload, "QuotaReserved")["message"]
        # From now on, sampled: no pod runs without its charge.
        for _ in range(10):
            charged, _ = await charged_pods(kube, namespace, "grow")
            assert await running_pods(kube, namespace, "grow") <= charged
            await asyncio.sleep(1)
        events = (await kube.get(api_path("v1", "events", namespace)))["items"]
        reasons = {(e["involvedObject"]["name"], e["reason"]) for e in events}
        assert {("grow", "Stopped"), ("grow", "DeletedWorkload")} <= reasons
        await kube.delete(
            api_path("batch/v1", "jobs", namespace, "grow"), params={"propagationPolicy": "Background"}
        )
    finally:
        await drop_queues(kube, namespace)
