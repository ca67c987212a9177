"""Job integration on the test-bed: suspension, completion, and Workloads without a Job."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.support.deploy import ControllerProcess
from e2e.support.queues import drop_queues, make_queues
from e2e.support.workloads import KUEUE
from e2e.testbed import KubeClient, api_path
from e2e.testbed.scenario import status_condition, wait_for
from reconciler.integrations.batchjob import job_workload_name

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(240)]

Obj = dict[str, Any]


def gpu_job(name: str, namespace: str, *, suspend: bool, run_seconds: int) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "suspend": suspend,
            "template": {
                "metadata": {"annotations": {"testbed.dra-quota.dev/run-seconds": str(run_seconds)}},
                "spec": {
                    "restartPolicy": "Never",
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "command": ["true"],
                            "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "gpu"}]},
                        }
                    ],
                },
            },
        },
    }


@pytest.mark.asyncio
async def test_unsuspended_job_is_suspended_then_admitted_and_finishes(
    controller: ControllerProcess, kube: KubeClient, namespace: str
) -> None:
    cq = await make_queues(kube, namespace)
    try:
        # Created without suspend: true. The controller suspends it at once and says why.
        job = await kube.create(
            api_path("batch/v1", "jobs", namespace), gpu_job("eager", namespace, suspend=False, run_seconds=2)
        )
        wl_name = job_workload_name("eager", job["metadata"]["uid"])

        async def suspended_event() -> bool:
            events = (await kube.get(api_path("v1", "events", namespace)))["items"]
            return any(
                e["involvedObject"]["name"] == "eager"
                and e["reason"] == "Suspended"
                and "queue lq" in e["message"]
                for e in events
            )

        await wait_for("an Event saying the Job was suspended", suspended_event)

        async def finished() -> Obj | None:
            wl = await kube.get_or_none(api_path(KUEUE, "workloads", namespace, wl_name))
            return wl if wl and status_condition(wl, "Finished").get("status") == "True" else None

        wl = await wait_for("the Workload to finish", finished, within=90)
        assert status_condition(wl, "Finished")["reason"] == "Succeeded"
        assert wl["status"]["admission"]["clusterQueue"] == cq
        done = await kube.get(api_path("batch/v1", "jobs", namespace, "eager"))
        assert any(c["type"] == "Complete" and c["status"] == "True" for c in done["status"]["conditions"])

        async def released() -> Obj | None:
            status = (await kube.get(api_path(KUEUE, "clusterqueues", name=cq))).get("status", {})
            return status if status.get("admittedWorkloads") == 0 else None

        status = await wait_for("the finished Workload's quota to be released", released)
        usage = {r["name"]: r["total"] for r in status["flavorsUsage"][0]["resources"]}
        assert usage == {"cpu": "0", "nvidia.com/gpu": "0"}
        events = (await kube.get(api_path("v1", "events", namespace)))["items"]
        assert any(  # on the Job, as Kueue records it
            e["involvedObject"]["kind"] == "Job"
            and e["involvedObject"]["name"] == "eager"
            and e["reason"] == "FinishedWorkload"
            and e["message"] == f"Workload '{namespace}/{wl_name}' is declared finished"
            for e in events
        )
    finally:
        await drop_queues(kube, namespace)


@pytest.mark.asyncio
async def test_a_workload_created_directly_is_admitted(
    controller: ControllerProcess, kube: KubeClient, namespace: str
) -> None:
    cq = await make_queues(kube, namespace, gpus=2)
    try:
        await kube.create(
            api_path(KUEUE, "workloads", namespace),
            {
                "apiVersion": KUEUE,
                "kind": "Workload",
                "metadata": {"name": "direct", "namespace": namespace},
                "spec": {
                    "queueName": "lq",
                    "podSets": [
                        {
                            "name": "main",
                            "count": 2,
                            "template": {
                                "spec": {
                                    "resourceClaims": [
                                        {"name": "gpu", "resourceClaimTemplateName": "single-gpu"}
                                    ],
                                    "containers": [
                                        {
                                            "name": "c",
                                            "image": "busybox",
                                            "resources": {
                                                "requests": {"cpu": "500m"},
                                                "claims": [{"name": "gpu"}],
                                            },
                                        }
                                    ],
                                }
                            },
                        }
                    ],
                },
            },
        )

        async def admitted() -> Obj | None:
            wl = await kube.get(api_path(KUEUE, "workloads", namespace, "direct"))
            return wl if status_condition(wl, "Admitted").get("status") == "True" else None

        wl = await wait_for("the Workload to be admitted", admitted)
        (assignment,) = wl["status"]["admission"]["podSetAssignments"]
        assert wl["status"]["admission"]["clusterQueue"] == cq
        assert assignment["count"] == 2
        assert assignment["resourceUsage"] == {"cpu": "1", "nvidia.com/gpu": "2"}
        assert assignment["flavors"] == {"cpu": f"t4-{namespace}", "nvidia.com/gpu": f"t4-{namespace}"}
        await kube.delete(api_path(KUEUE, "workloads", namespace, "direct"))

        async def released() -> bool:
            status = (await kube.get(api_path(KUEUE, "clusterqueues", name=cq))).get("status", {})
            return bool(status.get("admittedWorkloads") == 0)

        await wait_for("the deleted Workload's quota to be released", released)
    finally:
        await drop_queues(kube, namespace)
