"""The reconciler's Node, Pod and ResourceClaim events (a part of `Reconciler`): nodes to the
device inventory and to topology-aware scheduling; every pod to the nodes' usage, a started job's
pod (its pod set label) also to the pod index; claims to the pod index and the inventory."""

from __future__ import annotations

from typing import Any

from reconciler.api import Pod
from reconciler.api.slices import Node
from reconciler.core.model.jobs import PODSET_LABEL
from reconciler.core.primitives.podstatus import controller_of
from reconciler.runtime.jobs.topology_ungater import TopologyUngater
from reconciler.runtime.queues.inventory import Inventory
from reconciler.runtime.queues.topology import TopologyFeed
from reconciler.runtime.shared.context import Context
from reconciler.runtime.shared.store import Key
from reconciler.runtime.workloads.concern import Workloads

__all__ = ["PodEvents"]


class PodEvents:
    ctx: Context
    inventory: Inventory
    topology: TopologyFeed
    ungater: TopologyUngater
    workload_sync: Workloads
    ready: bool

    def _on_node(self, key: Key, node: Node | None) -> None:
        self.inventory.node(key, node)
        self.topology.node(key, node)

    def _on_any_pod(self, key: Key, pod: Pod | None) -> None:
        """Any pod: to the nodes' usage and the topology ungater; a started job's pod (its pod set
        label, or a managed job's controller reference) also indexed."""
        self.topology.pod(key, pod)
        self.ungater.pod(key, pod)
        started = pod is not None and (PODSET_LABEL in pod.metadata.labels or self.of_managed_job(pod))
        if started or key in self.ctx.pod_index.pods:
            self.on_pod(key, pod if started else None)

    def of_managed_job(self, pod: Pod) -> bool:
        """A pod without the pod set label whose controller is a job this controller manages (it
        counts against the job's charge all the same)."""
        owner = controller_of(pod, self.ctx.pod_index.kinds)
        return (
            owner is not None and self.ctx.store.job((owner[0], pod.metadata.namespace, owner[1])) is not None
        )

    def on_pod(self, key: Key, pod: Any) -> None:
        """A started job's pod came, changed or went."""
        job = self.ctx.pod_index.on_pod_ref(key, pod)
        self.inventory.pod(key)
        if job is not None:
            self.ctx.dirty.pods.add(job)

    def _on_claim(self, key: Key, claim: Any) -> None:
        previous = self.ctx.pod_index.claims.get(key)
        job = self.ctx.pod_index.on_claim_ref(key, claim)
        self.inventory.claim(key, claim)
        if job is not None:
            self.ctx.dirty.pods.add(job)
        # A pre-created (shared) claim appeared or went: waiting workloads are charged again. Its
        # spec is immutable, so its status updates change nothing.
        shared = claim if claim is not None else previous
        if (
            self.ready
            and (claim is None) != (previous is None)
            and shared is not None
            and not any(r.kind == "Pod" for r in shared.metadata.owner_references)
        ):
            self.workload_sync.shared_claim_changed(key[0])
