"""Placing a pod set in a Topology's domains as Kueue v0.18.1's TAS does (required, preferred,
unconstrained), its messages when no domain fits, and the assignment as the admission records it."""

from __future__ import annotations

from collections.abc import Mapping

from reconciler.api import Taint, Toleration
from reconciler.core.topology.assignment import charge, decode_assignment, encode_assignment, node_selector
from reconciler.core.topology.domains import HOSTNAME, TopologyNode, TopologyTree, build_tree
from reconciler.core.topology.placement import DomainCount, NotFit, Placed, PodSetPlacement, place
from reconciler.core.topology.requests import TopologyRequest

GPU = "nvidia.com/gpu"
BLOCK, RACK = "cloud.com/topology-block", "cloud.com/topology-rack"
LEVELS = (BLOCK, RACK, HOSTNAME)


def node(name: str, block: str, rack: str, gpus: int = 2, **extra: object) -> TopologyNode:
    labels = {BLOCK: block, RACK: rack, HOSTNAME: name}
    labels.update({k: str(v) for k, v in extra.pop("labels", {}).items()})  # type: ignore[attr-defined]
    free = {"cpu": 8000, "pods": 110, GPU: gpus}
    return TopologyNode(name, labels, free, **extra)  # type: ignore[arg-type]


def two_racks(gpus: Mapping[str, int] | None = None) -> TopologyTree:
    """Block b1: rack r1 (n1, n2), rack r2 (n3, n4); two GPUs a node unless told."""
    free = {"n1": 2, "n2": 2, "n3": 2, "n4": 2, **(gpus or {})}
    racks = {"n1": "r1", "n2": "r1", "n3": "r2", "n4": "r2"}
    return build_tree("default", LEVELS, [node(n, "b1", racks[n], g) for n, g in free.items()])


def gpus(count: int, **placement: object) -> PodSetPlacement:
    return PodSetPlacement(count=count, per_pod={GPU: 1, "cpu": 100}, **placement)  # type: ignore[arg-type]


def hosts(placed: Placed | NotFit) -> dict[str, int]:
    assert isinstance(placed, Placed), placed
    assert placed.levels == (HOSTNAME,)
    return {d.values[0]: d.count for d in placed.domains}


def test_required_rack_lands_in_one_rack_and_the_next_in_the_other_then_none_fits() -> None:
    tree = two_racks()
    required = TopologyRequest(required=RACK)
    first = place(tree, required, gpus(4))
    assert hosts(first) == {"n1": 2, "n2": 2}
    assert isinstance(first, Placed)
    charge(tree, first, {GPU: 1, "cpu": 100})
    second = place(tree, required, gpus(4))
    assert hosts(second) == {"n3": 2, "n4": 2}
    assert isinstance(second, Placed)
    charge(tree, second, {GPU: 1, "cpu": 100})
    third = place(tree, required, gpus(4))
    assert third == NotFit(
        'topology "default" doesn\'t allow to fit any of 4 pod(s). Total nodes: 4; excluded: '
        'resource "nvidia.com/gpu": 4'
    )


def test_required_takes_the_domain_with_the_fewest_free_places_that_holds_the_pods() -> None:
    tree = two_racks({"n1": 4, "n2": 4, "n3": 2, "n4": 1})
    assert hosts(place(tree, TopologyRequest(required=RACK), gpus(3))) == {"n3": 2, "n4": 1}


def test_required_beyond_every_domain_says_how_many_fit() -> None:
    tree = two_racks()
    assert place(tree, TopologyRequest(required=RACK), gpus(5)) == NotFit(
        'topology "default" allows to fit only 4 out of 5 pod(s)'
    )


def test_preferred_rack_climbs_to_the_block_and_spreads_over_its_racks() -> None:
    tree = two_racks()
    assert hosts(place(tree, TopologyRequest(preferred=RACK), gpus(6))) == {"n1": 2, "n2": 2, "n3": 2}


def test_preferred_over_several_blocks_takes_the_roomiest_first_and_best_fit_last() -> None:
    nodes = [node("a1", "b1", "r1", 3), node("b1", "b2", "r2", 2), node("c1", "b3", "r3", 1)]
    tree = build_tree("default", LEVELS, nodes)
    assert hosts(place(tree, TopologyRequest(preferred=BLOCK), gpus(4))) == {"a1": 3, "c1": 1}


