"""DRA request kinds GPU platforms are adopting, on the test-bed with the real kube-scheduler
(v1.36: DRAExtendedResource and DRAConsumableCapacity beta, on by default).

One test-bed of its own, two flavors:

- ``ext-node``: two T4s; DeviceClass ``ext.nvidia.com`` declares ``extendedResourceName:
  example.com/gpu`` (KEP-5004). With Kueue's gate ``KueueDRAIntegrationExtendedResource`` on, a Job
  whose container limits ask for ``example.com/gpu: 1`` is charged ``nvidia.com/gpu: 1`` through the
  class's mapping; the scheduler makes its claim and allocates a GPU of the node; a second Job
  waits for quota with Kueue's message.
- ``shared-node``: one shared T4 (``allowMultipleAllocations``, capacities ``memory: 16Gi`` and
  ``cores: 100``), class ``hami.example.com``. Two Jobs asking for ``{memory: 8Gi, cores: 50}``
  are each charged both dimensions (``example.com/gpu-memory`` and ``example.com/gpu-cores``), and
  the scheduler puts both on the same card; a third waits for quota.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import yaml

from e2e.support.deploy import ControllerProcess, install_crds
from e2e.support.device_jobs import Jobs, claim_job, job, pool_queues
from e2e.support.faults import own_testbed
from e2e.support.workloads import KUEUE
from e2e.testbed import KubeClient, api_path
from e2e.testbed.scenario import wait_for
from e2e.testbed.spec import DeviceClassSpec, GpuSpec, NodeSpec, TestbedSpec

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(360)]

Obj = dict[str, Any]
RESOURCE = "resource.k8s.io/v1"
GPU, EXT = "nvidia.com/gpu", "example.com/gpu"
VGPU, MEMORY, CORES = "example.com/vgpu", "example.com/gpu-memory", "example.com/gpu-cores"


def _selector(kind: str) -> str:
    return f"device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == '{kind}'"


SPEC = TestbedSpec(
    nodes=[
        NodeSpec(name="ext-node", labels={"pool": "ext"}, gpus=GpuSpec(count=2)),
        NodeSpec(name="shared-node", labels={"pool": "shared"}, gpus=GpuSpec(count=1, shared=True)),
    ],
    device_classes=[
        DeviceClassSpec(name="ext.nvidia.com", selector=_selector("gpu"), extended_resource_name=EXT),
        DeviceClassSpec(name="hami.example.com", selector=_selector("vgpu")),
    ],
)
CONFIGURATION = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
    "kind": "Configuration",
    "featureGates": {"KueueDRAIntegrationExtendedResource": True},
    "resources": {
        "deviceClassMappings": [
            {"name": GPU, "deviceClassNames": ["ext.nvidia.com"]},
            {
                "name": VGPU,
                "deviceClassNames": ["hami.example.com"],
                "capacity": [{"name": "memory", "resource": MEMORY}, {"name": "cores", "resource": CORES}],
            },
        ]
    },
}
QUOTAS: dict[str, list[tuple[str, int | str]]] = {
    "ext": [(GPU, 1)],
    "shared": [(VGPU, 4), (MEMORY, "16Gi"), (CORES, 100)],
}


async def _set_up(kube: KubeClient) -> None:
    await install_crds(kube)
    for ns, quotas in QUOTAS.items():
        await pool_queues(kube, ns, quotas)
    share = {
        "apiVersion": RESOURCE,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "half-card", "namespace": "shared"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "dev",
                            "exactly": {
                                "deviceClassName": "hami.example.com",
                                "capacity": {"requests": {"memory": "8Gi", "cores": "50"}},
                            },
                        }
                    ]
                }
            }
        },
    }
    await kube.create(api_path(RESOURCE, "resourceclaimtemplates", "shared"), share)


def extended_job(name: str) -> Obj:
    """A one-pod Job in `ext` asking for example.com/gpu: 1 in its limits (no claim of its own)."""
    body = job(name, "ext", run_seconds=600)
    spec = body["spec"]["template"]["spec"]
    del spec["resourceClaims"]
    spec["containers"][0]["resources"] = {"limits": {EXT: "1"}}
    return body


async def _admission(kube: KubeClient, ns: str, name: str) -> Obj:
    workloads = (await kube.get(api_path(KUEUE, "workloads", ns)))["items"]
    (found,) = [w for w in workloads if w["metadata"]["ownerReferences"][0]["name"] == name]
    admission: Obj = found["status"]["admission"]
    return admission


async def _claim_results(kube: KubeClient, ns: str, job_name: str) -> list[Obj]:
    async def check() -> list[Obj] | None:
        pods = (await kube.get(api_path("v1", "pods", ns), params={"labelSelector": f"job-name={job_name}"}))[
            "items"
        ]
        claims = (await kube.get(api_path(RESOURCE, "resourceclaims", ns)))["items"]
        owned = {p["metadata"]["uid"] for p in pods}
        for claim in claims:
            owners = {o["uid"] for o in claim["metadata"].get("ownerReferences", [])}
            results = claim.get("status", {}).get("allocation", {}).get("devices", {}).get("results", [])
            if owners & owned and results:
                return list(results)
        return None

    found: list[Obj] = await wait_for(f"the claim of {ns}/{job_name} to be allocated", check, within=120)
    return found


@pytest.mark.asyncio
async def test_extended_resources_and_shared_gpus_are_charged_and_allocated(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    run_dir = tmp_path_factory.mktemp("tb-kinds")
    path = run_dir / "configuration.yaml"
    path.write_text(yaml.safe_dump(CONFIGURATION))
    async with own_testbed(run_dir / "bed", SPEC) as bed, KubeClient.from_kubeconfig(bed.kubeconfig) as kube:
        await _set_up(kube)
        controller = ControllerProcess(path, bed.kubeconfig, run_dir / "controller.log")
        await asyncio.to_thread(controller.start)
        try:
            jobs = Jobs(kube)
            # KEP-5004: the limit is charged through the class's mapping; the scheduler's claim.
            await kube.create(api_path("batch/v1", "jobs", "ext"), extended_job("e1"))
            await jobs.reserved("ext", "e1")
            (assignment,) = (await _admission(kube, "ext", "e1"))["podSetAssignments"]
            assert assignment["resourceUsage"] == {GPU: "1"}
            (result,) = await _claim_results(kube, "ext", "e1")
            assert result["device"] in ("gpu-0", "gpu-1")
            assert result["pool"] == "ext-node"
            await kube.create(api_path("batch/v1", "jobs", "ext"), extended_job("e2"))
            waiting = await jobs.waiting("ext", "e2", "insufficient unused quota")
            assert waiting["message"] == (
                "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
                "in flavor ext, 1 more needed"
            )

            # Consumable capacity: two half cards, charged in both dimensions, on one card.
            for name in ("s1", "s2"):
                body = claim_job(name, "shared", "half-card", run_seconds=600)
                await kube.create(api_path("batch/v1", "jobs", "shared"), body)
                await jobs.reserved("shared", name)
                (assignment,) = (await _admission(kube, "shared", name))["podSetAssignments"]
                assert assignment["resourceUsage"] == {VGPU: "1", MEMORY: "8Gi", CORES: "50"}
            first = await _claim_results(kube, "shared", "s1")
            second = await _claim_results(kube, "shared", "s2")
            assert [(r["pool"], r["device"]) for r in first + second] == [("shared-node", "gpu-0")] * 2
            await kube.create(
                api_path("batch/v1", "jobs", "shared"), claim_job("s3", "shared", "half-card", run_seconds=5)
            )
            waiting = await jobs.waiting("shared", "s3", "insufficient unused quota")
            assert "in flavor shared" in waiting["message"], waiting["message"]
        finally:
            code = await asyncio.to_thread(controller.stop)
        assert code == 0, controller.log_tail(30)
