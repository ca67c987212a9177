"""What the device tests on their own test-beds share: one-pod GPU Jobs (a claim template's, in
LocalQueue `lq`), a ClusterQueue of one flavor, and `Jobs`, which creates Jobs and waits on their
Workloads' QuotaReserved condition and their claims' allocation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from e2e.support.workloads import KUEUE
from e2e.testbed import KubeClient, api_path
from e2e.testbed.names import RUN_SECONDS_ANNOTATION
from e2e.testbed.scenario import status_condition, wait_for
from reconciler.integrations.batchjob import job_workload_name

__all__ = ["Jobs", "claim_job", "cluster_queue", "job"]

Obj = dict[str, Any]
RESOURCE = "resource.k8s.io/v1"


def job(name: str, namespace: str, *, run_seconds: int) -> Obj:
    """A one-GPU Job (claim template ``single-gpu``) in LocalQueue ``lq``."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "suspend": True,
            "template": {
                "metadata": {"annotations": {RUN_SECONDS_ANNOTATION: str(run_seconds)}},
                "spec": {
                    "restartPolicy": "Never",
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
                    "containers": [
                        {"name": "main", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}
                    ],
                },
            },
        },
    }


def cluster_queue(name: str, resource: str, flavor: str, quota: int, namespace_selector: Obj) -> Obj:
    return {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": namespace_selector,
            "resourceGroups": [
                {
                    "coveredResources": [resource],
                    "flavors": [{"name": flavor, "resources": [{"name": resource, "nominalQuota": quota}]}],
                }
            ],
        },
    }


def claim_job(name: str, namespace: str, template: str, *, run_seconds: int) -> Obj:
    """A Job of one pod whose claim comes from ``template``, in LocalQueue ``lq``."""
    body = job(name, namespace, run_seconds=run_seconds)
    spec = body["spec"]["template"]["spec"]
    spec["resourceClaims"] = [{"name": "dev", "resourceClaimTemplateName": template}]
    spec["containers"][0]["resources"] = {"claims": [{"name": "dev"}]}
    return body


class Jobs:
    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube

    async def create(self, ns: str, name: str, template: str) -> None:
        await self.kube.create(
            api_path("batch/v1", "jobs", ns), claim_job(name, ns, template, run_seconds=600)
        )

    async def reserved(self, ns: str, name: str) -> Obj:
        """Waits for QuotaReserved on the Job's Workload; returns the condition."""

        async def check() -> Obj | None:
            found = await self._condition(ns, name)
            return found if found.get("status") == "True" else None

        return await wait_for(f"{ns}/{name} to be admitted", check, within=90)

    async def waiting(self, ns: str, name: str, words: str) -> Obj:
        async def check() -> Obj | None:
            found = await self._condition(ns, name)
            return found if words in found.get("message", "") else None

        return await wait_for(f"{ns}/{name} to wait with {words!r}", check, within=90)

    async def _condition(self, ns: str, name: str) -> Obj:
        job = await self.kube.get_or_none(api_path("batch/v1", "jobs", ns, name))
        if job is None:
            return {}
        workload = await self.kube.get_or_none(
            api_path(KUEUE, "workloads", ns, job_workload_name(name, job["metadata"]["uid"]))
        )
        return {} if workload is None else status_condition(workload, "QuotaReserved")

    async def allocated(self, ns: str, name: str) -> list[str]:
        """The devices the scheduler allocated to the Job's claim (waits for them)."""

        async def check() -> list[str] | None:
            claims = await self.kube.get(api_path(RESOURCE, "resourceclaims", ns))
            for item in claims.get("items", []):
                if item["metadata"]["name"].startswith(f"{name}-"):
                    results = (
                        item.get("status", {}).get("allocation", {}).get("devices", {}).get("results", [])
                    )
                    if results:
                        return sorted(r["device"] for r in results)
            return None

        return await wait_for(f"the claim of {ns}/{name} to be allocated", check, within=120)


async def pool_queues(kube: KubeClient, ns: str, quotas: Sequence[tuple[str, int | str]]) -> None:
    """Namespace `ns`, a flavor `ns` of the nodes labelled `pool: ns`, ClusterQueue `ns-cq`
    with `quotas` in that flavor, and LocalQueue `lq` pointing at it."""
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    await kube.create(api_path("v1", "namespaces"), namespace)
    flavor = {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": ns}}
    await kube.create(api_path(KUEUE, "resourceflavors"), {**flavor, "spec": {"nodeLabels": {"pool": ns}}})
    cq = cluster_queue(f"{ns}-cq", quotas[0][0], ns, 0, {})
    group = cq["spec"]["resourceGroups"][0]
    group["coveredResources"] = [r for r, _ in quotas]
    group["flavors"][0]["resources"] = [{"name": r, "nominalQuota": q} for r, q in quotas]
    await kube.create(api_path(KUEUE, "clusterqueues"), cq)
    local_queue = {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": ns}}
    await kube.create(
        api_path(KUEUE, "localqueues", ns), {**local_queue, "spec": {"clusterQueue": f"{ns}-cq"}}
    )
