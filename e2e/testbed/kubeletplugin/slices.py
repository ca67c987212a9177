"""(Re)publishing this node's ResourceSlice through the test-bed's fake driver (API half).

The slice's shape, device names and GPU uuids all come from
``e2e.testbed.fakedriver``, so what the plugin prepares matches what the
scheduler allocated from.
"""

from __future__ import annotations

import asyncio
import logging

import aiohttp

from e2e.testbed.fakedriver import FakeDraDriver, gpu_devices
from e2e.testbed.kubeclient import ApiError, KubeClient
from e2e.testbed.names import DRIVER_NAME
from e2e.testbed.spec import NodeSpec, TestbedSpec

log = logging.getLogger(__name__)

# The test-bed's slices always carry this driver name.
SLICE_DRIVER_NAME = DRIVER_NAME


async def publish_node_slice(kube: KubeClient, node: NodeSpec) -> int:
    """Create or update ``node``'s ResourceSlice; returns the number of devices published.

    Only this node's slice is touched (``FakeDraDriver.publish()`` would also
    delete the slices of every node missing from its spec).
    """
    devices = gpu_devices(node)
    if not devices:
        log.info("node %s has no GPUs; no ResourceSlice to publish", node.name)
        return 0
    driver = FakeDraDriver(kube, TestbedSpec(nodes=[node]))
    await driver.publish_node(node.name, devices)
    return len(devices)


async def republish_forever(kube: KubeClient, node: NodeSpec, interval: float, retry: float = 5.0) -> None:
    """Publish now, then every ``interval`` s (a kubelet may wipe slices); retry failures.

    ``interval`` <= 0: publish once (retrying until it works) and return.
    """
    while True:
        try:
            count = await publish_node_slice(kube, node)
        except (ApiError, aiohttp.ClientError, OSError, TimeoutError) as err:
            log.warning("publishing the ResourceSlice of %s failed: %s", node.name, err)
            await asyncio.sleep(retry)
            continue
        log.info("published ResourceSlice of %s with %d device(s)", node.name, count)
        if interval <= 0:
            return
        await asyncio.sleep(interval)
