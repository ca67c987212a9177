"""The nodes as topology-aware scheduling sees them (Kueue's TAS node and non-TAS usage caches): a
node's allocatable less what its bound, live, non-TAS pods request (and one pod each); TAS pods
are charged from their Workloads' assignments instead, their claims' devices counted free."""

from __future__ import annotations

from typing import Any

import msgspec

from reconciler.api import Pod, ResourceClaim
from reconciler.api.slices import Node
from reconciler.core.devices.inventory import InventoryIndex
from reconciler.feed.topology import NodeUsage, free_devices
from tests.support.device_engine import DRIVER, device_class, node_slice

RACK = "rack"


def node(name: str, *, ready: bool = True, **spec: Any) -> Node:
    body = {
        "metadata": {"name": name, "labels": {RACK: "r1"}},
        "spec": spec,
        "status": {
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }
    return msgspec.convert(body, Node)


def pod(name: str, node_name: str = "n1", cpu: str = "1", phase: str = "Running", **annotations: str) -> Pod:
    body = {
        "metadata": {"name": name, "namespace": "ns", "annotations": annotations},
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
        },
        "status": {"phase": phase},
    }
    return msgspec.convert(body, Pod)


def test_bound_live_non_tas_pods_take_their_requests_off_their_node() -> None:
    usage = NodeUsage()
    assert usage.set_node("n1", node("n1"))
    assert not usage.set_node("n1", node("n1"))  # the same node again: nothing moved
    assert usage.set_pod(("ns", "a"), pod("a", cpu="1500m"))
    assert usage.set_pod(("ns", "b"), pod("b", node_name="")) is False  # not bound: not counted
    assert usage.set_pod(("ns", "t"), pod("t", **{"kueue.x-k8s.io/podset-required-topology": RACK}))
    assert usage.set_pod(("ns", "d"), pod("d", phase="Succeeded")) is False
    (seen,) = usage.topology_nodes()
    assert seen.free == {"cpu": 2500, "memory": 8 * 1024**3, "pods": 109}
    assert usage.tas_pods == {("ns", "t")}
    assert usage.set_pod(("ns", "a"), pod("a", phase="Failed"))  # ended: its requests come back
    assert usage.set_pod(("ns", "t"), None)
    (seen,) = usage.topology_nodes()
    assert seen.free == {"cpu": 4000, "memory": 8 * 1024**3, "pods": 110}
    assert usage.tas_pods == set()


def test_readiness_schedulability_and_taints_are_passed_on() -> None:
    usage = NodeUsage()
    usage.set_node("n1", node("n1", ready=False))
    assert usage.set_node("n2", node("n2", unschedulable=True, taints=[{"key": "k", "effect": "NoSchedule"}]))
    first, second = usage.topology_nodes()
    assert (first.ready, first.unschedulable) == (False, False)
    assert (second.ready, second.unschedulable) == (True, True)
    assert [t.key for t in second.taints] == ["k"]
    assert usage.set_node("n1", None)
    assert [n.name for n in usage.topology_nodes()] == ["n2"]


def test_free_devices_count_a_tas_pods_claims_free_and_others_allocated() -> None:
    index = InventoryIndex()
    index.set_class("gpu", device_class("gpu", f"device.driver == '{DRIVER}'"))
    index.set_slice("n1", node_slice("n1", 3))
    for name, owner, device in (("c-tas", "tas-pod", "gpu-0"), ("c-other", "other-pod", "gpu-1")):
        claim = {
            "metadata": {
                "name": name,
                "namespace": "ns",
                "ownerReferences": [{"kind": "Pod", "name": owner}],
            },
            "status": {
                "allocation": {"devices": {"results": [{"driver": DRIVER, "pool": "n1", "device": device}]}}
            },
        }
        index.set_claim(("ns", name), msgspec.convert(claim, ResourceClaim))
    free = free_devices(index, {"gpu": "nvidia.com/gpu"}, {("ns", "tas-pod")})
    assert free == {"n1": {"nvidia.com/gpu": 2}}
    usage = NodeUsage()
    usage.set_node("n1", node("n1"))
    (seen,) = usage.topology_nodes(free)
    assert seen.free["nvidia.com/gpu"] == 2
