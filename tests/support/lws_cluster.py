"""LeaderWorkerSets on the in-memory cluster: the Configuration with their framework, and the cluster."""

from __future__ import annotations

from reconciler.config import parse_config
from tests.support.memory_cluster import GPU, Cluster

CONFIG = parse_config(
    {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "integrations": {"frameworks": ["batch/job", "leaderworkerset.x-k8s.io/leaderworkerset"]},
        "resources": {"deviceClassMappings": [{"name": GPU, "deviceClassNames": ["gpu.nvidia.com"]}]},
    }
)


def lws_cluster() -> Cluster:
    """The cluster with the LeaderWorkerSet framework on, its pods' finalizers honoured."""
    return Cluster(CONFIG, finalizers=True)
