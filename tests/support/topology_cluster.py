"""The in-memory cluster of the topology-aware scheduling tests: namespace ns, Topology `default`
(rack -> hostname), a TAS flavor `tas` on the pool's nodes, ClusterQueue cq (100 CPUs), LocalQueue
lq, and four ready 4-CPU nodes, n1 and n2 in rack r1, n3 and n4 in r2."""

from __future__ import annotations

from reconciler.api.resources import (
    CLUSTER_QUEUES,
    LOCAL_QUEUES,
    NAMESPACES,
    NODES,
    RESOURCE_FLAVORS,
    TOPOLOGIES,
)
from reconciler.config import Configuration
from tests.support.builders import cluster_queue_body
from tests.support.memory_cluster import CONFIG, Cluster

__all__ = ["GATE", "HOST", "RACK", "RACKS", "tas_cluster"]

RACK, HOST = "cloud.com/topology-rack", "kubernetes.io/hostname"
GATE = "kueue.x-k8s.io/topology"
RACKS = {"n1": "r1", "n2": "r1", "n3": "r2", "n4": "r2"}


def tas_cluster(config: Configuration = CONFIG) -> Cluster:
    c = Cluster(config)
    c.api.add(NAMESPACES, {"metadata": {"name": "ns", "labels": {"kubernetes.io/metadata.name": "ns"}}})
    levels = [{"nodeLabel": RACK}, {"nodeLabel": HOST}]
    c.api.add(TOPOLOGIES, {"metadata": {"name": "default"}, "spec": {"levels": levels}})
    flavor = {"nodeLabels": {"pool": "gpu"}, "topologyName": "default"}
    c.api.add(RESOURCE_FLAVORS, {"metadata": {"name": "tas"}, "spec": flavor})
    c.api.add(CLUSTER_QUEUES, cluster_queue_body("cq", [("tas", {"cpu": 100})]))
    c.api.add(LOCAL_QUEUES, {"metadata": {"name": "lq", "namespace": "ns"}, "spec": {"clusterQueue": "cq"}})
    for name, rack in RACKS.items():
        status = {
            "allocatable": {"cpu": "4", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        }
        labels = {RACK: rack, HOST: name, "pool": "gpu"}
        c.api.add(NODES, {"metadata": {"name": name, "labels": labels}, "status": status})
    c.api.sync()
    c.settle()
    return c
