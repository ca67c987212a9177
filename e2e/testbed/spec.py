"""What the simulated cluster looks like: nodes, their labels, capacity and GPUs.

The YAML form uses camelCase keys, for example::

    podRunSeconds: 30
    nodes:
    - name: gpu-node-1
      labels: {nvidia.com/gpu.product: Tesla-T4}
      cpu: "8"
      memory: 32Gi
      pods: 110
      gpus: {count: 1, model: Tesla-T4}

A GPU spec may add MIG-like partitions per GPU, published as their own devices
(attribute ``type: mig``), and the spec may publish DeviceClasses besides the
driver's ``gpu.nvidia.com``::

    deviceClasses:
    - name: mig.nvidia.com
      selector: device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'
    nodes:
    - name: gpu-node-1
      gpus: {count: 1, model: A100-SXM4-40GB, partitions: [{profile: 1g.5gb, count: 2, memory: 5Gi}]}
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import yaml


class GpuModel(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """The attributes NVIDIA's DRA driver publishes for one whole GPU."""

    product_name: str
    brand: str = "Nvidia"
    architecture: str
    cuda_compute_capability: str  # semver, e.g. 7.5.0
    memory: str  # quantity, e.g. 16Gi
    driver_version: str = "550.54.15"
    cuda_driver_version: str = "12.4.0"


GPU_MODELS: dict[str, GpuModel] = {
    "Tesla-T4": GpuModel(
        product_name="Tesla T4", architecture="Turing", cuda_compute_capability="7.5.0", memory="16Gi"
    ),
    "A100-SXM4-40GB": GpuModel(
        product_name="NVIDIA A100-SXM4-40GB",
        architecture="Ampere",
        cuda_compute_capability="8.0.0",
        memory="40Gi",
    ),
    "H100-80GB-HBM3": GpuModel(
        product_name="NVIDIA H100 80GB HBM3",
        architecture="Hopper",
        cuda_compute_capability="9.0.0",
        memory="80Gi",
    ),
}


class PartitionSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """``count`` MIG-like partitions of each GPU, with profile name and memory capacity; with the
    GPU's ``counterSlices`` set, each consumes ``slices`` of them (partitionable devices)."""

    profile: str
    count: int = 1
    memory: str = "5Gi"
    slices: int = 0


class DeviceTaintSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """A taint on GPU ``gpu`` (its index) of the node: ``key=value:effect``."""

    gpu: int
    key: str
    value: str = ""
    effect: str = "NoSchedule"


class NicSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """A NIC device (``type: nic``) on the PCIe root ``pcieRoot``."""

    pcie_root: str


class DeviceClassSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """A DeviceClass the fake driver publishes besides its own: name and one CEL selector."""

    name: str
    selector: str
    # KEP-5004: pods asking for this extended resource get a claim for the class.
    extended_resource_name: str | None = None


class GpuSpec(
    msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True, forbid_unknown_fields=True
):
    """``count`` identical GPUs of a preset ``model`` (see GPU_MODELS) or a custom one."""

    count: int = 1
    model: str = "Tesla-T4"
    custom: GpuModel | None = None  # used instead of the preset when given
    partitions: list[PartitionSpec] = msgspec.field(default_factory=list)
    # > 0: each GPU shares a counter set `gpu-<n>-slices` of this many `slices` (published in a
    # slice of its own, same pool); the whole GPU consumes all, a partition its `slices`.
    counter_slices: int = 0
    taints: list[DeviceTaintSpec] = msgspec.field(default_factory=list)
    # The `resource.kubernetes.io/pcieRoot` attribute of GPU n is pcieRoots[n] (none when absent).
    pcie_roots: list[str] = msgspec.field(default_factory=list)
    # Shared GPUs (consumable capacity, HAMi-style): `type: vgpu`, allowMultipleAllocations, and a
    # capacity `cores: 100` (percent of the card) beside `memory`.
    shared: bool = False

    def resolved_model(self) -> GpuModel:
        if self.custom is not None:
            return self.custom
        try:
            return GPU_MODELS[self.model]
        except KeyError:
            known = ", ".join(sorted(GPU_MODELS))
            raise ValueError(f"unknown GPU model {self.model!r}; known: {known}") from None


class NodeSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True):
    name: str
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    cpu: str = "8"
    memory: str = "32Gi"
    pods: int = 110
    gpus: GpuSpec | None = None
    nics: list[NicSpec] = msgspec.field(default_factory=list)
    # What a device plugin would advertise: extended resources in the node's capacity and
    # allocatable (e.g. {example.com/gpu: "2"}), with no DRA behind them.
    extended_resources: dict[str, str] = msgspec.field(default_factory=dict)


class TestbedSpec(msgspec.Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True):
    __test__ = False  # not a pytest test class

    nodes: list[NodeSpec]
    pod_run_seconds: float = 30.0
    device_classes: list[DeviceClassSpec] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            raise ValueError(f"node names must be unique: {names}")
        for node in self.nodes:
            if node.gpus is not None:
                if node.gpus.count < 0:
                    raise ValueError(f"{node.name}: gpus.count must be >= 0")
                node.gpus.resolved_model()
                for part in node.gpus.partitions:
                    if part.count < 0:
                        raise ValueError(f"{node.name}: gpus.partitions[{part.profile}].count must be >= 0")
                for taint in node.gpus.taints:
                    if not 0 <= taint.gpu < node.gpus.count:
                        raise ValueError(
                            f"{node.name}: gpus.taints: gpu {taint.gpu} is not one of the node's GPUs"
                        )
        classes = [c.name for c in self.device_classes]
        if len(set(classes)) != len(classes):
            raise ValueError(f"deviceClasses: names must be unique: {classes}")
        if self.pod_run_seconds < 0:
            raise ValueError("podRunSeconds must be >= 0")


def default_spec() -> TestbedSpec:
    """One node ``gpu-node-1`` labelled as a Tesla T4 node, with one Tesla T4."""
    return TestbedSpec(
        nodes=[
            NodeSpec(
                name="gpu-node-1",
                labels={"nvidia.com/gpu.product": "Tesla-T4"},
                gpus=GpuSpec(count=1, model="Tesla-T4"),
            ),
        ]
    )


def load_spec(path: Path) -> TestbedSpec:
    data = yaml.safe_load(path.read_text())
    try:
        return msgspec.convert(data, TestbedSpec)
    except msgspec.ValidationError as err:
        raise ValueError(f"{path}: {err}") from None


def dump_spec(spec: TestbedSpec) -> str:
    return yaml.safe_dump(msgspec.to_builtins(spec), sort_keys=False)
