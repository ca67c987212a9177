"""Plain pod groups (framework `pod`): the pods of one group are one job, with one Workload.

Managed pods that name a group are kept here by group (and in the store as a `PodGroup`, kind
`GROUP_KIND`, so the shared parts find the job of the group's Workload). Each pass decides the
group's steps with `integrations.podgroup_plan` and performs them: the Workload created once the
group is complete, its owners and `WaitingForReplacementPods` kept up to date, its pods started,
stopped, released or deleted (`podgroup_writes`), and the Workload finished or deleted. An
evicted group's reservation ends once none of its pods runs (`evictions`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import msgspec
import structlog

from reconciler.api import Workload
from reconciler.api.pods import ManagedPod
from reconciler.api.resources import PODS, WORKLOADS
from reconciler.core.primitives.priority import MissingPriorityClass, resolve_priority_of
from reconciler.integrations import POD, Integration, is_managed, with_implied
from reconciler.integrations.pods.group import GROUP_KIND, POD_GROUP, PodGroup, group_workload, make_group
from reconciler.integrations.pods.group_plan import GroupKnown, GroupPlan, plan_group
from reconciler.integrations.pods.pod import group_name
from reconciler.kube import Conflict, NotFound
from reconciler.runtime.jobs.finish import JobFinish
from reconciler.runtime.jobs.podgroup_writes import GroupPodWrites
from reconciler.runtime.shared.actions import Create, Delete, MergePatch, WriteDone
from reconciler.runtime.shared.context import EXPECTED_MISSES, Context
from reconciler.runtime.shared.events import WORKLOAD_API
from reconciler.runtime.shared.evictions import Evictions
from reconciler.runtime.shared.patches import api_body, workload_status_write
from reconciler.runtime.shared.store import Key
from reconciler.runtime.shared.timers import job_recheck

__all__ = ["GROUP_KIND", "PodGroups", "enable_pod_groups"]

log = structlog.get_logger(__name__)

# A group lacking pods is told so once no pod has joined it for this long. Kueue's pass over
# a group applied in one go (its pods created back to back) finds them all and says nothing;
# a pass on each pod's event here would otherwise warn on the first one.
QUIET_SECONDS = 1.0


def enable_pod_groups(
    ctx: Context, own_namespace: str, integrations: Sequence[Integration]
) -> dict[str, PodGroups]:
    """Pod groups, on with the plain-pod integration (else none): the store knows the group kind,
    a group's Events name its first pod. Returns the concern by the kind it reconciles."""
    if not any(i.resource == PODS for i in integrations):
        return {}
    ctx.store.integrations[GROUP_KIND] = POD_GROUP
    ctx.events.kinds[PodGroup] = ("v1", "Pod")
    return {GROUP_KIND: PodGroups(ctx, own_namespace)}


