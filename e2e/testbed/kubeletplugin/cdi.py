"""CDI spec files: one transient spec per prepared claim, injecting only environment variables.

A spec for claim ``<uid>`` is ``<cdi dir>/<vendor>-<class>_<uid>.json`` with kind
``<vendor>/<class>`` (``k8s.gpu.nvidia.com/gpu``) and one CDI device per
prepared device, named ``<uid>-<device>``. Spec-wide edits set
``NVIDIA_VISIBLE_DEVICES`` to the uuids of the claim's GPUs (as NVIDIA's stack
would) plus the driver and node name; each device adds ``GPU_DEVICE_<n>``
variables (name, uuid, claim UID, requests). No device nodes or mounts: there
is no real GPU. Two claims of the same driver in one container both set
``NVIDIA_VISIBLE_DEVICES``; the runtime keeps one of them (the per-device
variables stay distinct).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from e2e.testbed.kubeclient import Obj
from e2e.testbed.kubeletplugin.config import PluginConfig
from e2e.testbed.kubeletplugin.files import write_atomically
from e2e.testbed.kubeletplugin.model import PreparedDevice

CDI_VERSION = "0.6.0"
_GPU_NAME = re.compile(r"gpu-([0-9]+)")


def spec_path(config: PluginConfig, claim_uid: str) -> Path:
    safe_uid = claim_uid.replace("/", "_")
    return config.cdi_dir / f"{config.cdi_vendor}-{config.cdi_class}_{safe_uid}.json"


def cdi_device_name(claim_uid: str, device_name: str) -> str:
    return f"{claim_uid}-{device_name}"


def cdi_device_id(config: PluginConfig, claim_uid: str, device_name: str) -> str:
    """Fully qualified CDI id, e.g. ``k8s.gpu.nvidia.com/gpu=<uid>-gpu-0``."""
    return f"{config.cdi_kind}={cdi_device_name(claim_uid, device_name)}"


def env_prefix(device_name: str) -> str:
    """``gpu-0`` -> ``GPU_DEVICE_0``; other names are upper-cased with ``_`` for the rest."""
    match = _GPU_NAME.fullmatch(device_name)
    suffix = match.group(1) if match else re.sub(r"[^A-Za-z0-9]", "_", device_name).upper()
    return f"GPU_DEVICE_{suffix}"


def build_spec(config: PluginConfig, claim_uid: str, devices: tuple[PreparedDevice, ...]) -> Obj:
    """The spec document (deterministic: same input, same JSON)."""
    spec_env = [
        "NVIDIA_VISIBLE_DEVICES=" + ",".join(d.uuid for d in devices),
        f"DRA_RESOURCE_DRIVER_NAME={config.driver_name}",
        f"KUBERNETES_NODE_NAME={config.node_name}",
    ]
    cdi_devices: list[Obj] = []
    for device in devices:
        prefix = env_prefix(device.device_name)
        env = [
            f"{prefix}={device.device_name}",
            f"{prefix}_UUID={device.uuid}",
            f"{prefix}_RESOURCE_CLAIM={claim_uid}",
            f"{prefix}_REQUEST={','.join(device.request_names)}",
        ]
        cdi_devices.append(
            {"name": cdi_device_name(claim_uid, device.device_name), "containerEdits": {"env": env}}
        )
    return {
        "cdiVersion": CDI_VERSION,
        "kind": config.cdi_kind,
        "containerEdits": {"env": spec_env},
        "devices": cdi_devices,
    }


def render(spec: Obj) -> bytes:
    return (json.dumps(spec, indent=2) + "\n").encode()


def write_spec(path: Path, spec: Obj) -> None:
    """Write the spec unless the file already holds exactly it (blocking)."""
    data = render(spec)
    try:
        if path.read_bytes() == data:
            return
    except FileNotFoundError:
        pass
    write_atomically(path, data)


def remove_spec(path: Path) -> bool:
    """Delete the spec file; False when it was not there (blocking)."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True
