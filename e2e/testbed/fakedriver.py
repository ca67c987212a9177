"""The API half of a fake NVIDIA DRA driver: a DeviceClass and one ResourceSlice per node.

Slices look like those of NVIDIA's k8s-dra-driver-gpu for whole GPUs: driver
``gpu.nvidia.com``, pool named after the node, devices ``gpu-<n>`` with the
attributes type, uuid, productName, brand, architecture,
cudaComputeCapability, driverVersion, cudaDriverVersion and capacity memory.
Publishing is idempotent (server-side apply); the pool generation only moves
when the devices change.

A spec may also ask for MIG-like partitions of each GPU (devices
``gpu-<n>-<profile>-<m>`` with ``type: mig``, ``profile``, ``parentUUID`` and
capacity memory) and for more DeviceClasses (``deviceClasses``); without
them it publishes whole GPUs and the one class, as before. For the allocator's
rules it can publish device taints, a ``resource.kubernetes.io/pcieRoot`` per GPU,
NICs (``nic-<i>``, ``type: nic``) on PCIe roots, and shared counters: each GPU's
counter set ``gpu-<n>-slices`` in a second slice of the pool (a slice holds devices or
counters), consumed whole by the GPU and in part by each partition; shared GPUs (``type:
vgpu``, ``allowMultipleAllocations``, capacities ``memory`` and ``cores: 100``); and classes
that declare an ``extendedResourceName``.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

import aiohttp

from e2e.testbed.kubeclient import ApiError, KubeClient, Obj, api_path
from e2e.testbed.names import (
    DEVICE_CLASS_NAME,
    DEVICE_CLASS_SELECTOR,
    DRIVER_FIELD_MANAGER,
    DRIVER_NAME,
    MANAGED_BY_LABEL,
)
from e2e.testbed.spec import DeviceClassSpec, NodeSpec, TestbedSpec

RESOURCE_V1 = "resource.k8s.io/v1"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
_DRIVER_LABEL_VALUE = "fake-dra-driver"
log = logging.getLogger(__name__)


def gpu_uuid(node_name: str, index: int) -> str:
    """A stable NVML-style UUID for GPU ``index`` of ``node_name``."""
    return "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_URL, f"dra-quota-testbed/{node_name}/{index}"))


def device_class(extra: DeviceClassSpec | None = None) -> Obj:
    """The driver's own class (whole GPUs), or one a spec asks for."""
    name, selector = (
        (DEVICE_CLASS_NAME, DEVICE_CLASS_SELECTOR) if extra is None else (extra.name, extra.selector)
    )
    body: Obj = {
        "apiVersion": RESOURCE_V1,
        "kind": "DeviceClass",
        "metadata": {"name": name, "labels": {MANAGED_BY_LABEL: _DRIVER_LABEL_VALUE}},
        "spec": {"selectors": [{"cel": {"expression": selector}}]},
    }
    if extra is not None and extra.extended_resource_name:
        body["spec"]["extendedResourceName"] = extra.extended_resource_name
    return body


def partition_devices(node: NodeSpec) -> list[Obj]:
    """The MIG-like partitions of every GPU of the node, as their own devices."""
    if node.gpus is None:
        return []
    model = node.gpus.resolved_model()
    out = []
    for index in range(node.gpus.count):
        for part in node.gpus.partitions:
            for n in range(part.count):
                device: Obj = {
                    "name": f"gpu-{index}-{part.profile.replace('.', '-').lower()}-{n}",
                    "attributes": {
                        "type": {"string": "mig"},
                        "profile": {"string": part.profile},
                        "parentUUID": {"string": gpu_uuid(node.name, index)},
                        "productName": {"string": model.product_name},
                    },
                    "capacity": {"memory": {"value": part.memory}},
                }
                if node.gpus.counter_slices:
                    device["consumesCounters"] = [_consumes(index, part.slices)]
                out.append(device)
    return out


def node_devices(node: NodeSpec) -> list[Obj]:
    """Everything the driver publishes for a node: whole GPUs, partitions, then NICs."""
    return gpu_devices(node) + partition_devices(node) + nic_devices(node)


def nic_devices(node: NodeSpec) -> list[Obj]:
    """The node's NICs (``type: nic``), each on its PCIe root."""
    return [
        {"name": f"nic-{i}", "attributes": {"type": {"string": "nic"}, PCIE_ROOT: {"string": nic.pcie_root}}}
        for i, nic in enumerate(node.nics)
    ]


def _consumes(index: int, slices: int) -> Obj:
    return {"counterSet": counter_set_name(index), "counters": {"slices": {"value": str(slices)}}}


def counter_set_name(index: int) -> str:
    return f"gpu-{index}-slices"


def shared_counters(node: NodeSpec) -> list[Obj]:
    """Per GPU, the counter set its partitions share (none unless ``counterSlices`` is set)."""
    if node.gpus is None or not node.gpus.counter_slices:
        return []
    total = str(node.gpus.counter_slices)
    return [
        {"name": counter_set_name(index), "counters": {"slices": {"value": total}}}
        for index in range(node.gpus.count)
    ]


