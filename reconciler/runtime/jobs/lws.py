"""LeaderWorkerSets: their groups kept as the jobs of the LeaderWorkerSet integration, and the
writes a group takes (to its pods, not to the set).

`LwsGroups` keeps every LeaderWorkerSet and the pods the LWS controller made for it (labelled
with the set's name) and turns them into one `LwsGroup` job per wanted group, in the store
under `<lws>-<index>`; a group that goes (the set scaled down or deleted) is let go like a
deleted job. `LwsJobs` is the integration's Jobs concern: the decisions are the common ones
(`integrations.decide`); a start ungates each gated pod of the group with its role's flavor, a
stop deletes the group's running pods, the Workload is created in Kueue's shape for a group
(owned by the set, with the group's index), the pods get Kueue's pod-group metadata, and the
Workload of a group the set no longer wants is deleted, as Kueue does on a scale-down.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import msgspec
import structlog

from reconciler.api import Workload
from reconciler.api.lws import LeaderWorkerSet
from reconciler.api.pods import ManagedPod
from reconciler.api.resources import PODS, WORKLOADS
from reconciler.integrations import Start, Step
from reconciler.integrations.lws.group import (
    GROUP_NAME_LABEL,
    LWS_API_VERSION,
    LWS_KIND,
    SET_NAME_LABEL,
    LwsGroup,
    group_workload_shape,
    groups_of,
    pod_defaults,
    workload_name,
)
from reconciler.integrations.lws.sets import (
    LEADER_WORKER_SET,
    group_pods_to_stop,
    group_start_patches,
)
from reconciler.kube import Conflict, NotFound
from reconciler.runtime.jobs.concern import JobKinds, Jobs
from reconciler.runtime.shared.actions import Delete, MergePatch, WriteDone
from reconciler.runtime.shared.context import Context
from reconciler.runtime.shared.store import Key

__all__ = ["LwsGroups", "LwsJobs", "lws_groups"]

log = structlog.get_logger(__name__)


class LwsGroups:
    """The LeaderWorkerSets and their pods, made into groups (the integration's jobs)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.sets: dict[Key, LeaderWorkerSet] = {}
        # (namespace, set name) -> pod name -> pod; pod key -> its set's name.
        self.pods: dict[Key, dict[str, ManagedPod]] = {}
        self._set_of_pod: dict[Key, str] = {}
        self.jobs: LwsJobs | None = None

    def on_set(self, key: Key, lws: LeaderWorkerSet | None) -> None:
        if lws is None:
            self.sets.pop(key, None)
        else:
            self.sets[key] = lws
        self.rebuild(key)

    def on_pod(self, key: Key, pod: ManagedPod | None) -> bool:
        """A pod's event; True when it is (or was) a LeaderWorkerSet's pod."""
        namespace, name = key
        before = self._set_of_pod.pop(key, None)
        if before is not None:
            self.pods.get((namespace, before), {}).pop(name, None)
        owner = None if pod is None else pod.metadata.labels.get(SET_NAME_LABEL)
        if pod is not None and owner:
            self._set_of_pod[key] = owner
            self.pods.setdefault((namespace, owner), {})[name] = pod
        for changed in {before, owner} - {None}:
            self.rebuild((namespace, str(changed)))
        return before is not None or bool(owner)

    def set_of(self, pod_key: Key) -> str | None:
        return self._set_of_pod.get(pod_key)

    def rebuild(self, key: Key) -> None:
        """The set's groups as the store keeps them, from the set and its pods now."""
        namespace, name = key
        ctx = self.ctx
        table = ctx.store.of_kind(LWS_KIND)
        previous = {k for k, g in table.items() if k[0] == namespace and g.lws_name == name}
        lws = self.sets.get(key)
        groups = [] if lws is None else groups_of(lws, self.pods.get(key, {}).values())
        for group in groups:
            group_key = (namespace, group.metadata.name)
            previous.discard(group_key)
            ctx.store.put_job(group_key, group, LWS_KIND)
            ctx.dirty.jobs.add((LWS_KIND, *group_key))
            ctx.dirty.pods.add((LWS_KIND, *group_key))
        for gone_key in previous:
            gone = ctx.store.put_job(gone_key, None, LWS_KIND)
            if gone is not None and self.jobs is not None:
                self.jobs.group_gone(gone, scaled_down=lws is not None)


class LwsJobs(Jobs):
    """The LeaderWorkerSet integration's jobs (its groups), written through their pods."""

    def __init__(self, ctx: Context, groups: LwsGroups, own_namespace: str) -> None:
        super().__init__(ctx, LEADER_WORKER_SET, own_namespace)
        self.groups = groups
        groups.jobs = self
        ctx.events.kinds[LwsGroup] = (LWS_API_VERSION, LWS_KIND)
        # Pod writes in flight, by pod key.
        self._writing: set[Key] = set()

    def reconcile(self, key: Key) -> None:
        group = self.ctx.store.of_kind(LWS_KIND).get(key)
        if group is None:
            return
        if self.integration.framework in self.ctx.config.frameworks and self._managed(
            group.metadata.labels, key[0]
        ):
            for pod in group.pods:
                patch = pod_defaults(group, pod)
                if patch is not None:
                    self._pod_write("pod-group-labels", pod.metadata.namespace, pod.metadata.name, patch)
            self._own_pods(group)
        super().reconcile(key)

    def _own_pods(self, group: LwsGroup) -> None:
        """Kueue's pod-group rule for a group's Workload: every pod of the group (labelled with
        its pod group's name, the Workload's) becomes one of its owners next to the set, the pods
        gained since the last such write in one write, with an Event."""
        ctx = self.ctx
        key = (group.metadata.namespace, workload_name(group.lws_name, group.metadata.uid, group.index))
        workload = ctx.store.workloads.get(key)
        if workload is None or workload.metadata.deletion_timestamp:
            return
        if ctx.workload_writes.in_flight(key, "workload-owners"):
            return
        owned = {ref.uid for ref in workload.metadata.owner_references}
        gained = [
            p
            for p in group.pods
            if p.metadata.labels.get(GROUP_NAME_LABEL) == key[1]
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
            group=(LWS_KIND, group.metadata.namespace, group.metadata.name),
            message=message,
        )
        ctx.write(MergePatch("workload-owners", WORKLOADS, *key, msgspec.json.encode(body), on_done=done))

    def _owners_written(self, done: WriteDone, *, group: tuple[str, str, str], message: str) -> None:
        ctx = self.ctx
        if done.ok and done.body is not None:
            workload = ctx.apply_workload_write(done.key, done.body)
            ctx.dirty.workload(done.key, own_write=True)
            if workload is not None:
                ctx.events.emit(workload, "Normal", "OwnerReferencesAdded", message)
        else:
            ctx.write_failed(done, expected=(NotFound, Conflict))
        ctx.dirty.jobs.add(group)  # pods that came meanwhile are added next

    def _perform(self, job: Any, wl_key: Key, workload: Workload | None, step: Step) -> None:
        if isinstance(step, Start):
            if workload is not None:
                namespace = job.metadata.namespace
                for name, patch in group_start_patches(step.patch.body).items():
                    self._pod_write("job-start", namespace, name, patch)
            return
        super()._perform(job, wl_key, workload, step)

    def _delete_job(self, job: Any, workload: Workload) -> None:
        """Stop a group by deleting its running pods (the LWS controller recreates the group)."""
        names = group_pods_to_stop(self.integration.suspend_patch(job))
        namespace = job.metadata.namespace
        asked = False
        for name in names:
            if (namespace, name) in self._writing:
                continue
            self._writing.add((namespace, name))
            self.ctx.write(Delete("job-delete", PODS, namespace, name, on_done=self._pod_written))
            asked = True
        if asked:
            evicted = any(c.type == "Evicted" and c.status == "True" for c in workload.status.conditions)
            if workload.metadata.deletion_timestamp:
                self.ctx.events.emit(job, "Normal", "Stopped", "Workload is deleted")
            elif not evicted:
                self.ctx.events.emit(job, "Normal", "Stopped", "Not admitted by cluster queue")

    def _pod_write(self, purpose: Any, namespace: str, name: str, patch: bytes) -> None:
        if (namespace, name) in self._writing:
            return
        self._writing.add((namespace, name))
        self.ctx.write(MergePatch(purpose, PODS, namespace, name, patch, on_done=self._pod_written))

    def _pod_written(self, done: WriteDone) -> None:
        self._writing.discard(done.key)
        if done.ok and done.body:
            # The response is the pod's newest state: the group sees it before the watch does.
            self.groups.on_pod(done.key, msgspec.json.decode(done.body, type=ManagedPod))
        elif done.error is not None:
            self.ctx.write_failed(done, expected=(NotFound, Conflict))
            set_name = self.groups.set_of(done.key)
            if set_name is not None:
                self.groups.rebuild((done.key[0], set_name))

    def _shaped(self, job: Any, workload: Workload) -> Workload:
        return group_workload_shape(job, workload)

    def group_gone(self, group: LwsGroup, *, scaled_down: bool) -> None:
        """A group the set no longer has: let go like a deleted job; on a scale-down its
        Workload is deleted (Kueue's), on the set's deletion the owner references take it."""
        self.deleted(group)
        if not scaled_down:
            return
        ctx, namespace = self.ctx, group.metadata.namespace
        name = workload_name(group.lws_name, group.metadata.uid, group.index)
        workload = ctx.store.workloads.get((namespace, name))
        if workload is None or workload.metadata.deletion_timestamp:
            return
        if ctx.workload_writes.in_flight((namespace, name), "delete-workload"):
            return

        def done(result: WriteDone) -> None:
            ctx.write_failed(result, expected=(NotFound,))

        log.info("LeaderWorkerSet scaled down: deleting its group's Workload", workload=f"{namespace}/{name}")
        ctx.write(Delete("delete-workload", WORKLOADS, namespace, name, on_done=done))


def lws_groups(ctx: Context, kinds: JobKinds, own_namespace: str) -> LwsGroups:
    """The sets' groups; with the integration on, its Jobs concern (in `kinds`) is `LwsJobs`."""
    groups = LwsGroups(ctx)
    if LWS_KIND in kinds.by_kind:
        concern = LwsJobs(ctx, groups, own_namespace)
        kinds.by_kind[LWS_KIND] = concern
        kinds.concerns[LWS_KIND] = concern
    return groups
