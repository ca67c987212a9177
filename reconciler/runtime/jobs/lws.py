"""The kinds whose jobs are groups made from a set and its pods (`jobs_from_pods`: a
LeaderWorkerSet's groups, a StatefulSet's pods): their groups kept as the jobs of their
integrations, and the writes a group takes (to its pods, not to the set).

`LwsGroups` keeps every set of such a kind and the pods that are its members (the integration's
`set_of_pod`) and turns them into the jobs the integration's `groups_of` makes, in the store by
their names; a group that goes (the set scaled down or deleted) is let go like a deleted job.
`LwsJobs` is such an integration's Jobs concern: the decisions are the common ones
(`integrations.decide`); a start ungates each gated pod of the group with its pod set's flavor,
a stop marks the group's running pods `TerminationTarget` and deletes them (Kueue's Stop
of a pod group, an Event `Stopped` on each), the Workload is created in Kueue's shape for a group
(`group_workload_shape`), the pods get Kueue's pod-group metadata (`pod_defaults`) and become the
Workload's owners, and the Workload of a group the set no longer wants is deleted, as Kueue does
on a scale-down.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any, cast

import msgspec
import structlog

from reconciler.api import Workload
from reconciler.api.pods import ManagedPod
from reconciler.api.resources import PODS, WORKLOADS
from reconciler.integrations import GroupedSets, Start, Step
from reconciler.integrations.lws.sets import group_pods_to_stop, group_start_patches
from reconciler.integrations.pods.group import termination_patch
from reconciler.kube import Conflict, NotFound
from reconciler.runtime.jobs.concern import JobKinds, Jobs
from reconciler.runtime.shared.actions import Delete, MergePatch, WriteDone
from reconciler.runtime.shared.context import Context
from reconciler.runtime.shared.store import Key

__all__ = ["LwsGroups", "LwsJobs", "lws_groups"]

log = structlog.get_logger(__name__)


@dataclass
class _Sets:
    """The sets of one kind and their member pods."""

    integration: GroupedSets
    sets: dict[Key, Any] = field(default_factory=dict)
    # (namespace, set name) -> pod name -> pod; pod key -> its set's name.
    pods: dict[Key, dict[str, ManagedPod]] = field(default_factory=dict)
    set_of_pod: dict[Key, str] = field(default_factory=dict)
    jobs: LwsJobs | None = None


class LwsGroups:
    """The sets of the kinds whose jobs are made from their pods, made into groups."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.kinds: dict[str, _Sets] = {}

    def add_kind(self, integration: GroupedSets) -> _Sets:
        return self.kinds.setdefault(integration.kind, _Sets(integration))

    def on_set(self, key: Key, obj: Any | None, *, kind: str) -> None:
        sets = self.kinds.get(kind)
        if sets is None:
            return
        if obj is None:
            sets.sets.pop(key, None)
        else:
            sets.sets[key] = obj
        self.rebuild(kind, key)

    def on_pod(self, key: Key, pod: ManagedPod | None) -> bool:
        """A pod's event; True when it is (or was) a member of a set of one of these kinds."""
        namespace, name = key
        member = False
        for kind, sets in self.kinds.items():
            before = sets.set_of_pod.pop(key, None)
            if before is not None:
                sets.pods.get((namespace, before), {}).pop(name, None)
            owner = None if pod is None else sets.integration.set_of_pod(pod)
            if pod is not None and owner:
                sets.set_of_pod[key] = owner
                sets.pods.setdefault((namespace, owner), {})[name] = pod
            for changed in {before, owner} - {None}:
                self.rebuild(kind, (namespace, str(changed)))
            member = member or before is not None or bool(owner)
        return member

    def set_of(self, pod_key: Key) -> tuple[str, str] | None:
        for kind, sets in self.kinds.items():
            name = sets.set_of_pod.get(pod_key)
            if name is not None:
                return kind, name
        return None

    def rebuild(self, kind: str, key: Key) -> None:
        """The set's groups as the store keeps them, from the set and its pods now."""
        namespace, name = key
        ctx, sets = self.ctx, self.kinds[kind]
        table = ctx.store.of_kind(kind)
        previous = {k for k, g in table.items() if k[0] == namespace and g.event_meta.name == name}
        obj = sets.sets.get(key)
        groups = [] if obj is None else sets.integration.groups_of(obj, sets.pods.get(key, {}).values())
        for group in groups:
            ctx.events.kinds.setdefault(type(group), (sets.integration.api_version, kind))
            group_key = (namespace, group.metadata.name)
            previous.discard(group_key)
            ctx.store.put_job(group_key, group, kind)
            ctx.dirty.jobs.add((kind, *group_key))
            ctx.dirty.pods.add((kind, *group_key))
        for gone_key in previous:
            gone = ctx.store.put_job(gone_key, None, kind)
            if gone is not None and sets.jobs is not None:
                sets.jobs.group_gone(gone, scaled_down=obj is not None)


