"""The device inventory on the test-bed: admission that waits for devices, and quota over devices.

The session test-bed's node ``gpu-node-1`` publishes one Tesla T4. Here a flavor of those nodes
has a quota of 4 GPUs: with ``deviceInventory.mode: Enforce`` the first GPU Job is admitted,
the second waits with the inventory message until the first ends and frees its device, and the
ClusterQueue shows ``DevicesCoverQuota=False`` (``QuotaExceedsDevices``). A mapping to a
DeviceClass that does not exist gives a Warning Event and the condition on the ClusterQueue
covering its resource. On a test-bed of its own, the fake driver's MIG-like partitions and extra
DeviceClasses (one selecting by memory capacity) are counted per class; on another, a Job asking
for all GPUs of a node (allocationMode All) and one charged by partition memory are admitted with
the charge the published devices decide, and a second of each waits for quota.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import yaml
from prometheus_client.parser import text_string_to_metric_families

from e2e.support.deploy import ControllerProcess, install_crds
from e2e.support.device_jobs import claim_job, cluster_queue, job
from e2e.support.faults import own_testbed
from e2e.support.workloads import KUEUE
from e2e.testbed import KubeClient, Testbed, api_path
from e2e.testbed.kubeclient import ApiError
from e2e.testbed.scenario import single_gpu_claim_template, status_condition, wait_for
from e2e.testbed.spec import DeviceClassSpec, GpuSpec, NodeSpec, PartitionSpec, TestbedSpec
from reconciler.integrations.batchjob import job_workload_name

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


class Scene:
    """Cluster-scoped objects made for one test, removed afterwards."""

    def __init__(self, kube: KubeClient, namespace: str) -> None:
        self.kube, self.namespace = kube, namespace
        self.cluster_paths: list[str] = []

    async def cluster_object(self, plural: str, body: Obj) -> None:
        await self.kube.create(api_path(KUEUE, plural), body)
        self.cluster_paths.append(api_path(KUEUE, plural, name=body["metadata"]["name"]))

    async def flavor(self, name: str, labels: dict[str, str]) -> str:
        body = {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name}}
        await self.cluster_object("resourceflavors", {**body, "spec": {"nodeLabels": labels}})
        return name

    async def condition(self, job_name: str, kind: str) -> Obj:
        try:
            created = await self.kube.get(api_path("batch/v1", "jobs", self.namespace, job_name))
            name = job_workload_name(job_name, created["metadata"]["uid"])
            return status_condition(
                await self.kube.get(api_path(KUEUE, "workloads", self.namespace, name)), kind
            )
        except ApiError as err:
            if err.status == 404:  # not created yet
                return {}
            raise

    async def cleanup(self) -> None:
        for path in reversed(self.cluster_paths):
            await self.kube.delete(path)


def series(metric: str, /, **labels: str) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{metric}{{{inner}}}"


async def scrape(process: ControllerProcess) -> dict[str, float]:
    """Sample (name with its labels sorted by name) -> value, from the controller's /metrics."""
    url = f"http://127.0.0.1:{process.metrics_port}/metrics"
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(timeout=timeout) as session, session.get(url) as resp:
        assert resp.status == 200
        text = await resp.text()
    return {
        series(s.name, **s.labels): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
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
    flavor = await scene.flavor(f"t4-{ns}", {"nvidia.com/gpu.product": "Tesla-T4"})
    cq = f"cq-{ns}"
    only_here = {"matchLabels": {"kubernetes.io/metadata.name": ns}}
    await scene.cluster_object("clusterqueues", cluster_queue(cq, GPU, flavor, 4, only_here))
    local_queue = {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": ns}}
    await kube.create(api_path(KUEUE, "localqueues", ns), {**local_queue, "spec": {"clusterQueue": cq}})
    await kube.create(
        api_path("resource.k8s.io/v1", "resourceclaimtemplates", ns), single_gpu_claim_template(ns)
    )

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
    await kube.create(jobs, job("first", ns, run_seconds=8))

    async def reserved(name: str) -> bool:
        return (await scene.condition(name, "QuotaReserved")).get("status") == "True"

    await wait_for("the first GPU Job to be admitted", lambda: reserved("first"), within=60)
    await kube.create(jobs, job("second", ns, run_seconds=2))

    async def waiting() -> Obj | None:
        found = await scene.condition("second", "QuotaReserved")
        return found if "insufficient devices for" in found.get("message", "") else None

    pending = await wait_for("the second Job to wait for a device", waiting, within=60)
    assert pending["status"] == "False"
    assert pending["reason"] == "Pending"
    assert pending["message"] == (
        "couldn't assign flavors to pod set main: insufficient devices for nvidia.com/gpu in flavor "
        f"{flavor}: DeviceClass gpu.nvidia.com needs 1, 0 available (1 published on the flavor's nodes)"
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
    flavor = await scene.flavor(f"fpga-{ns}", {})
    await scene.cluster_object("clusterqueues", cluster_queue(f"fpga-{ns}", FPGA, flavor, 2, {}))

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


MIG_CLASS = "mig.nvidia.com"
MIG_SELECTOR = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"
BIG_CLASS = "big-memory.nvidia.com"
BIG_SELECTOR = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('20Gi')) >= 0"


@pytest.mark.timeout(240)
@pytest.mark.asyncio
async def test_partitions_and_classes_published_by_the_fake_driver_are_counted_per_class(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Its own test-bed: one A100 node with 2 GPUs of 2 partitions each, and two more classes."""
    spec = TestbedSpec(
        nodes=[
            NodeSpec(
                name="a100-node",
                labels={"pool": "a100"},
                gpus=GpuSpec(
                    count=2, model="A100-SXM4-40GB", partitions=[PartitionSpec(profile="1g.5gb", count=2)]
                ),
            )
        ],
        device_classes=[
            DeviceClassSpec(name=MIG_CLASS, selector=MIG_SELECTOR),
            DeviceClassSpec(name=BIG_CLASS, selector=BIG_SELECTOR),
        ],
    )
    config = {
        **CONFIGURATION,
        "resources": {
            "deviceClassMappings": [
                {"name": GPU, "deviceClassNames": ["gpu.nvidia.com"]},
                {"name": "nvidia.com/mig-1g.5gb", "deviceClassNames": [MIG_CLASS]},
                {"name": "example.com/big-gpu", "deviceClassNames": [BIG_CLASS]},
            ]
        },
        "deviceInventory": {"mode": "Report"},
    }
    run_dir = tmp_path_factory.mktemp("testbed-inventory")
    path = run_dir / "configuration.yaml"
    path.write_text(yaml.safe_dump(config))
    async with own_testbed(run_dir / "bed", spec) as bed, KubeClient.from_kubeconfig(bed.kubeconfig) as kube:
        await install_crds(kube)
        flavor = {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "a100"}}
        await kube.create(
            api_path(KUEUE, "resourceflavors"), {**flavor, "spec": {"nodeLabels": {"pool": "a100"}}}
        )
        await kube.create(
            api_path(KUEUE, "clusterqueues"), cluster_queue("mig-cq", "nvidia.com/mig-1g.5gb", "a100", 8, {})
        )
        controller = ControllerProcess(path, bed.kubeconfig, run_dir / "controller.log")
        await asyncio.to_thread(controller.start)
        try:

            async def counted() -> dict[str, float] | None:
                samples = await scrape(controller)
                key = series(
                    "dra_quota_flavor_devices", flavor="a100", device_class=MIG_CLASS, state="published"
                )
                return samples if samples.get(key) == 4 else None

            samples = await wait_for("the partitions to be counted", counted, within=90)

            def published(cls: str) -> float:
                key = series("dra_quota_flavor_devices", flavor="a100", device_class=cls, state="published")
                return samples[key]

            # Whole GPUs only in the driver's class; partitions only in theirs; 40Gi GPUs are "big".
            assert (published("gpu.nvidia.com"), published(MIG_CLASS), published(BIG_CLASS)) == (2, 4, 2)
            found = await wait_for(
                "the ClusterQueue's condition",
                lambda: cq_condition(kube, "mig-cq", "DevicesCoverQuota"),
                within=30,
            )
            assert (found["status"], found["reason"]) == ("False", "QuotaExceedsDevices")
            assert "nominal quota 8 nvidia.com/mig-1g.5gb exceeds the 4 device(s)" in found["message"]
        finally:
            code = await asyncio.to_thread(controller.stop)
        assert code == 0, controller.log_tail(30)


GPU_MEMORY = "nvidia.com/gpu-memory"
MIG = "nvidia.com/mig"


def claim_template(name: str, namespace: str, exactly: Obj) -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [{"name": "dev", "exactly": exactly}]}}},
    }


@pytest.mark.timeout(300)
@pytest.mark.asyncio
async def test_all_devices_and_gpu_memory_are_charged_from_the_published_devices(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Its own test-bed: one A100 node with 2 GPUs, each split into a 5Gi and a 10Gi partition.

    A Job asking for all GPUs (allocationMode All) is charged 2 nvidia.com/gpu and really gets
    both; with a quota of 3 a second one waits. A Job asking for one partition is charged the
    largest partition memory (10Gi of nvidia.com/gpu-memory); with 15Gi a second one waits."""
    spec = TestbedSpec(
        nodes=[
            NodeSpec(
                name="a100-node",
                labels={"pool": "a100"},
                gpus=GpuSpec(
                    count=2,
                    model="A100-SXM4-40GB",
                    partitions=[
                        PartitionSpec(profile="1g.5gb", count=1, memory="5Gi"),
                        PartitionSpec(profile="2g.10gb", count=1, memory="10Gi"),
                    ],
                ),
            )
        ],
        device_classes=[DeviceClassSpec(name=MIG_CLASS, selector=MIG_SELECTOR)],
    )
    config = {
        **CONFIGURATION,
        "resources": {
            "deviceClassMappings": [
                {"name": GPU, "deviceClassNames": ["gpu.nvidia.com"]},
                {
                    "name": MIG,
                    "deviceClassNames": [MIG_CLASS],
                    "capacity": [{"name": "memory", "resource": GPU_MEMORY}],
                },
            ]
        },
        "deviceInventory": {"mode": "Report"},
    }
    run_dir = tmp_path_factory.mktemp("testbed-all-devices")
    path = run_dir / "configuration.yaml"
    path.write_text(yaml.safe_dump(config))
    ns = "devices"
    async with own_testbed(run_dir / "bed", spec) as bed, KubeClient.from_kubeconfig(bed.kubeconfig) as kube:
        await install_crds(kube)
        await kube.create(
            api_path("v1", "namespaces"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        )
        flavor = {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "a100"}}
        await kube.create(
            api_path(KUEUE, "resourceflavors"), {**flavor, "spec": {"nodeLabels": {"pool": "a100"}}}
        )
        quotas = [(GPU, 3), (MIG, 4), (GPU_MEMORY, "15Gi")]
        cq = {
            "apiVersion": KUEUE,
            "kind": "ClusterQueue",
            "metadata": {"name": "devices-cq"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": [r for r, _ in quotas],
                        "flavors": [
                            {"name": "a100", "resources": [{"name": r, "nominalQuota": q} for r, q in quotas]}
                        ],
                    }
                ],
            },
        }
        await kube.create(api_path(KUEUE, "clusterqueues"), cq)
        local_queue = {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": ns}}
        await kube.create(
            api_path(KUEUE, "localqueues", ns), {**local_queue, "spec": {"clusterQueue": "devices-cq"}}
        )
        templates = api_path("resource.k8s.io/v1", "resourceclaimtemplates", ns)
        await kube.create(
            templates,
            claim_template("all-gpus", ns, {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}),
        )
        await kube.create(templates, claim_template("one-partition", ns, {"deviceClassName": MIG_CLASS}))
        controller = ControllerProcess(path, bed.kubeconfig, run_dir / "controller.log")
        await asyncio.to_thread(controller.start)
        try:
            scene = Scene(kube, ns)
            jobs = api_path("batch/v1", "jobs", ns)

            async def workload(job_name: str) -> Obj:
                created = await kube.get(api_path("batch/v1", "jobs", ns, job_name))
                name = job_workload_name(job_name, created["metadata"]["uid"])
                found: Obj = await kube.get(api_path(KUEUE, "workloads", ns, name))
                return found

            async def reserved(name: str) -> Obj | None:
                found = await scene.condition(name, "QuotaReserved")
                return (await workload(name)) if found.get("status") == "True" else None

            async def waiting(name: str, words: str) -> Obj | None:
                found = await scene.condition(name, "QuotaReserved")
                return found if words in found.get("message", "") else None

            # allocationMode All: 2 GPUs on the node, so 2 charged; a quota of 3 leaves 1.
            await kube.create(jobs, claim_job("whole-a", ns, "all-gpus", run_seconds=40))
            admitted = await wait_for("the All Job to be admitted", lambda: reserved("whole-a"), within=90)
            (assignment,) = admitted["status"]["admission"]["podSetAssignments"]
            assert assignment["resourceUsage"] == {GPU: "2"}

            # The annotation is a write of its own, made once the admission has landed.
            async def annotated() -> Obj | None:
                found = await workload("whole-a")
                return (
                    found
                    if "dra-quota-reconciler/device-charges" in found["metadata"].get("annotations", {})
                    else None
                )

            admitted = await wait_for("the device-charges annotation", annotated, within=30)
            assert admitted["metadata"]["annotations"]["dra-quota-reconciler/device-charges"] == (
                "podset main, claim dev, request dev: 2 device(s) of DeviceClass gpu.nvidia.com "
                "(allocationMode All: the most on one node of flavor a100) charged as 2 nvidia.com/gpu"
            )

            # The scheduler really allocates both GPUs to the first Job's claim.
            async def allocated() -> list[Obj] | None:
                claims = await kube.get(api_path("resource.k8s.io/v1", "resourceclaims", ns))
                for item in claims.get("items", []):
                    if not item["metadata"]["name"].startswith("whole-a-"):
                        continue
                    results: list[Obj] = (
                        item.get("status", {}).get("allocation", {}).get("devices", {}).get("results", [])
                    )
                    if results:
                        return results
                return None

            results = await wait_for("the All claim to be allocated", allocated, within=90)
            assert sorted(r["device"] for r in results) == ["gpu-0", "gpu-1"]

            await kube.create(jobs, claim_job("whole-b", ns, "all-gpus", run_seconds=2))
            pending = await wait_for(
                "the second All Job to wait for quota",
                lambda: waiting("whole-b", "insufficient unused quota"),
                within=60,
            )
            assert (pending["status"], pending["reason"]) == ("False", "Pending")
            assert pending["message"] == (
                "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in "
                "flavor a100, 1 more needed"
            )

            # Memory capacity: one partition is charged the largest partition memory, 10Gi.
            await kube.create(jobs, claim_job("part-a", ns, "one-partition", run_seconds=60))
            admitted = await wait_for(
                "the partition Job to be admitted", lambda: reserved("part-a"), within=60
            )
            (assignment,) = admitted["status"]["admission"]["podSetAssignments"]
            assert assignment["resourceUsage"] == {MIG: "1", GPU_MEMORY: "10Gi"}
            await kube.create(jobs, claim_job("part-b", ns, "one-partition", run_seconds=2))
            pending = await wait_for(
                "the second partition Job to wait for memory quota",
                lambda: waiting("part-b", "insufficient unused quota"),
                within=60,
            )
            assert pending["message"] == (
                "couldn't assign flavors to pod set main: insufficient unused quota for "
                "nvidia.com/gpu-memory in flavor a100, 5Gi more needed"
            )
            # The first All Job ends: its 2 GPUs of quota come back and the second is admitted.
            await wait_for("the second All Job to be admitted", lambda: reserved("whole-b"), within=150)
        finally:
            code = await asyncio.to_thread(controller.stop)
        assert code == 0, controller.log_tail(30)
