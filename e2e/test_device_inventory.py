"""The device inventory on the test-bed: admission that waits for devices, and quota over devices.

The session test-bed's node ``gpu-node-1`` publishes one Tesla T4. Here a flavor of those nodes
has a quota of 4 GPUs: with ``deviceInventory.mode: Enforce`` the first GPU Job is admitted,
the second waits with the inventory message until the first ends and frees its device, and the
ClusterQueue shows ``DevicesCoverQuota=False`` (``QuotaExceedsDevices``). A mapping to a
DeviceClass that does not exist gives a Warning Event and the condition on the ClusterQueue
covering its resource.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from e2e.support.deploy import ControllerProcess, install_crds
from e2e.support.workloads import KUEUE
from e2e.test_controller_ha import scrape, series
from e2e.test_controller_scheduling import Scene, cluster_queue, job
from e2e.testbed import KubeClient, Testbed, api_path
from e2e.testbed.scenario import wait_for

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(300)]

Obj = dict[str, Any]
GPU = "nvidia.com/gpu"
MISSING_CLASS = "fpga.example.com"
FPGA = "example.com/fpga"
CONFIGURATION = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
    "kind": "Configuration",
    "resources": {
        "deviceClassMappings": [
            {"name": GPU, "deviceClassNames": ["gpu.nvidia.com"]},
            {"name": FPGA, "deviceClassNames": [MISSING_CLASS]},
        ]
    },
    "deviceInventory": {"mode": "Enforce"},
}


@pytest.fixture(scope="module")
def inventory_controller(
    testbed: Testbed, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControllerProcess]:
    """`reconciler run` in Enforce mode (its own, instead of the walkthrough's controller)."""

    async def install() -> None:
        async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
            await install_crds(kube)

    asyncio.run(install())
    directory = tmp_path_factory.mktemp("inventory")
    config = Path(directory / "configuration.yaml")
    config.write_text(yaml.safe_dump(CONFIGURATION))
    process = ControllerProcess(config, testbed.kubeconfig, directory / "controller.log")
    process.start()
    yield process
    code = process.stop()
    assert code == 0, f"the controller did not stop cleanly (exit {code}):\n{process.log_tail(30)}"


@pytest_asyncio.fixture
async def scene(kube: KubeClient, namespace: str) -> AsyncIterator[Scene]:
    made = Scene(kube, namespace)
    try:
        yield made
    finally:
        await made.cleanup()


async def cq_condition(kube: KubeClient, name: str, kind: str) -> Obj | None:
    cq = await kube.get(api_path(KUEUE, "clusterqueues", name=name))
    for c in cq.get("status", {}).get("conditions", []):
        if c["type"] == kind:
            found: Obj = c
            return found
    return None


@pytest.mark.asyncio
async def test_enforce_admits_only_what_the_published_devices_cover(
    inventory_controller: ControllerProcess, kube: KubeClient, scene: Scene
) -> None:
    ns = scene.namespace
    flavor = await scene.flavor()
    cq = f"cq-{ns}"
    await scene.cluster_object("clusterqueues", cluster_queue(cq, ns, flavor, 4))
    await scene.local_queue("lq", cq)

    async def over_inventory() -> Obj | None:
        found = await cq_condition(kube, cq, "DevicesCoverQuota")
        return found if found is not None and found["status"] == "False" else None

    condition = await wait_for("the ClusterQueue to show quota over devices", over_inventory, within=60)
    assert condition["reason"] == "QuotaExceedsDevices"
    assert condition["message"] == (
        f"flavor {flavor}: nominal quota 4 nvidia.com/gpu exceeds the 1 device(s) of DeviceClass "
        "gpu.nvidia.com published on its nodes"
    )
    jobs = api_path("batch/v1", "jobs", ns)
    await kube.create(jobs, job("first", ns, "lq", run_seconds=8))

    async def reserved(name: str) -> bool:
        return (await scene.condition(name, "QuotaReserved")).get("status") == "True"

    await wait_for("the first GPU Job to be admitted", lambda: reserved("first"), within=60)
    await kube.create(jobs, job("second", ns, "lq", run_seconds=2))

    async def waiting() -> Obj | None:
        found = await scene.condition("second", "QuotaReserved")
        return found if "devices do not cover" in found.get("message", "") else None

    pending = await wait_for("the second Job to wait for a device", waiting, within=60)
    assert pending["status"] == "False"
    assert pending["reason"] == "Pending"
    assert pending["message"] == (
        f"devices do not cover the workload: insufficient devices for nvidia.com/gpu in flavor {flavor}: "
        "DeviceClass gpu.nvidia.com needs 1, 0 available (1 published on the flavor's nodes)"
    )
    samples = await scrape(inventory_controller)
    published = series(
        "dra_quota_flavor_devices", flavor=flavor, device_class="gpu.nvidia.com", state="published"
    )
    assert samples[published] == 1
    over = series("dra_quota_flavor_quota_over_devices", cluster_queue=cq, flavor=flavor, resource=GPU)
    assert samples[over] == 3
    # The first Job ends and its device is deallocated: the second is admitted.
    await wait_for(
        "the second Job to be admitted once the GPU is free", lambda: reserved("second"), within=120
    )
    for name in ("first", "second"):
        await kube.delete(api_path("batch/v1", "jobs", ns, name), params={"propagationPolicy": "Background"})


@pytest.mark.asyncio
async def test_a_mapped_device_class_that_does_not_exist_is_reported(
    inventory_controller: ControllerProcess, kube: KubeClient, scene: Scene
) -> None:
    ns = scene.namespace
    await scene.cluster_object(
        "resourceflavors",
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": f"fpga-{ns}"}, "spec": {}},
    )
    body = {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": f"fpga-{ns}"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": [FPGA],
                    "flavors": [{"name": f"fpga-{ns}", "resources": [{"name": FPGA, "nominalQuota": 2}]}],
                }
            ],
        },
    }
    await scene.cluster_object("clusterqueues", body)

    async def not_found() -> Obj | None:
        found = await cq_condition(kube, f"fpga-{ns}", "DevicesCoverQuota")
        return found if found is not None and found["reason"] == "DeviceClassNotFound" else None

    condition = await wait_for("the ClusterQueue to name the missing DeviceClass", not_found, within=60)
    assert condition["status"] == "False"
    assert condition["message"] == (
        f"DeviceClass {MISSING_CLASS} (mapped to {FPGA} in deviceClassMappings) does not exist"
    )

    async def warning() -> Obj | None:
        events = await kube.get(
            api_path("v1", "events", "default"),
            params={"fieldSelector": f"involvedObject.name=fpga-{ns},reason=DeviceClassNotFound"},
        )
        items: list[Obj] = events.get("items", [])
        return items[0] if items else None

    event = await wait_for("a Warning Event on the ClusterQueue", warning, within=30)
    assert event["type"] == "Warning"
    assert event["involvedObject"]["kind"] == "ClusterQueue"
    assert f"DeviceClass {MISSING_CLASS} is mapped to {FPGA}" in event["message"]
    samples = await scrape(inventory_controller)
    assert (
        samples[
            series("dra_quota_device_class_mapping_problems", device_class=MISSING_CLASS, problem="not_found")
        ]
        == 1
    )