def gpu_devices(node: NodeSpec) -> list[Obj]:
    if node.gpus is None:
        return []
    gpus = node.gpus
    model = gpus.resolved_model()
    out = []
    for index in range(gpus.count):
        device: Obj = {
            "name": f"gpu-{index}",
            "attributes": {
                "type": {"string": "gpu"},
                "uuid": {"string": gpu_uuid(node.name, index)},
                "productName": {"string": model.product_name},
                "brand": {"string": model.brand},
                "architecture": {"string": model.architecture},
                "cudaComputeCapability": {"version": model.cuda_compute_capability},
                "driverVersion": {"version": model.driver_version},
                "cudaDriverVersion": {"version": model.cuda_driver_version},
            },
            "capacity": {"memory": {"value": model.memory}},
        }
        if gpus.shared:
            device["attributes"]["type"] = {"string": "vgpu"}
            device["allowMultipleAllocations"] = True
            device["capacity"]["cores"] = {"value": "100"}
        if index < len(gpus.pcie_roots):
            device["attributes"][PCIE_ROOT] = {"string": gpus.pcie_roots[index]}
        if gpus.counter_slices:
            device["consumesCounters"] = [_consumes(index, gpus.counter_slices)]
        taints = [{"key": t.key, "value": t.value, "effect": t.effect} for t in gpus.taints if t.gpu == index]
        if taints:
            device["taints"] = taints
        out.append(device)
    return out


def slice_name(node_name: str) -> str:
    return f"{node_name}-{DRIVER_NAME}"


def counters_slice_name(node_name: str) -> str:
    return f"{node_name}-{DRIVER_NAME}-counters"


def counters_slice(node_name: str, node_uid: str, counter_sets: list[Obj], generation: int) -> Obj:
    """The pool's second slice: its shared counters (a slice holds devices or counters, not both)."""
    body = resource_slice(node_name, node_uid, [], generation, slices=2)
    body["metadata"]["name"] = counters_slice_name(node_name)
    del body["spec"]["devices"]
    body["spec"]["sharedCounters"] = counter_sets
    return body


def resource_slice(
    node_name: str, node_uid: str, devices: list[Obj], generation: int, slices: int = 1
) -> Obj:
    return {
        "apiVersion": RESOURCE_V1,
        "kind": "ResourceSlice",
        "metadata": {
            "name": slice_name(node_name),
            "labels": {MANAGED_BY_LABEL: _DRIVER_LABEL_VALUE},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_uid, "controller": True}
            ],
        },
        "spec": {
            "driver": DRIVER_NAME,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": generation, "resourceSliceCount": slices},
            "devices": devices,
        },
    }


def _shape(devices: list[Obj]) -> list[tuple[object, ...]]:
    """What decides whether the pool changed (ignores fields the server defaults)."""
    return [
        (d.get("name"), d.get("attributes"), d.get("capacity"), d.get("taints"), d.get("consumesCounters"))
        for d in devices
    ]


class FakeDraDriver:
    def __init__(self, kube: KubeClient, spec: TestbedSpec) -> None:
        self._kube = kube
        self._spec = spec

    async def publish(self) -> None:
        """Apply the DeviceClass and every node's slice; delete slices of nodes gone."""
        classes = [device_class(), *(device_class(c) for c in self._spec.device_classes)]
        for body in classes:
            await self._kube.apply(
                api_path(RESOURCE_V1, "deviceclasses", name=body["metadata"]["name"]),
                body,
                DRIVER_FIELD_MANAGER,
            )
        wanted: set[str] = set()
        for node in self._spec.nodes:
            devices = node_devices(node)
            if devices:
                counter_sets = shared_counters(node)
                await self.publish_node(node.name, devices, counter_sets)
                wanted.add(slice_name(node.name))
                if counter_sets:
                    wanted.add(counters_slice_name(node.name))
        slices, _ = await self._kube.list_all(
            api_path(RESOURCE_V1, "resourceslices"),
            {"labelSelector": f"{MANAGED_BY_LABEL}={_DRIVER_LABEL_VALUE}"},
        )
        for item in slices:
            name = item["metadata"]["name"]
            if name not in wanted:
                log.info("deleting stale ResourceSlice %s", name)
                try:
                    await self._kube.delete(api_path(RESOURCE_V1, "resourceslices", name=name))
                except ApiError as err:
                    if err.status != 404:
                        raise

    async def publish_node(
        self, node_name: str, devices: list[Obj], counter_sets: list[Obj] | None = None
    ) -> None:
        """Create or update one node's ResourceSlice (server-side apply), and with shared
        counters a second slice of the same pool holding them; other slices are left alone. The
        pool generation moves only when the devices change."""
        node = await self._kube.get(api_path("v1", "nodes", name=node_name))
        path = api_path(RESOURCE_V1, "resourceslices", name=slice_name(node_name))
        existing = await self._kube.get_or_none(path)
        generation = 1
        if existing is not None:
            pool = existing["spec"]["pool"]
            generation = int(pool.get("generation", 0))
            if _shape(existing["spec"].get("devices") or []) != _shape(devices):
                generation += 1
        uid = node["metadata"]["uid"]
        slices = 2 if counter_sets else 1
        if counter_sets:
            counters = counters_slice(node_name, uid, counter_sets, generation)
            counters_path = api_path(RESOURCE_V1, "resourceslices", name=counters_slice_name(node_name))
            await self._kube.apply(counters_path, counters, DRIVER_FIELD_MANAGER)
        body = resource_slice(node_name, uid, devices, generation, slices)
        await self._kube.apply(path, body, DRIVER_FIELD_MANAGER)

    async def refresh_forever(self, interval: float = 30.0) -> None:
        """Re-apply now and then, so deleted objects come back."""
        while True:
            await asyncio.sleep(interval)
            try:
                await self.publish()
            except (ApiError, aiohttp.ClientError, OSError, TimeoutError) as err:
                log.warning("re-publishing slices failed: %s", err)
