"""Queues for one test namespace on the session test-bed: a ResourceFlavor (Tesla T4 nodes), a
ClusterQueue selecting only that namespace, LocalQueue ``lq`` and the ResourceClaimTemplate
``single-gpu``; and taking the cluster-scoped ones away again."""

from __future__ import annotations

from e2e.support.workloads import KUEUE
from e2e.testbed import KubeClient, api_path
from e2e.testbed.scenario import single_gpu_claim_template


async def make_queues(kube: KubeClient, namespace: str, gpus: int = 1) -> str:
    """A flavor, a ClusterQueue for this namespace only, and LocalQueue `lq`; returns the CQ name."""
    cq = f"cq-{namespace}"
    await kube.create(
        api_path(KUEUE, "resourceflavors"),
        {
            "apiVersion": KUEUE,
            "kind": "ResourceFlavor",
            "metadata": {"name": f"t4-{namespace}"},
            "spec": {"nodeLabels": {"nvidia.com/gpu.product": "Tesla-T4"}},
        },
    )
    await kube.create(
        api_path(KUEUE, "clusterqueues"),
        {
            "apiVersion": KUEUE,
            "kind": "ClusterQueue",
            "metadata": {"name": cq},
            "spec": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "nvidia.com/gpu"],
                        "flavors": [
                            {
                                "name": f"t4-{namespace}",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "4"},
                                    {"name": "nvidia.com/gpu", "nominalQuota": gpus},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
    )
    await kube.create(
        api_path(KUEUE, "localqueues", namespace),
        {
            "apiVersion": KUEUE,
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": namespace},
            "spec": {"clusterQueue": cq},
        },
    )
    await kube.create(
        api_path("resource.k8s.io/v1", "resourceclaimtemplates", namespace),
        single_gpu_claim_template(namespace),
    )
    return cq


async def drop_queues(kube: KubeClient, namespace: str) -> None:
    for path in (
        api_path(KUEUE, "clusterqueues", name=f"cq-{namespace}"),
        api_path(KUEUE, "resourceflavors", name=f"t4-{namespace}"),
    ):
        await kube.delete(path)
