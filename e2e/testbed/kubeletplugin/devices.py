"""Which fake GPU a device name means, with the uuid the ResourceSlice publishes."""

from __future__ import annotations

import re

from e2e.testbed.fakedriver import gpu_uuid

_GPU_NAME = re.compile(r"gpu-(0|[1-9][0-9]*)")


def gpu_index(device_name: str) -> int:
    """``gpu-3`` -> 3; ValueError for names this driver never publishes."""
    match = _GPU_NAME.fullmatch(device_name)
    if match is None:
        raise ValueError(f"device {device_name!r} is not a device of this driver (gpu-<n>)")
    return int(match.group(1))


def device_uuid(node_name: str, device_name: str) -> str:
    """The ``uuid`` attribute the test-bed's fake driver publishes for this device."""
    return gpu_uuid(node_name, gpu_index(device_name))
