"""Concern: the pods of a job placed in topology domains, released one by one (Kueue's topology
ungater), for the kinds that declare how their pods are numbered (`Integration.topology_placement`:
a batch/v1 Job, a JobSet).

A job whose Workload was admitted with a ``topologyAssignment`` starts with Kueue's scheduling gate
``kueue.x-k8s.io/topology`` in its pod templates (`integrations.decide.pod_set_starts`), so every pod
made for it waits. Whenever a pod of such a job (or of a job it controls: a JobSet's Jobs) changes,
its live pods (of the Workload, by the ``kueue.x-k8s.io/workload`` annotation and the pod set label;
not terminated) are matched to each pod set's domains (`core.topology.ungate`, by the ranks the
kind's labels give) and each gated pod chosen is patched
once: the gate taken out, the domain's node labels merged into its node selector. A patch on its way
counts as done (the pod is not chosen twice, as Kueue's expectations); a failed one is tried again
a second later. Replays are harmless: a pod without the gate is never patched again.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

import msgspec
import structlog

from reconciler.api import Pod, Workload
from reconciler.api.resources import PODS
from reconciler.core.model.jobs import PODSET_LABEL, TERMINATED_PHASES
from reconciler.core.topology.ungate import TOPOLOGY_GATE, WORKLOAD_ANNOTATION, GatedPod, assign_gated_pods
from reconciler.integrations import TopologyPlacement
from reconciler.kube import Conflict, NotFound
from reconciler.runtime.shared.actions import MergePatch, WriteDone
from reconciler.runtime.shared.context import Context

__all__ = ["RETRY_PURPOSE", "TopologyUngater"]

log = structlog.get_logger(__name__)

Key = tuple[str, str]
JobRef = tuple[str, str, str]
# The timer purpose of a failed ungate's retry (keyed by the Workload).
RETRY_PURPOSE = "topology-ungate"
RETRY_SECONDS = 1.0


class TopologyUngater:
    def __init__(self, ctx: Context, placements: Mapping[str, TopologyPlacement]) -> None:
        """`placements`: by kind, how the pods of the jobs placed in topology domains are numbered."""
        self.ctx = ctx
        self.placements = placements
        # Pods patched and not yet seen back: (namespace, name) -> the node selector given.
        self._sent: dict[Key, dict[str, str]] = {}
        # The job of each Workload asked about (for the retry timer, keyed by the Workload).
        self._jobs: dict[Key, JobRef] = {}

    def check(self, ref: JobRef, workload_key: Key | None) -> None:
        """A pod of job `ref` changed: release what its Workload's topology assignment allows."""
        if workload_key is None:
            return
        owner = self.ctx.store.owner(workload_key) or ref  # (the top job: a JobSet, not its Job)
        placement = self.placements.get(owner[0])
        workload = self.ctx.store.workloads.get(workload_key)
        admission = None if workload is None else workload.status.admission
        if (
            placement is None
            or workload is None
            or admission is None
            or not any(a.topology_assignment is not None for a in admission.pod_set_assignments)
        ):
            self._jobs.pop(workload_key, None)
            return
        self._jobs[workload_key] = owner
        pods = self._pods(owner)
        for pod in pods:
            if not _gated(pod):
                self._sent.pop((pod.metadata.namespace, pod.metadata.name), None)
        for gone in [k for k in self._sent if k not in self.ctx.pod_index.pods]:
            del self._sent[gone]  # deleted while its patch was on its way
        job = self.ctx.store.job(owner)
        for psa in admission.pod_set_assignments:
            if psa.topology_assignment is None:
                continue
            mine = [p for p in pods if _of(p, workload, psa.name)]
            by_name = {p.metadata.name: p for p in mine}
            gated = [self._view(by_name[name], placement) for name in sorted(by_name)]
            groups = None if placement.groups is None or job is None else placement.groups(job, psa.name)
            chosen = assign_gated_pods(psa.topology_assignment, gated, by_index=True, groups=groups)
            for name, selector in chosen:
                self._release(by_name[name], selector, workload_key)

    def _pods(self, owner: JobRef) -> list[Pod]:
        """The job's pods and those of the jobs it controls (a JobSet's Jobs)."""
        index = self.ctx.pod_index
        pods = index.pods_of((owner[1], owner[2]), owner[0])
        for child in self.ctx.store.descendants(owner):
            pods += index.pods_of((child[1], child[2]), child[0])
        return pods

    def retry(self, workload_key: Key) -> None:
        """A failed release's timer: look at the Workload's pods again."""
        ref = self._jobs.get(workload_key)
        if ref is not None:
            self.check(ref, workload_key)

    def forget(self, workload_key: Key) -> None:
        self._jobs.pop(workload_key, None)

    def _view(self, pod: Pod, placement: TopologyPlacement) -> GatedPod:
        key = (pod.metadata.namespace, pod.metadata.name)
        sent = self._sent.get(key)
        selector: Mapping[str, str] = pod.spec.node_selector
        if sent is not None:
            selector = {**selector, **sent}
        gated = _gated(pod) and sent is None
        labels = pod.metadata.labels
        group = labels.get(placement.group_label) if placement.group_label else None
        return GatedPod(pod.metadata.name, gated, selector, labels.get(placement.index_label), group)

    def _release(self, pod: Pod, selector: dict[str, str], workload_key: Key) -> None:
        key = (pod.metadata.namespace, pod.metadata.name)
        gates = [{"name": g.name} for g in pod.spec.scheduling_gates if g.name != TOPOLOGY_GATE]
        body = msgspec.json.encode({"spec": {"schedulingGates": gates, "nodeSelector": selector}})
        self._sent[key] = selector
        log.debug("ungating pod", pod=f"{key[0]}/{key[1]}", node_selector=selector)
        done = partial(self._done, workload_key=workload_key)
        self.ctx.write(MergePatch("pod-ungate", PODS, key[0], key[1], body, on_done=done))

    def _done(self, done: WriteDone, *, workload_key: Key) -> None:
        if done.ok:
            return
        self._sent.pop(done.key, None)
        if isinstance(done.error, NotFound):
            return  # the pod is gone: its replacement comes as a new pod
        self.ctx.write_failed(done, expected=(Conflict,))
        self.ctx.timers.set(workload_key, RETRY_PURPOSE, self.ctx.wall() + RETRY_SECONDS)


def _gated(pod: Pod) -> bool:
    return any(g.name == TOPOLOGY_GATE for g in pod.spec.scheduling_gates)


def _of(pod: Pod, workload: Workload, pod_set: str) -> bool:
    meta = pod.metadata
    return (
        meta.annotations.get(WORKLOAD_ANNOTATION) == workload.metadata.name
        and meta.labels.get(PODSET_LABEL) == pod_set
        and pod.status.phase not in TERMINATED_PHASES
    )
