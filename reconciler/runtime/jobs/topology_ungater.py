"""Concern: the pods of a batch/v1 Job placed in topology domains, released one by one (Kueue's
topology ungater).

A Job whose Workload was admitted with a ``topologyAssignment`` starts with Kueue's scheduling gate
``kueue.x-k8s.io/topology`` in its pod template (`integrations.decide.pod_set_starts`), so every pod
the job controller creates waits. Whenever a pod of such a Job changes, its live pods (of the
Workload, by the ``kueue.x-k8s.io/workload`` annotation and the pod set label; not terminated) are
matched to the assignment's domains (`core.topology.ungate`) and each gated pod chosen is patched
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
from reconciler.core.topology.ungate import (
    JOB_INDEX_LABEL,
    TOPOLOGY_GATE,
    WORKLOAD_ANNOTATION,
    GatedPod,
    assign_gated_pods,
)
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
    def __init__(self, ctx: Context, kinds: frozenset[str]) -> None:
        """`kinds`: the kinds of job whose pods are placed in topology domains (batch/v1 Job)."""
        self.ctx = ctx
        self.kinds = kinds
        # Pods patched and not yet seen back: (namespace, name) -> the node selector given.
        self._sent: dict[Key, dict[str, str]] = {}
        # The job of each Workload asked about (for the retry timer, keyed by the Workload).
        self._jobs: dict[Key, JobRef] = {}

    def check(self, ref: JobRef, workload_key: Key | None) -> None:
        """A pod of job `ref` changed: release what its Workload's topology assignment allows."""
        if ref[0] not in self.kinds or workload_key is None:
            return
        workload = self.ctx.store.workloads.get(workload_key)
        admission = None if workload is None else workload.status.admission
        if workload is None or admission is None:
            self._jobs.pop(workload_key, None)
            return
        if not any(a.topology_assignment is not None for a in admission.pod_set_assignments):
            self._jobs.pop(workload_key, None)
            return
        self._jobs[workload_key] = ref
        pods = self.ctx.pod_index.pods_of((ref[1], ref[2]), ref[0])
        for pod in pods:
            if not _gated(pod):
                self._sent.pop((pod.metadata.namespace, pod.metadata.name), None)
        for gone in [k for k in self._sent if k not in self.ctx.pod_index.pods]:
            del self._sent[gone]  # deleted while its patch was on its way
        for psa in admission.pod_set_assignments:
            if psa.topology_assignment is None:
                continue
            mine = [p for p in pods if _of(p, workload, psa.name)]
            by_name = {p.metadata.name: p for p in mine}
            gated = [self._view(by_name[name]) for name in sorted(by_name)]
            for name, selector in assign_gated_pods(psa.topology_assignment, gated, by_index=True):
                self._release(by_name[name], selector, workload_key)

    def retry(self, workload_key: Key) -> None:
        """A failed release's timer: look at the Workload's pods again."""
        ref = self._jobs.get(workload_key)
        if ref is not None:
            self.check(ref, workload_key)

    def forget(self, workload_key: Key) -> None:
        self._jobs.pop(workload_key, None)

    def _view(self, pod: Pod) -> GatedPod:
        key = (pod.metadata.namespace, pod.metadata.name)
        sent = self._sent.get(key)
        selector: Mapping[str, str] = pod.spec.node_selector
        if sent is not None:
            selector = {**selector, **sent}
        gated = _gated(pod) and sent is None
        return GatedPod(pod.metadata.name, gated, selector, pod.metadata.labels.get(JOB_INDEX_LABEL))

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
