"""Benchmark: topology-aware placement (core only, simulated objects) at 1,000 nodes.

A Topology of block, rack and hostname: 10 blocks of 10 racks of NODES/100 nodes, 8 GPUs a node
(as free DRA devices). Pod sets of 8 one-GPU pods, required: rack (or preferred: block), placed
one after another, each charged before the next, until the racks are full; the tree is built
once. Prints the build time and the placement time per pod set (median, p95); asserts nothing.
Run: .venv/bin/python -m bench.topology [--nodes 1000]
"""

from __future__ import annotations

import argparse
import statistics
import time

from reconciler.core.topology.assignment import charge
from reconciler.core.topology.domains import HOSTNAME, TopologyNode, build_tree
from reconciler.core.topology.placement import Placed, PodSetPlacement, place
from reconciler.core.topology.requests import TopologyRequest

BLOCK, RACK = "cloud.com/topology-block", "cloud.com/topology-rack"
GPUS = "gpus"


def nodes(count: int) -> list[TopologyNode]:
    per_rack = max(count // 100, 1)
    return [
        TopologyNode(
            f"node-{i}",
            {BLOCK: f"b{i // (per_rack * 10)}", RACK: f"r{i // per_rack}", HOSTNAME: f"node-{i}"},
            {"cpu": 64000, "pods": 110, GPUS: 8},
        )
        for i in range(count)
    ]


def run(count: int, request: TopologyRequest, label: str) -> None:
    started = time.perf_counter()
    tree = build_tree("default", (BLOCK, RACK, HOSTNAME), nodes(count))
    built = time.perf_counter() - started
    pod_set = PodSetPlacement(count=8, per_pod={GPUS: 1, "cpu": 1000})
    times: list[float] = []
    while True:
        started = time.perf_counter()
        placed = place(tree, request, pod_set)
        if isinstance(placed, Placed):
            charge(tree, placed, pod_set.per_pod)
        times.append(time.perf_counter() - started)
        if not isinstance(placed, Placed):
            break
    times.sort()
    p95 = times[int(len(times) * 0.95) - 1]
    print(
        f"{count} nodes, {label}: tree built in {built * 1000:.1f} ms; {len(times) - 1} pod sets placed, "
        f"per placement median {statistics.median(times) * 1000:.2f} ms, p95 {p95 * 1000:.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    args = parser.parse_args()
    run(args.nodes, TopologyRequest(required=RACK), "required: rack")
    run(args.nodes, TopologyRequest(preferred=BLOCK), "preferred: block")


if __name__ == "__main__":
    main()
