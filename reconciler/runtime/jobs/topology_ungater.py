"""Concern: the pods of a job placed in topology domains, released one by one (Kueue's topology
ungater), for the kinds that declare how their pods are numbered (`Integration.topology_placement`:
a batch/v1 Job, a JobSet).

A job whose Workload was admitted with a ``topologyAssignment`` starts with Kueue's scheduling gate
``kueue.x-k8s.io/topology`` in its pod templates (`integrations.decide.pod_set_starts`), so every pod
made for it waits. Every pod naming a Workload in its ``kueue.x-k8s.io/workload`` annotation is
kept by that Workload (as Kueue lists them: a JobSet's pods, made by its Jobs, are found whether or
not the batch/job framework is on); after each batch of events, the live pods (not terminated) of
each Workload whose pods changed are matched to each pod set's domains (`core.topology.ungate`, by
the ranks the kind's labels give) and each gated pod chosen is patched once: the gate taken out,
the domain's node labels merged into its node selector. A patch on its way counts as done (the pod
is not chosen twice, as Kueue's expectations); a failed one is tried again a second later.
Replays are harmless: a pod without the gate is never patched again.
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
        # Every pod naming a Workload in its annotation, by the Workload (Kueue lists them so: a
        # JobSet's pods are its Jobs', whichever frameworks are on).
        self._pods: dict[Key, Pod] = {}
        self._by_workload: dict[Key, set[str]] = {}
        # Workloads whose pods changed since the last flush.
        self._dirty: set[Key] = set()

    def pod(self, key: Key, pod: Pod | None) -> None:
        """Any pod came, changed or went: kept by the Workload its annotation names."""
        old = self._pods.pop(key, None)
        if old is not None:
            self._unindex(key, old)
        name = None if pod is None else pod.metadata.annotations.get(WORKLOAD_ANNOTATION)
        if pod is not None and name:
            self._pods[key] = pod
            self._by_workload.setdefault((key[0], name), set()).add(key[1])
            self._dirty.add((key[0], name))
        elif key in self._sent:
            del self._sent[key]  # deleted (or no longer ours) while its patch was on its way

    def _unindex(self, key: Key, pod: Pod) -> None:
        workload_key = (key[0], pod.metadata.annotations.get(WORKLOAD_ANNOTATION, ""))
        names = self._by_workload.get(workload_key)
        if names is not None:
            names.discard(key[1])
            if not names:
                del self._by_workload[workload_key]
        self._dirty.add(workload_key)

    def flush(self) -> None:
        """Release what the topology assignments allow for the Workloads whose pods changed."""
        dirty, self._dirty = self._dirty, set()
        for workload_key in sorted(dirty):
            self.check(workload_key)

    def check(self, workload_key: Key) -> None:
        """Release the Workload's gated pods its topology assignment allows."""
        owner = self.ctx.store.owner(workload_key)  # (the top job: a JobSet, not its Job)
        placement = None if owner is None else self.placements.get(owner[0])
        workload = self.ctx.store.workloads.get(workload_key)
        admission = None if workload is None else workload.status.admission
        if (
            owner is None
            or placement is None
            or workload is None
            or admission is None
            or not any(a.topology_assignment is not None for a in admission.pod_set_assignments)
        ):
            return
        pods = [
            self._pods[(workload_key[0], name)] for name in sorted(self._by_workload.get(workload_key, ()))
        ]
        for pod in pods:
            if not _gated(pod):
                self._sent.pop((pod.metadata.namespace, pod.metadata.name), None)
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

    def retry(self, workload_key: Key) -> None:
        """A failed release's timer: look at the Workload's pods again."""
        self.check(workload_key)

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
