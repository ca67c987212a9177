"""The topology step of an admission in the core: each pod set placed on its TAS flavor's tree in
turn, Workload after Workload on the same trees, with Kueue's flavor-assigner messages."""

from __future__ import annotations

from typing import Any

from reconciler.api import ResourceFlavor, Topology
from reconciler.core.devices.device_cel import compile_device_class
from reconciler.core.topology.admit import PodSetTopology, admit_topology, flavor_trees
from reconciler.core.topology.assignment import decode_assignment
from reconciler.core.topology.domains import HOSTNAME, TopologyNode
from reconciler.core.topology.dra_capacity import free_devices_per_node
from reconciler.core.topology.placement import PodSetPlacement
from reconciler.core.topology.requests import TopologyRequest
from tests.support.builders import decode
from tests.support.device_engine import device_class, node_slice

RACK = "cloud.com/topology-rack"
GPUS = "gpus"
RACKS = {"n1": "r1", "n2": "r1", "n3": "r2", "n4": "r2"}


def flavor(name: str, topology: str | None = "default") -> ResourceFlavor:
    spec: dict[str, Any] = {"nodeLabels": {"pool": "gpu"}}
    if topology is not None:
        spec["topologyName"] = topology
    result: ResourceFlavor = decode({"metadata": {"name": name}, "spec": spec}, ResourceFlavor)
    return result


TOPOLOGY: Topology = decode(
    {"metadata": {"name": "default"}, "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": HOSTNAME}]}},
    Topology,
)
FLAVORS = {"tas": flavor("tas"), "plain": flavor("plain", None), "lost": flavor("lost", "gone")}


def gpu_nodes() -> list[TopologyNode]:
    """Two racks of two nodes, each publishing 2 GPUs through DRA (none in allocatable)."""
    classes = {GPUS: compile_device_class(device_class("gpu", "true"))}
    free = free_devices_per_node([node_slice(n, 2) for n in RACKS], classes, allocated=())
    labels = {n: {RACK: r, HOSTNAME: n, "pool": "gpu"} for n, r in RACKS.items()}
    return [TopologyNode(n, labels[n], {"cpu": 8000, "pods": 110, **free[n]}) for n in RACKS]


def main(count: int, request: TopologyRequest | None, flavor_name: str = "tas") -> PodSetTopology:
    return PodSetTopology("main", flavor_name, request, PodSetPlacement(count=count, per_pod={GPUS: 1}))


def hosts(assignment: Any) -> dict[str, int]:
    placed = decode_assignment(assignment)
    return {d.values[-1]: d.count for d in placed.domains}


def test_workload_after_workload_each_in_one_rack_then_kueues_message() -> None:
    trees = flavor_trees(FLAVORS, {"default": TOPOLOGY}, gpu_nodes())
    assert set(trees) == {"tas"}
    required = TopologyRequest(required=RACK)
    first = admit_topology([main(4, required)], FLAVORS, trees)
    assert isinstance(first, dict)
    assert first["main"].levels == [HOSTNAME]
    assert hosts(first["main"]) == {"n1": 2, "n2": 2}
    second = admit_topology([main(4, required)], FLAVORS, trees)
    assert isinstance(second, dict)
    assert hosts(second["main"]) == {"n3": 2, "n4": 2}
    assert admit_topology([main(4, required)], FLAVORS, trees) == (
        "couldn't assign flavors to pod set main: topology \"default\" doesn't allow to fit any of "
        '4 pod(s). Total nodes: 4; excluded: resource "gpus": 4'
    )


def test_pod_sets_of_one_workload_see_what_the_previous_took() -> None:
    trees = flavor_trees(FLAVORS, {"default": TOPOLOGY}, gpu_nodes())
    leader = PodSetTopology("leader", "tas", TopologyRequest(required=RACK), PodSetPlacement(1, {GPUS: 1}))
    workers = PodSetTopology("workers", "tas", TopologyRequest(required=RACK), PodSetPlacement(4, {GPUS: 1}))
    result = admit_topology([leader, workers], FLAVORS, trees)
    assert isinstance(result, dict)
    assert hosts(result["leader"]) == {"n1": 1}
    assert hosts(result["workers"]) == {"n3": 2, "n4": 2}


def test_a_pod_set_without_a_request_is_placed_unconstrained() -> None:
    trees = flavor_trees(FLAVORS, {"default": TOPOLOGY}, gpu_nodes())
    result = admit_topology([main(3, None)], FLAVORS, trees)
    assert isinstance(result, dict)
    assert sum(hosts(result["main"]).values()) == 3


def test_flavors_that_cannot_place_are_named_as_kueue_names_them() -> None:
    trees = flavor_trees(FLAVORS, {"default": TOPOLOGY}, gpu_nodes())
    rack = TopologyRequest(required=RACK)
    assert admit_topology([main(1, rack, "plain")], FLAVORS, trees) == (
        'couldn\'t assign flavors to pod set main: Flavor "plain" does not support TopologyAwareScheduling'
    )
    assert admit_topology([main(1, rack, "lost")], FLAVORS, trees) == (
        'couldn\'t assign flavors to pod set main: Flavor "lost" information missing in TAS cache'
    )
    assert admit_topology([main(1, TopologyRequest(required="zone"))], FLAVORS, trees) == (
        'couldn\'t assign flavors to pod set main: Flavor "tas" does not contain the requested level'
    )