class PodGroups:
    def __init__(self, ctx: Context, own_namespace: str) -> None:
        self.ctx = ctx
        self.own_namespace = own_namespace
        self.pod_writes = GroupPodWrites(ctx, self._applied)
        self.finishing = JobFinish(ctx)
        self.evictions = Evictions(ctx)
        # Group -> its managed pods by name; pod -> its group.
        self._members: dict[Key, dict[str, ManagedPod]] = {}
        self._group_of: dict[Key, Key] = {}
        # What a group was last told it lacks (told once), and priority problems.
        self._told: dict[Key, str] = {}
        # A group lacking pods: how many it had, and since when (wall seconds).
        self._lacking: dict[Key, tuple[int, float]] = {}
        # Workloads (by UID) we asked the API to delete (they no longer match their group).
        self._deleted: dict[Key, str] = {}

    # --- the group's pods ----------------------------------------------------------------

    def on_pod(self, key: Key, pod: ManagedPod | None, *, ready: bool) -> bool:
        """A pod's watch event (None: gone, or not managed): True when it is, or was, a group's."""
        name = "" if pod is None else group_name(pod.metadata.labels, pod.metadata.annotations)
        if not name and key not in self._group_of:
            return False
        writes = self.ctx.kind_writes[POD.kind]
        if pod is not None and name:
            if not writes.accept_event(key, pod.metadata.resource_version):
                return True  # older than our own write, already applied
            self._put(key, pod, (key[0], name), ready=ready)
        else:
            writes.forget(key)
            self.pod_writes.forget(key)
            self._put(key, None, self._group_of[key], ready=ready)
        return True

    def _applied(self, key: Key, pod: ManagedPod) -> None:
        group = self._group_of.get(key)
        if group is not None:
            self._put(key, pod, group, ready=True)

    def _put(self, key: Key, pod: ManagedPod | None, group: Key, *, ready: bool) -> None:
        previous = self._group_of.pop(key, None)
        if previous is not None and previous != group:
            self._remove(key, previous, ready=ready)
        if pod is None:
            self._remove(key, group, ready=ready)
            return
        self._group_of[key] = group
        self._members.setdefault(group, {})[key[1]] = pod
        self._store(group, ready=ready)

    def _remove(self, key: Key, group: Key, *, ready: bool) -> None:
        members = self._members.get(group, {})
        members.pop(key[1], None)
        if not members:
            self._members.pop(group, None)
            self._lacking.pop(group, None)
            self._told.pop(group, None)
        self._store(group, ready=ready)

    def _store(self, group: Key, *, ready: bool) -> None:
        ctx = self.ctx
        found = make_group(*group, self._members.get(group, {}).values())
        ctx.store.put_job(group, found, GROUP_KIND)
        if not ready:
            return
        ref = (GROUP_KIND, *group)
        ctx.dirty.jobs.add(ref)
        ctx.dirty.pods.add(ref)
        if found is None and group in ctx.store.workloads:
            ctx.dirty.workload(group)  # no pod left: its Workload is an orphan

    # --- the job concern's part ----------------------------------------------------------

    def priority_classes_changed(self) -> None:
        for group, told in self._told.items():
            if told.startswith("priority:"):
                self.ctx.dirty.jobs.add((GROUP_KIND, *group))

    def reconcile(self, key: Key) -> None:
        ctx = self.ctx
        group = ctx.store.of_kind(GROUP_KIND).get(key)
        if group is None or POD.framework not in with_implied(ctx.config.frameworks):
            return
        if not is_managed(
            group.metadata.labels,
            key[0],
            manage_without_queue_name=ctx.config.manage_jobs_without_queue_name,
            own_namespace=self.own_namespace,
            selector=ctx.config.managed_jobs_namespace_selector,
            namespace_labels=ctx.engine.cache.namespaces.get(key[0]),
        ):
            return
        workload = ctx.store.workloads.get(key)
        if workload is None or self._deleted.get(key, workload.metadata.uid) != workload.metadata.uid:
            self._deleted.pop(key, None)  # the one we deleted is gone
        writes = ctx.workload_writes
        known = GroupKnown(
            admitted=ctx.engine.is_admitted(key),
            creating=writes.in_flight(key, "create-workload"),
            admitting=writes.in_flight(key, "admit"),
            finishing=writes.in_flight(key, "finish"),
            deleting=writes.in_flight(key, "delete-workload")
            or (workload is not None and key in self._deleted),
        )
        plan = plan_group(group, workload, known, ctx.engine.flavors, now=ctx.clock())
        self._perform(group, workload, plan)
        if workload is not None and not (known.finishing or known.deleting) and plan.finish is None:
            self.evictions.release_if_stopped(workload, POD_GROUP, group)  # an eviction's second step

    def _perform(self, group: PodGroup, workload: Workload | None, plan: GroupPlan) -> None:
        self._tell(group, plan)
        writes = self.pod_writes
        for pod in plan.finalize:
            writes.release(pod)
        for pod in plan.excess:
            writes.delete_excess(pod)
        if plan.stop is not None:
            for pod in plan.stop.pods:
                writes.stop(pod, plan.stop.reason, plan.stop.message)
        if plan.create is not None:
            self._create_workload(group, *plan.create)
        if workload is None:
            return
        if plan.owners:
            self._add_owners(workload, plan.owners)
        if plan.conditions is not None:
            self._write_conditions(workload, plan.conditions)
        if plan.delete_workload:
            self._delete_workload(workload)
        if plan.finish is not None:
            self.finishing.finish(workload, plan.finish.succeeded, plan.finish.message)
        admission = workload.status.admission
        for pod, start in plan.start:
            writes.start(pod, start, admission.cluster_queue if admission is not None else "")

    def _tell(self, group: PodGroup, plan: GroupPlan) -> None:
        """A group that cannot have its Workload yet says why once (Kueue's Warning
        ErrWorkloadCompose when it lacks pods; otherwise a log line, as Kueue logs it)."""
        key = (group.namespace, group.name)
        if not plan.problem:
            self._lacking.pop(key, None)
            if plan.create is not None:
                self._told.pop(key, None)
            return
        if self._told.get(key) == plan.problem or (plan.tell and not self._quiet(key, len(group.pods))):
            return
        self._told[key] = plan.problem
        log.warning("pod group waits", group=f"{key[0]}/{key[1]}", reason=plan.problem)
        if plan.tell:
            self.ctx.events.emit(group, "Warning", "ErrWorkloadCompose", plan.problem)

    def _quiet(self, key: Key, count: int) -> bool:
        """Whether a group lacking pods has had no pod join it for QUIET_SECONDS; until then a
        deadline brings it back (and a pod joining starts the wait again)."""
        now = self.ctx.wall()
        since = self._lacking.get(key)
        if since is None or since[0] != count:
            since = self._lacking[key] = (count, now)
        due = since[1] + QUIET_SECONDS
        if now >= due:
            return True
        self.ctx.timers.set(key, job_recheck(GROUP_KIND), due)
        return False

    # --- the group's Workload ------------------------------------------------------------

    def _create_workload(self, group: PodGroup, kept: Any, pod_sets: Any) -> None:
        ctx, key = self.ctx, (group.namespace, group.name)
        priority = resolve_priority_of(
            group.metadata.labels,
            [ps.template for ps in pod_sets],
            ctx.store.workload_priority_classes,
            ctx.store.priority_classes,
        )
        if isinstance(priority, MissingPriorityClass):
            told = f"priority:{priority.message}"
            if self._told.get(key) != told:
                self._told[key] = told
                ctx.events.emit(group, "Warning", "PriorityClassNotFound", priority.message)
            return
        body = api_body(group_workload(group, kept, pod_sets, priority), WORKLOAD_API, "Workload")
        ctx.write(Create("create-workload", WORKLOADS, *key, body, on_done=self._workload_created))

    def _workload_created(self, done: WriteDone) -> None:
        ctx = self.ctx
        if done.ok and done.body is not None:
            ctx.apply_workload_write(done.key, done.body)
            group = ctx.store.of_kind(GROUP_KIND).get(done.key)
            if group is not None:
                message = f"Created Workload: {done.key[0]}/{done.key[1]}"
                ctx.events.emit(group, "Normal", "CreatedWorkload", message)
        else:
            ctx.write_failed(done, expected=(Conflict,))
        ctx.dirty.jobs.add((GROUP_KIND, *done.key))

    def _add_owners(self, workload: Workload, pods: list[ManagedPod]) -> None:
        """Kueue's EnsureWorkloadOwnedByAllMembers: the pods it gained become its owners."""
        ctx, meta = self.ctx, workload.metadata
        key = (meta.namespace, meta.name)
        if ctx.workload_writes.in_flight(key, "workload-owners"):
            return
        owners = msgspec.to_builtins(meta.owner_references)
        owners += [
            {"apiVersion": "v1", "kind": "Pod", "name": p.metadata.name, "uid": p.metadata.uid} for p in pods
        ]
        body = {"metadata": {"ownerReferences": owners, "resourceVersion": meta.resource_version}}
        message = f"Added {len(pods)} owner reference(s)"
        done = partial(self._workload_written, event=("OwnerReferencesAdded", message))
        ctx.write(MergePatch("workload-owners", WORKLOADS, *key, msgspec.json.encode(body), on_done=done))

    def _write_conditions(self, workload: Workload, conditions: Any) -> None:
        ctx, meta = self.ctx, workload.metadata
        key = (meta.namespace, meta.name)
        if ctx.workload_writes.in_flight(key, "group-condition"):
            return
        body = {
            "metadata": {"resourceVersion": meta.resource_version},
            "status": {"conditions": msgspec.to_builtins(conditions)},
        }
        patch = msgspec.json.encode(body)
        ctx.write(workload_status_write("group-condition", key, patch, self._workload_written))

    def _workload_written(self, done: WriteDone, *, event: tuple[str, str] | None = None) -> None:
        ctx = self.ctx
        if done.ok and done.body is not None:
            workload = ctx.apply_workload_write(done.key, done.body)
            ctx.dirty.workload(done.key, own_write=True)
            if event is not None:
                # The write landed: told even when the watch showed it first (a stale response).
                told = workload or ctx.store.workloads.get(done.key)
                if told is not None:
                    ctx.events.emit(told, "Normal", *event)
        else:
            ctx.write_failed(done, expected=EXPECTED_MISSES)
        ctx.dirty.jobs.add((GROUP_KIND, *done.key))

    def _delete_workload(self, workload: Workload) -> None:
        """A Workload with no pod of its roles left: deleted (Kueue's ensureOneWorkload)."""
        ctx, meta = self.ctx, workload.metadata
        key = (meta.namespace, meta.name)
        self._deleted[key] = meta.uid

        def done(result: WriteDone) -> None:
            group = ctx.store.of_kind(GROUP_KIND).get(key)
            if result.ok and group is not None:
                message = f"Deleted not matching Workload: {key[0]}/{key[1]}"
                ctx.events.emit(group, "Normal", "DeletedWorkload", message)
            elif not result.ok:
                self._deleted.pop(key, None)
                ctx.write_failed(result, expected=(NotFound,))
            ctx.dirty.jobs.add((GROUP_KIND, *key))

        ctx.write(Delete("delete-workload", WORKLOADS, *key, on_done=done))
