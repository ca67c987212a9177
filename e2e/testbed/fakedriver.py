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
them it publishes whole GPUs and the one class, as before.
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
    return {
        "apiVersion": RESOURCE_V1,
        "kind": "DeviceClass",
        "metadata": {"name": name, "labels": {MANAGED_BY_LABEL: _DRIVER_LABEL_VALUE}},
        "spec": {"selectors": [{"cel": {"expression": selector}}]},
    }


def partition_devices(node: NodeSpec) -> list[Obj]:
    """The MIG-like partitions of every GPU of the node, as their own devices."""
    if node.gpus is None:
        return []
    model = node.gpus.resolved_model()
    return [
        {
            "name": f"gpu-{index}-{part.profile.replace('.', '-').lower()}-{n}",
            "attributes": {
                "type": {"string": "mig"},
                "profile": {"string": part.profile},
                "parentUUID": {"string": gpu_uuid(node.name, index)},
                "productName": {"string": model.product_name},
            },
            "capacity": {"memory": {"value": part.memory}},
        }
        for index in range(node.gpus.count)
        for part in node.gpus.partitions
        for n in range(part.count)
    ]


def node_devices(node: NodeSpec) -> list[Obj]:
    """Everything the driver publishes for a node: whole GPUs, then partitions."""
    return gpu_devices(node) + partition_devices(node)


def gpu_devices(node: NodeSpec) -> list[Obj]:
    if node.gpus is None:
        return []
    model = node.gpus.resolved_model()
    return [
        {
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
        for index in range(node.gpus.count)
    ]


def slice_name(node_name: str) -> str:
    return f"{node_name}-{DRIVER_NAME}"


def resource_slice(node_name: str, node_uid: str, devices: list[Obj], generation: int) -> Obj:
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
            "pool": {"name": node_name, "generation": generation, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def _shape(devices: list[Obj]) -> list[tuple[object, ...]]:
    """What decides whether the pool changed (ignores fields the server defaults)."""
    return [(d.get("name"), d.get("attributes"), d.get("capacity")) for d in devices]


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
                await self.publish_node(node.name, devices)
                wanted.add(slice_name(node.name))
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

    async def publish_node(self, node_name: str, devices: list[Obj]) -> None:
        """Create or update one node's ResourceSlice (server-side apply); other slices
        are left alone. The pool generation moves only when the devices change."""
        node = await self._kube.get(api_path("v1", "nodes", name=node_name))
        path = api_path(RESOURCE_V1, "resourceslices", name=slice_name(node_name))
        existing = await self._kube.get_or_none(path)
        generation = 1
        if existing is not None:
            pool = existing["spec"]["pool"]
            generation = int(pool.get("generation", 0))
            if _shape(existing["spec"].get("devices") or []) != _shape(devices):
                generation += 1
        body = resource_slice(node_name, node["metadata"]["uid"], devices, generation)
        await self._kube.apply(path, body, DRIVER_FIELD_MANAGER)

    async def refresh_forever(self, interval: float = 30.0) -> None:
        """Re-apply now and then, so deleted objects come back."""
        while True:
            await asyncio.sleep(interval)
            try:
                await self.publish()
            except (ApiError, aiohttp.ClientError, OSError, TimeoutError) as err:
                log.warning("re-publishing slices failed: %s", err)
