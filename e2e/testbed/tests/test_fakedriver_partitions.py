"""The fake driver's optional shapes: MIG-like partitions with capacities, and more DeviceClasses."""

from __future__ import annotations

import msgspec
import pytest

from e2e.testbed.fakedriver import (
    PCIE_ROOT,
    counters_slice,
    device_class,
    gpu_uuid,
    node_devices,
    partition_devices,
    shared_counters,
)
from e2e.testbed.names import DEVICE_CLASS_NAME
from e2e.testbed.spec import (
    DeviceClassSpec,
    DeviceTaintSpec,
    GpuSpec,
    NicSpec,
    NodeSpec,
    PartitionSpec,
    TestbedSpec,
    default_spec,
)

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


def test_taints_pcie_roots_nics_and_shared_counters() -> None:
    node = NodeSpec(
        name="n",
        gpus=GpuSpec(
            count=2,
            model="A100-SXM4-40GB",
            partitions=[PartitionSpec(profile="4g.20gb", count=2, memory="20Gi", slices=4)],
            counter_slices=8,
            taints=[DeviceTaintSpec(gpu=1, key="example.com/unhealthy", value="true")],
            pcie_roots=["pci-0", "pci-1"],
        ),
        nics=[NicSpec(pcie_root="pci-1")],
    )
    devices = {d["name"]: d for d in node_devices(node)}
    assert devices["gpu-1"]["taints"] == [
        {"key": "example.com/unhealthy", "value": "true", "effect": "NoSchedule"}
    ]
    assert "taints" not in devices["gpu-0"]
    assert devices["gpu-0"]["attributes"][PCIE_ROOT] == {"string": "pci-0"}
    assert devices["nic-0"]["attributes"] == {"type": {"string": "nic"}, PCIE_ROOT: {"string": "pci-1"}}
    whole = {"counterSet": "gpu-0-slices", "counters": {"slices": {"value": "8"}}}
    assert devices["gpu-0"]["consumesCounters"] == [whole]
    part = {"counterSet": "gpu-1-slices", "counters": {"slices": {"value": "4"}}}
    assert devices["gpu-1-4g-20gb-1"]["consumesCounters"] == [part]
    sets = shared_counters(node)
    assert sets == [
        {"name": "gpu-0-slices", "counters": {"slices": {"value": "8"}}},
        {"name": "gpu-1-slices", "counters": {"slices": {"value": "8"}}},
    ]
    body = counters_slice("n", "uid", sets, 3)
    assert body["spec"]["pool"] == {"name": "n", "generation": 3, "resourceSliceCount": 2}
    assert "devices" not in body["spec"]
    assert body["spec"]["sharedCounters"] == sets
    with pytest.raises(ValueError, match="gpu 2 is not one of the node's GPUs"):
        TestbedSpec(
            nodes=[NodeSpec(name="m", gpus=GpuSpec(count=2, taints=[DeviceTaintSpec(gpu=2, key="k")]))]
        )
