"""Simulated Nodes: create them from the spec, keep them Ready and their Leases fresh.

kube-controller-manager runs without node-lifecycle-controller, so nobody else
removes the ``node.kubernetes.io/not-ready`` taint that admission puts on new
Nodes; the simulator removes it once the node reports Ready.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging

import aiohttp

from e2e.testbed.kubeclient import MERGE_PATCH, ApiError, KubeClient, Obj, api_path
from e2e.testbed.names import NODE_FIELD_MANAGER, SIMULATED_NODE_LABEL
from e2e.testbed.spec import NodeSpec, TestbedSpec
from e2e.testbed.timeutil import micro_time, rfc3339

log = logging.getLogger(__name__)
LEASE_SECONDS = 40
_STARTUP_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def node_ip(index: int) -> str:
    return f"172.30.{index // 250}.{index % 250 + 2}"


def _node_object(node: NodeSpec) -> Obj:
    labels = {
        "kubernetes.io/hostname": node.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        SIMULATED_NODE_LABEL: "true",
        **node.labels,
    }
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node.name, "labels": labels}}


def _node_status(node: NodeSpec, ip: str, kubelet_version: str, since: str) -> Obj:
    stamp = rfc3339()
    resources = {
        "cpu": node.cpu,
        "memory": node.memory,
        "pods": str(node.pods),
        "ephemeral-storage": "100Gi",
        **node.extended_resources,
    }

    def condition(kind: str, status: str, reason: str, message: str) -> Obj:
        return {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": since,
        }

    ident = hashlib.sha256(node.name.encode()).hexdigest()
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node.name},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [
                condition(
                    "MemoryPressure",
                    "False",
                    "KubeletHasSufficientMemory",
                    "kubelet has sufficient memory available",
                ),
                condition(
                    "DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"
                ),
                condition(
                    "PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"
                ),
                condition("Ready", "True", "KubeletReady", "simulated kubelet is posting ready"),
            ],
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": node.name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": ident[:32],
                "systemUUID": ident[32:64],
                "bootID": ident[:32],
                "kernelVersion": "6.1.0-testbed",
                "osImage": "dra-quota-testbed simulated node",
                "containerRuntimeVersion": "containerd://2.0.0",
                "kubeletVersion": kubelet_version,
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def _lease(node_name: str, node_uid: str) -> Obj:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": node_name,
            "namespace": "kube-node-lease",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_uid}],
        },
        "spec": {
            "holderIdentity": node_name,
            "leaseDurationSeconds": LEASE_SECONDS,
            "renewTime": micro_time(),
        },
    }


class NodeSimulator:
    def __init__(self, kube: KubeClient, spec: TestbedSpec, kubelet_version: str) -> None:
        self._kube = kube
        self._spec = spec
        self._kubelet_version = kubelet_version
        self.node_ips = {n.name: node_ip(i) for i, n in enumerate(spec.nodes)}
        self._uids: dict[str, str] = {}
        self._since = rfc3339()

    async def ensure_nodes(self) -> None:
        """Create or update every node, make it Ready, and delete simulated nodes not in spec."""
        for node in self._spec.nodes:
            created = await self._kube.apply(
                api_path("v1", "nodes", name=node.name), _node_object(node), NODE_FIELD_MANAGER
            )
            self._uids[node.name] = created["metadata"]["uid"]
            await self._report_status(node)
            await self._renew_lease(node.name)
        wanted = {n.name for n in self._spec.nodes}
        existing, _ = await self._kube.list_all(
            api_path("v1", "nodes"), {"labelSelector": f"{SIMULATED_NODE_LABEL}=true"}
        )
        for item in existing:
            name = item["metadata"]["name"]
            if name not in wanted:
                log.info("deleting simulated node %s (not in the spec)", name)
                try:
                    await self._kube.delete(api_path("v1", "nodes", name=name))
                except ApiError as err:
                    if err.status != 404:
                        raise

    async def _report_status(self, node: NodeSpec) -> None:
        path = api_path("v1", "nodes", name=node.name, subresource="status")
        updated = await self._kube.apply(
            path,
            _node_status(node, self.node_ips[node.name], self._kubelet_version, self._since),
            NODE_FIELD_MANAGER,
        )
        taints = updated.get("spec", {}).get("taints") or []
        kept = [t for t in taints if t.get("key") not in _STARTUP_TAINTS]
        if len(kept) != len(taints):
            await self._kube.patch(
                api_path("v1", "nodes", name=node.name),
                {
                    "metadata": {"resourceVersion": updated["metadata"]["resourceVersion"]},
                    "spec": {"taints": kept or None},
                },
                MERGE_PATCH,
            )

    async def _renew_lease(self, node_name: str) -> None:
        path = api_path("coordination.k8s.io/v1", "leases", "kube-node-lease", node_name)
        await self._kube.apply(path, _lease(node_name, self._uids[node_name]), NODE_FIELD_MANAGER)

    async def heartbeat_forever(self, lease_interval: float = 10.0, status_every: int = 3) -> None:
        """Renew leases every ``lease_interval`` s and node status every few beats.

        A node that disappeared (deleted by hand) is created again.
        """
        beat = 0
        while True:
            await asyncio.sleep(lease_interval)
            beat += 1
            try:
                if beat % status_every == 0:
                    await self.ensure_nodes()
                else:
                    for node in self._spec.nodes:
                        await self._renew_lease(node.name)
            except (ApiError, aiohttp.ClientError, OSError, TimeoutError) as err:
                log.warning("node heartbeat failed: %s", err)
