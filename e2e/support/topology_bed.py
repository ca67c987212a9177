"""The two-rack test-bed of the topology-aware scheduling tests and its queues: rack r1 of two
nodes with two GPUs each, rack r2 of two nodes with one; a Topology `rack -> hostname`, a TAS
flavor on the pool's nodes, a ClusterQueue with the GPU quota asked, and the LocalQueue `lq`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from e2e.support.served import claim_template
from e2e.support.workloads import KUEUE
from e2e.testbed import KubeClient, api_path
from e2e.testbed.spec import GpuSpec, NodeSpec, TestbedSpec

__all__ = ["GATE", "GPU", "HOSTNAME", "POOL", "RACK", "RACKS", "SPEC", "tas_queues"]

RACK = "cloud.example.com/rack"
HOSTNAME = "kubernetes.io/hostname"
GATE = "kueue.x-k8s.io/topology"
GPU = "nvidia.com/gpu"
POOL = {"pool": "tas"}
RACKS = {"tas-n1": "r1", "tas-n2": "r1", "tas-n3": "r2", "tas-n4": "r2"}
_GPUS = {"tas-n1": 2, "tas-n2": 2, "tas-n3": 1, "tas-n4": 1}
SPEC = TestbedSpec(
    nodes=[
        NodeSpec(name=name, labels={RACK: rack, **POOL}, gpus=GpuSpec(count=_GPUS[name]))
        for name, rack in RACKS.items()
    ]
)


@asynccontextmanager
async def tas_queues(kube: KubeClient, namespace: str, gpus: int) -> AsyncIterator[str]:
    """The queues (named after the namespace) and the claim template `one-gpu` in `namespace`,
    deleted on the way out; yields the namespace."""
    name = f"tas-{namespace}"
    levels = [{"nodeLabel": RACK}, {"nodeLabel": HOSTNAME}]
    quota = [{"name": "cpu", "nominalQuota": "8"}, {"name": GPU, "nominalQuota": gpus}]
    cq_spec = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "resourceGroups": [
            {"coveredResources": ["cpu", GPU], "flavors": [{"name": name, "resources": quota}]}
        ],
    }
    flavor_spec = {"nodeLabels": POOL, "topologyName": name}
    objects = [
        ("topologies", {"kind": "Topology", "metadata": {"name": name}, "spec": {"levels": levels}}),
        ("resourceflavors", {"kind": "ResourceFlavor", "metadata": {"name": name}, "spec": flavor_spec}),
        ("clusterqueues", {"kind": "ClusterQueue", "metadata": {"name": name}, "spec": cq_spec}),
    ]
    for plural, body in objects:
        await kube.create(api_path(KUEUE, plural), {"apiVersion": KUEUE, **body})
    lq = {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": namespace}}
    await kube.create(api_path(KUEUE, "localqueues", namespace), {**lq, "spec": {"clusterQueue": name}})
    await claim_template(kube, namespace, "one-gpu")
    try:
        yield namespace
    finally:
        await kube.delete(api_path(KUEUE, "localqueues", namespace, "lq"))
        for plural, _ in reversed(objects):
            await kube.delete(api_path(KUEUE, plural, name=name))
