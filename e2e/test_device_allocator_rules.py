"""The device inventory's allocator rules on the test-bed, with the real kube-scheduler (v1.36:
DRADeviceTaints, partitionable devices and matchAttribute constraints on by default).

One test-bed of its own, ``deviceInventory.mode: Enforce``, these flavors:

- ``taint-node``: two T4s, ``gpu-1`` tainted ``example.com/unhealthy=true:NoSchedule``. One Job
  is admitted and gets ``gpu-0``; a second waits, the condition naming the class, the node, the
  taint and the missing amount; a Job whose claim tolerates the taint is admitted and the
  scheduler gives it ``gpu-1``.
- ``admin`` (the taint node again): a Job whose claim has ``adminAccess: true`` is charged nothing,
  admitted by a ClusterQueue with no GPU quota, and the scheduler gives it ``gpu-0``, held by
  another claim (Kueue v0.18.1 refuses such claims: "AdminAccess is not supported").
- ``mig-node``: one A100 whose three 4-slice partitions share its 8 counter slices (published in
  a second slice of the pool). Two partition Jobs are admitted and allocated; the third waits
  ("do not fit the shared counters") though quota and published devices would allow it.
- ``pool-node``: a pool of two slices the test publishes one at a time: while only one is
  there the pool counts nothing (as the allocator: an incomplete pool), and a Job waits with
  ``0 published``; with the second, it is admitted and the scheduler allocates a GPU of the pool.
- ``pcie-node``: two GPUs on PCIe roots ``pci-0`` and ``pci-1`` and one NIC on ``pci-1``. A Job
  whose claim asks for a GPU and a NIC with ``matchAttribute: resource.kubernetes.io/pcieRoot``
  is admitted and the scheduler gives it ``gpu-1`` and ``nic-0``; a second waits with the
  constraint named.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import yaml

from e2e.support.deploy import ControllerProcess, install_crds
from e2e.support.device_jobs import Jobs, cluster_queue, pool_queues
from e2e.support.faults import own_testbed
from e2e.support.workloads import KUEUE
from e2e.testbed import KubeClient, api_path
from e2e.testbed.spec import (
    DeviceClassSpec,
    DeviceTaintSpec,
    GpuSpec,
    NicSpec,
    NodeSpec,
    PartitionSpec,
    TestbedSpec,
)
from reconciler.integrations.batchjob import job_workload_name

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(420)]

Obj = dict[str, Any]
GPU, MIG, NIC = "nvidia.com/gpu", "nvidia.com/mig", "example.com/nic"
MIG_CLASS, NIC_CLASS = "mig.nvidia.com", "nic.example.com"
RESOURCE = "resource.k8s.io/v1"
TAINT = DeviceTaintSpec(gpu=1, key="example.com/unhealthy", value="true")
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"


def _selector(kind: str) -> str:
    return f"device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == '{kind}'"


SPEC = TestbedSpec(
    nodes=[
        NodeSpec(name="taint-node", labels={"pool": "taint"}, gpus=GpuSpec(count=2, taints=[TAINT])),
        NodeSpec(
            name="mig-node",
            labels={"pool": "mig"},
            gpus=GpuSpec(
                count=1,
                model="A100-SXM4-40GB",
                partitions=[PartitionSpec(profile="4g.20gb", count=3, memory="20Gi", slices=4)],
                counter_slices=8,
            ),
        ),
        NodeSpec(name="pool-node", labels={"pool": "pool"}),  # its slices are made by the test
        NodeSpec(
            name="pcie-node",
            labels={"pool": "pcie"},
            gpus=GpuSpec(count=2, pcie_roots=["pci-0", "pci-1"]),
            nics=[NicSpec(pcie_root="pci-1")],
        ),
    ],
    device_classes=[
        DeviceClassSpec(name=MIG_CLASS, selector=_selector("mig")),
        DeviceClassSpec(name=NIC_CLASS, selector=_selector("nic")),
    ],
)
CONFIGURATION = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
    "kind": "Configuration",
    "resources": {
        "deviceClassMappings": [
            {"name": GPU, "deviceClassNames": ["gpu.nvidia.com"]},
            {"name": MIG, "deviceClassNames": [MIG_CLASS]},
            {"name": NIC, "deviceClassNames": [NIC_CLASS]},
        ]
    },
    "deviceInventory": {"mode": "Enforce"},
}
# namespace (= flavor and node pool) -> quotas, all above what the devices allow
QUOTAS: dict[str, list[tuple[str, int]]] = {
    "taint": [(GPU, 4)],
    "mig": [(MIG, 6)],
    "pcie": [(GPU, 4), (NIC, 4)],
    "pool": [(GPU, 4)],
}


def _template(name: str, namespace: str, requests: list[Obj], constraints: list[Obj] | None = None) -> Obj:
    devices: Obj = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    return {
        "apiVersion": RESOURCE,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": devices}},
    }


def _request(name: str, device_class: str, **extra: Any) -> Obj:
    return {"name": name, "exactly": {"deviceClassName": device_class, **extra}}


TEMPLATES = [
    _template("gpu", "taint", [_request("dev", "gpu.nvidia.com")]),
    _template("gpu", "pool", [_request("dev", "gpu.nvidia.com")]),
    _template(
        "gpu-tolerating",
        "taint",
        [
            _request(
                "dev",
                "gpu.nvidia.com",
                tolerations=[{"key": TAINT.key, "operator": "Exists", "effect": "NoSchedule"}],
            )
        ],
    ),
    _template("partition", "mig", [_request("dev", MIG_CLASS)]),
    _template(
        "gpu-and-nic",
        "pcie",
        [_request("gpu", "gpu.nvidia.com"), _request("nic", NIC_CLASS)],
        [{"requests": ["gpu", "nic"], "matchAttribute": PCIE_ROOT}],
    ),
]


async def _set_up(kube: KubeClient) -> None:
    await install_crds(kube)
    for ns, quotas in QUOTAS.items():
        await pool_queues(kube, ns, quotas)
    for template in TEMPLATES:
        ns = template["metadata"]["namespace"]
        await kube.create(api_path(RESOURCE, "resourceclaimtemplates", ns), template)


async def _admin_namespace(kube: KubeClient) -> None:
    """Namespace `admin`, labelled so the API server allows adminAccess claims; a flavor of the
    taint node; a ClusterQueue with no GPU quota at all."""
    labels = {"resource.kubernetes.io/admin-access": "true"}
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "admin", "labels": labels}}
    await kube.create(api_path("v1", "namespaces"), namespace)
    flavor = {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "admin"}}
    await kube.create(
        api_path(KUEUE, "resourceflavors"), {**flavor, "spec": {"nodeLabels": {"pool": "taint"}}}
    )
    await kube.create(api_path(KUEUE, "clusterqueues"), cluster_queue("admin-cq", GPU, "admin", 0, {}))
    local_queue = {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": "lq", "namespace": "admin"},
    }
    await kube.create(
        api_path(KUEUE, "localqueues", "admin"), {**local_queue, "spec": {"clusterQueue": "admin-cq"}}
    )
    template = _template("gpu-admin", "admin", [_request("dev", "gpu.nvidia.com", adminAccess=True)])
    await kube.create(api_path(RESOURCE, "resourceclaimtemplates", "admin"), template)


async def _workload(kube: KubeClient, ns: str, job_name: str) -> Obj:
    job = await kube.get(api_path("batch/v1", "jobs", ns, job_name))
    name = job_workload_name(job_name, job["metadata"]["uid"])
    found: Obj = await kube.get(api_path(KUEUE, "workloads", ns, name))
    return found


def _pool_slice(part: int, node_uid: str) -> Obj:
    """Slice `part` (0 or 1) of pool-node's pool: generation 1 of 2 slices, one GPU each."""
    device = {
        "name": f"gpu-{part}",
        "attributes": {"type": {"string": "gpu"}, "productName": {"string": "Tesla T4"}},
        "capacity": {"memory": {"value": "16Gi"}},
    }
    return {
        "apiVersion": RESOURCE,
        "kind": "ResourceSlice",
        "metadata": {
            "name": f"pool-node-part-{part}",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "pool-node", "uid": node_uid}],
        },
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "pool-node",
            "pool": {"name": "pool-node", "generation": 1, "resourceSliceCount": 2},
            "devices": [device],
        },
    }