def test_unconstrained_takes_the_least_free_node_that_holds_the_pods() -> None:
    tree = two_racks({"n1": 4, "n2": 3, "n3": 2, "n4": 1})
    assert hosts(place(tree, TopologyRequest(unconstrained=True), gpus(2))) == {"n3": 2}
    assert hosts(place(tree, TopologyRequest(unconstrained=True), gpus(6))) == {"n2": 3, "n3": 2, "n4": 1}


def test_excluded_nodes_are_counted_in_kueues_message() -> None:
    nodes = [
        node("n1", "b1", "r1", labels={"pool": "other"}),
        node("n2", "b1", "r1", labels={"pool": "other"}),
        node("n3", "b1", "r2", taints=(Taint(key="key", value="value", effect="NoSchedule"),)),
        node("n4", "b1", "r2", labels={"pool": "gpu"}, gpus=0),
    ]
    tree = build_tree("default", LEVELS, nodes)
    placed = place(tree, TopologyRequest(required=RACK), gpus(1, node_selector={"pool": "gpu"}))
    assert placed == NotFit(
        'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 4; excluded: '
        'nodeSelector: 2, resource "nvidia.com/gpu": 1, taint "key=value:NoSchedule": 1'
    )
    tolerated = gpus(1, tolerations=(Toleration(key="key", operator="Exists"),))
    assert hosts(place(tree, TopologyRequest(required=RACK), tolerated)) == {"n3": 1}


def test_unknown_level_and_slices_are_named() -> None:
    tree = two_racks()
    assert place(tree, TopologyRequest(required="zone"), gpus(1)) == NotFit(
        "no requested topology level: zone"
    )
    sliced = TopologyRequest(required=BLOCK, slice_level=RACK, slice_size=2)
    assert place(tree, sliced, gpus(4)) == NotFit("podset slice topology is not supported by this controller")


def test_nodes_without_every_level_or_not_ready_or_of_another_flavor_are_left_out() -> None:
    nodes = [
        node("n1", "b1", "r1", labels={"pool": "gpu"}),
        TopologyNode("bare", {HOSTNAME: "bare"}, {GPU: 8, "pods": 10}),
        node("down", "b1", "r1", ready=False),
        node("cordoned", "b1", "r1", unschedulable=True),
        node("elsewhere", "b1", "r1", labels={"pool": "cpu"}),
    ]
    tree = build_tree("default", LEVELS, nodes, flavor_labels={"pool": "gpu"})
    assert [leaf.name for leaf in tree.leaves] == ["n1"]


def test_a_topology_without_hostname_places_on_its_lowest_level_with_all_values() -> None:
    nodes = [node("n1", "b1", "r1"), node("n2", "b1", "r1"), node("n3", "b1", "r2", 1)]
    tree = build_tree("default", (BLOCK, RACK), nodes)
    placed = place(tree, TopologyRequest(required=BLOCK), gpus(5))
    assert placed == Placed((BLOCK, RACK), (DomainCount(("b1", "r1"), 4), DomainCount(("b1", "r2"), 1)))
    assert node_selector(placed.levels, placed.domains[1]) == {BLOCK: "b1", RACK: "r2"}


def test_the_assignment_is_written_as_kueue_writes_it_and_read_back() -> None:
    placed = Placed(
        (HOSTNAME,),
        (DomainCount(("node-1-a",), 2), DomainCount(("node-2-a",), 2), DomainCount(("node-10-a",), 1)),
    )
    encoded = encode_assignment(placed)
    assert encoded.levels == [HOSTNAME]
    (piece,) = encoded.slices
    assert piece.domain_count == 3
    (values,) = piece.values_per_level
    assert values.individual is not None
    assert (values.individual.prefix, values.individual.suffix) == ("node-", "-a")
    assert values.individual.roots == ["1", "2", "10"]
    assert piece.pod_counts.individual == [2, 2, 1]
    assert decode_assignment(encoded) == placed
    same = Placed((RACK, HOSTNAME), (DomainCount(("r1", "n1"), 2), DomainCount(("r1", "n2"), 2)))
    encoded = encode_assignment(same)
    assert encoded.slices[0].values_per_level[0].universal == "r1"
    assert encoded.slices[0].pod_counts.universal == 2
    assert decode_assignment(encoded) == same
