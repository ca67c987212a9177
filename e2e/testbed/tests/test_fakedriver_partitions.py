"""The fake driver's optional shapes: MIG-like partitions with capacities, and more DeviceClasses."""

from __future__ import annotations

import msgspec
import pytest

from e2e.testbed.fakedriver import device_class, gpu_uuid, node_devices, partition_devices
from e2e.testbed.names import DEVICE_CLASS_NAME
from e2e.testbed.spec import DeviceClassSpec, GpuSpec, NodeSpec, PartitionSpec, TestbedSpec, default_spec

MIG_SELECTOR = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"


def test_by_default_only_whole_gpus_and_the_one_class_are_published() -> None:
    spec = default_spec()
    (node,) = spec.nodes
    assert [d["name"] for d in node_devices(node)] == ["gpu-0"]
    assert partition_devices(node) == []
    assert spec.device_classes == []
    assert device_class()["metadata"]["name"] == DEVICE_CLASS_NAME


def test_partitions_are_devices_of_their_own_with_profile_parent_and_memory() -> None:
    node = NodeSpec(
        name="n",
        gpus=GpuSpec(count=2, model="A100-SXM4-40GB", partitions=[PartitionSpec(profile="1g.5gb", count=2)]),
    )
    devices = node_devices(node)
    names = [d["name"] for d in devices]
    assert names == ["gpu-0", "gpu-1", "gpu-0-1g-5gb-0", "gpu-0-1g-5gb-1", "gpu-1-1g-5gb-0", "gpu-1-1g-5gb-1"]
    part = devices[4]
    assert part["attributes"]["type"] == {"string": "mig"}
    assert part["attributes"]["profile"] == {"string": "1g.5gb"}
    assert part["attributes"]["parentUUID"] == {"string": gpu_uuid("n", 1)}
    assert part["capacity"] == {"memory": {"value": "5Gi"}}
    # Whole GPUs keep the model's memory.
    assert devices[0]["capacity"] == {"memory": {"value": "40Gi"}}


def test_a_spec_publishes_more_device_classes() -> None:
    extra = DeviceClassSpec(name="mig.nvidia.com", selector=MIG_SELECTOR)
    body = device_class(extra)
    assert body["metadata"]["name"] == "mig.nvidia.com"
    assert body["spec"]["selectors"] == [{"cel": {"expression": MIG_SELECTOR}}]


def test_the_yaml_form_and_its_checks() -> None:
    spec = msgspec.convert(
        {
            "deviceClasses": [{"name": "mig.nvidia.com", "selector": MIG_SELECTOR}],
            "nodes": [
                {"name": "n", "gpus": {"count": 1, "partitions": [{"profile": "2g.10gb", "memory": "10Gi"}]}}
            ],
        },
        TestbedSpec,
    )
    assert spec.device_classes[0].name == "mig.nvidia.com"
    assert spec.nodes[0].gpus is not None
    assert spec.nodes[0].gpus.partitions == [PartitionSpec(profile="2g.10gb", count=1, memory="10Gi")]
    with pytest.raises(ValueError, match="unique"):
        TestbedSpec(nodes=[], device_classes=[DeviceClassSpec(name="a", selector="true")] * 2)
    with pytest.raises(ValueError, match="count must be >= 0"):
        TestbedSpec(
            nodes=[NodeSpec(name="n", gpus=GpuSpec(partitions=[PartitionSpec(profile="p", count=-1)]))]
        )