@pytest.mark.asyncio
async def test_taints_shared_counters_and_constraints_as_the_scheduler_allocates(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    run_dir = tmp_path_factory.mktemp("tb-rules")
    path = run_dir / "configuration.yaml"
    path.write_text(yaml.safe_dump(CONFIGURATION))
    async with own_testbed(run_dir / "bed", SPEC) as bed, KubeClient.from_kubeconfig(bed.kubeconfig) as kube:
        await _set_up(kube)
        controller = ControllerProcess(path, bed.kubeconfig, run_dir / "controller.log")
        await asyncio.to_thread(controller.start)
        try:
            jobs = Jobs(kube)
            # Taints: the untainted GPU goes to the first Job; the second has none it tolerates.
            await jobs.create("taint", "t1", "gpu")
            await jobs.reserved("taint", "t1")
            assert await jobs.allocated("taint", "t1") == ["gpu-0"]
            await jobs.create("taint", "t2", "gpu")
            waiting = await jobs.waiting("taint", "t2", "taint the request does not tolerate")
            message = waiting["message"]
            for words in (
                "insufficient devices for nvidia.com/gpu in flavor taint",
                "DeviceClass gpu.nvidia.com needs 1, 0 available",
                "on node taint-node 1 carry a taint the request does not tolerate "
                "(example.com/unhealthy=true:NoSchedule)",
            ):
                assert words in message, message
            await jobs.create("taint", "t3", "gpu-tolerating")
            await jobs.reserved("taint", "t3")
            assert await jobs.allocated("taint", "t3") == ["gpu-1"]

            # adminAccess (in a namespace labelled for it): charged nothing, admitted with no GPU
            # quota, and the scheduler gives it a GPU another claim holds (admin access).
            await _admin_namespace(kube)
            await jobs.create("admin", "a1", "gpu-admin")
            await jobs.reserved("admin", "a1")
            (assignment,) = (await _workload(kube, "admin", "a1"))["status"]["admission"]["podSetAssignments"]
            assert GPU not in assignment.get("resourceUsage", {}), assignment
            assert await jobs.allocated("admin", "a1") == ["gpu-0"]

            # Shared counters: 8 slices hold two 4-slice partitions, not three.
            for name in ("m1", "m2"):
                await jobs.create("mig", name, "partition")
                await jobs.reserved("mig", name)
            allocated = [*await jobs.allocated("mig", "m1"), *await jobs.allocated("mig", "m2")]
            assert len(set(allocated)) == 2, allocated
            assert all(name.startswith("gpu-0-4g-20gb-") for name in allocated), allocated
            await jobs.create("mig", "m3", "partition")
            waiting = await jobs.waiting("mig", "m3", "shared counters")
            assert "DeviceClass mig.nvidia.com needs 1, 0 available" in waiting["message"], waiting["message"]

            # matchAttribute: only gpu-1 shares a PCIe root with the NIC.
            await jobs.create("pcie", "p1", "gpu-and-nic")
            await jobs.reserved("pcie", "p1")
            assert await jobs.allocated("pcie", "p1") == ["gpu-1", "nic-0"]
            await jobs.create("pcie", "p2", "gpu-and-nic")
            waiting = await jobs.waiting("pcie", "p2", PCIE_ROOT)
            assert "need free devices with one value of resource.kubernetes.io/pcieRoot" in waiting["message"]

            # Pools: half of a 2-slice pool counts nothing (Kueue issue 14573); the whole does.
            node_uid = (await kube.get(api_path("v1", "nodes", name="pool-node")))["metadata"]["uid"]
            slices = api_path(RESOURCE, "resourceslices")
            await kube.create(slices, _pool_slice(0, node_uid))
            await jobs.create("pool", "q1", "gpu")
            waiting = await jobs.waiting("pool", "q1", "0 published on the flavor's nodes")
            assert "DeviceClass gpu.nvidia.com needs 1, 0 available" in waiting["message"], waiting["message"]
            await kube.create(slices, _pool_slice(1, node_uid))
            await jobs.reserved("pool", "q1")
            (device,) = await jobs.allocated("pool", "q1")
            assert device in ("gpu-0", "gpu-1")
        finally:
            code = await asyncio.to_thread(controller.stop)
        assert code == 0, controller.log_tail(30)