class LwsJobs(Jobs):
    """The jobs (groups) of one such kind, written through their pods."""

    def __init__(self, ctx: Context, groups: LwsGroups, integration: GroupedSets, own_namespace: str) -> None:
        super().__init__(ctx, integration, own_namespace)
        self.sets = integration
        self.groups = groups
        groups.add_kind(integration).jobs = self
        ctx.events.kinds.setdefault(ManagedPod, ("v1", "Pod"))  # Events on the pods it starts
        # Pod writes in flight, by pod key.
        self._writing: set[Key] = set()

    def reconcile(self, key: Key) -> None:
        group = self.ctx.store.of_kind(self.kind).get(key)
        if group is None:
            return
        if self.integration.framework in self.ctx.config.frameworks and self._managed(
            group.event_meta.labels, key[0]
        ):
            for pod in group.pods:
                patch = self.sets.pod_defaults(group, pod)
                if patch is not None:
                    self._pod_write("pod-group-labels", pod.metadata.namespace, pod.metadata.name, patch)
            self._own_pods(group)
        super().reconcile(key)

    def _own_pods(self, group: Any) -> None:
        """Kueue's pod-group rule for a group's Workload: every pod of the group (labelled with
        its pod group's name, the Workload's) becomes one of its owners next to the set, the pods
        gained since the last such write in one write, with an Event."""
        ctx = self.ctx
        key = (group.metadata.namespace, self.sets.group_workload_name(group))
        workload = ctx.store.workloads.get(key)
        if workload is None or workload.metadata.deletion_timestamp:
            return
        if ctx.workload_writes.in_flight(key, "workload-owners"):
            return
        owned = {ref.uid for ref in workload.metadata.owner_references}
        gained = [
            p
            for p in group.pods
            if self.sets.in_group(p, key[1])
            and p.metadata.uid not in owned
            and p.metadata.deletion_timestamp is None
        ]
        if not gained:
            return
        owners = msgspec.to_builtins(workload.metadata.owner_references)
        owners += [
            {"apiVersion": "v1", "kind": "Pod", "name": p.metadata.name, "uid": p.metadata.uid}
            for p in gained
        ]
        body = {
            "metadata": {"ownerReferences": owners, "resourceVersion": workload.metadata.resource_version}
        }
        message = f"Added {len(gained)} owner reference(s)"
        done = partial(
            self._owners_written,
            group=(self.kind, group.metadata.namespace, group.metadata.name),
            message=message,
        )
        ctx.write(MergePatch("workload-owners", WORKLOADS, *key, msgspec.json.encode(body), on_done=done))

    def _owners_written(self, done: WriteDone, *, group: tuple[str, str, str], message: str) -> None:
        ctx = self.ctx
        if done.ok and done.body is not None:
            workload = ctx.apply_workload_write(done.key, done.body)
            ctx.dirty.workload(done.key, own_write=True)
            told = workload or ctx.store.workloads.get(done.key)  # (also when the watch came first)
            if told is not None:
                ctx.events.emit(told, "Normal", "OwnerReferencesAdded", message)
        else:
            ctx.write_failed(done, expected=(NotFound, Conflict))
        ctx.dirty.jobs.add(group)  # pods that came meanwhile are added next

    def _perform(self, job: Any, wl_key: Key, workload: Workload | None, step: Step) -> None:
        if isinstance(step, Start):
            if workload is not None:
                namespace = job.metadata.namespace
                admission = workload.status.admission
                # Kueue's Event on each pod started, as for a pod group's.
                started = f"Admitted by clusterQueue {admission.cluster_queue if admission else ''}"
                for name, patch in group_start_patches(step.patch.body).items():
                    self._pod_write("job-start", namespace, name, patch, started=started)
            return
        super()._perform(job, wl_key, workload, step)

    def _delete_job(self, job: Any, workload: Workload) -> None:
        """Stop a group as Kueue stops a pod group: each running pod gets the condition
        `TerminationTarget=True` (the stop's reason and message), then is deleted, with an Event
        `Stopped` on it (the set's controller makes the pods again, gated)."""
        names = set(group_pods_to_stop(self.integration.suspend_patch(job)))
        reason, message = _stop_reason(workload)
        for pod in job.pods:
            key = (pod.metadata.namespace, pod.metadata.name)
            if pod.metadata.name not in names or key in self._writing:
                continue
            self._writing.add(key)
            body = termination_patch(pod, reason, message, self.ctx.clock())
            done = partial(self._pod_marked, pod=pod, message=message)
            self.ctx.write(MergePatch("job-terminate", PODS, *key, body, subresource="status", on_done=done))

    def _pod_marked(self, done: WriteDone, *, pod: ManagedPod, message: str) -> None:
        if not done.ok:
            self._pod_written(done)  # gone already, or changed meanwhile: looked at again
            return
        on_done = partial(self._pod_stopped, pod=pod, message=message)
        self.ctx.write(Delete("job-delete", PODS, *done.key, on_done=on_done))

    def _pod_stopped(self, done: WriteDone, *, pod: ManagedPod, message: str) -> None:
        self._writing.discard(done.key)
        if done.ok:
            self.ctx.events.emit(pod, "Normal", "Stopped", message)
            return
        self._pod_written(done)

    def _pod_write(self, purpose: Any, namespace: str, name: str, patch: bytes, started: str = "") -> None:
        if (namespace, name) in self._writing:
            return
        self._writing.add((namespace, name))
        done = partial(self._pod_written, started=started)
        self.ctx.write(MergePatch(purpose, PODS, namespace, name, patch, on_done=done))

    def _pod_written(self, done: WriteDone, started: str = "") -> None:
        self._writing.discard(done.key)
        if done.ok and done.body:
            # The response is the pod's newest state: the group sees it before the watch does.
            pod = msgspec.json.decode(done.body, type=ManagedPod)
            if started:
                self.ctx.events.emit(pod, "Normal", "Started", started)
            self.groups.on_pod(done.key, pod)
        elif done.error is not None:
            self.ctx.write_failed(done, expected=(NotFound, Conflict))
            found = self.groups.set_of(done.key)
            if found is not None:
                self.groups.rebuild(found[0], (done.key[0], found[1]))

    def _shaped(self, job: Any, workload: Workload) -> Workload:
        return cast(Workload, self.sets.group_workload_shape(job, workload))

    def group_gone(self, group: Any, *, scaled_down: bool) -> None:
        """A group the set no longer has: let go like a deleted job; on a scale-down its
        Workload is deleted (Kueue's), on the set's deletion the owner references take it."""
        self.deleted(group)
        if not scaled_down:
            return
        ctx, namespace = self.ctx, group.metadata.namespace
        name = self.sets.group_workload_name(group)
        workload = ctx.store.workloads.get((namespace, name))
        if workload is None or workload.metadata.deletion_timestamp:
            return
        if ctx.workload_writes.in_flight((namespace, name), "delete-workload"):
            return

        def done(result: WriteDone) -> None:
            ctx.write_failed(result, expected=(NotFound,))

        log.info(
            "set scaled down: deleting its group's Workload", kind=self.kind, workload=f"{namespace}/{name}"
        )
        ctx.write(Delete("delete-workload", WORKLOADS, namespace, name, on_done=done))


def _stop_reason(workload: Workload) -> tuple[str, str]:
    """Kueue's reason and message for stopping a group's pods: its Workload deleted, evicted
    (`WorkloadEvictedDueTo<the Evicted condition's reason>`, its message), or not admitted."""
    if workload.metadata.deletion_timestamp:
        return "WorkloadDeleted", "Workload is deleted"
    for c in workload.status.conditions:
        if c.type == "Evicted" and c.status == "True":
            return f"WorkloadEvictedDueTo{c.reason}", c.message
    return "NotAdmitted", "Not admitted by cluster queue"


def lws_groups(ctx: Context, kinds: JobKinds, own_namespace: str) -> LwsGroups:
    """The sets' groups; each enabled integration whose jobs are made from a set and its pods
    gets its Jobs concern (in `kinds`) as an `LwsJobs`."""
    groups = LwsGroups(ctx)
    for kind, concern in list(kinds.by_kind.items()):
        integration = concern.integration
        if integration.jobs_from_pods:
            jobs = LwsJobs(ctx, groups, cast(GroupedSets, integration), own_namespace)
            kinds.by_kind[kind] = jobs
            kinds.concerns[kind] = jobs
    return groups
