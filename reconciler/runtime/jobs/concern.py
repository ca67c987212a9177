"""The jobs of one integration (any kind in the registry): a Workload for each
queued job, the job suspended until its Workload is admitted, started with its flavors' node
labels, suspended and restored after an eviction (whose reservation ends once the job no longer
runs: `evictions`), and its Workload finished when the job ends.
The steps are decided by `integrations.decide`; nothing here knows a particular kind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

import msgspec
import structlog

from reconciler.api import Workload
from reconciler.api.resources import WORKLOADS
from reconciler.core.model.workloads import QUEUE_NAME_LABEL, with_copied_labels, workload_for_object
from reconciler.core.primitives.priority import (
    PRIORITY_CLASS_LABEL,
    MissingPriorityClass,
    priority_update,
    resolve_priority_of,
)
from reconciler.integrations import (
    CHILD_SUSPENDED,
    Adopt,
    AwaitPrebuilt,
    CreateWorkload,
    DeleteMismatched,
    Finish,
    Integration,
    MatchMemo,
    Nothing,
    Patch,
    Release,
    Restore,
    Start,
    Step,
    Suspend,
    UpdateMismatched,
    controller_parent,
    decide,
    is_managed,
    known_of,
    suspend_child,
    with_implied,
)
from reconciler.integrations.prebuilt import MISSING_WORKLOAD
from reconciler.kube import Conflict, NotFound
from reconciler.runtime.jobs.finish import JobFinish
from reconciler.runtime.jobs.mismatch import Mismatches, update_workload
from reconciler.runtime.jobs.reclaimable import ReclaimablePods
from reconciler.runtime.jobs.references import ReferenceEvents, waits_for_reference
from reconciler.runtime.shared.actions import Create, Delete, MergePatch, WriteDone
from reconciler.runtime.shared.context import Context
from reconciler.runtime.shared.events import WORKLOAD_API
from reconciler.runtime.shared.evictions import Evictions
from reconciler.runtime.shared.patches import api_body, evicting
from reconciler.runtime.shared.store import JobRef, Key

__all__ = ["JobConcern", "JobKinds", "Jobs"]

log = structlog.get_logger(__name__)

JobWrite = Literal["job-start", "job-suspend", "job-restore", "job-clear-start", "job-release"]
_NO_MATCH = "No matching Workload; restoring pod templates according to existent Workload"


class Jobs:
    def __init__(self, ctx: Context, integration: Integration, own_namespace: str = "") -> None:
        self.ctx, self.integration = ctx, integration
        self.kind, self.framework = integration.kind, integration.framework
        # The controller's namespace: its jobs are not managed (as kube-system's).
        self.own_namespace = own_namespace
        # Jobs waiting for a priority class or a referenced object, with what they were told.
        self._unresolved: dict[Key, str] = {}
        # Workloads that no longer match their job (Kueue's ensureOneWorkload).
        self.mismatches = Mismatches(ctx, self._ref)
        self.finishing = JobFinish(ctx, only_releases=True)
        self.evictions, self.reclaimable = Evictions(ctx), ReclaimablePods(ctx)
        # Jobs stopped by deletion (pods), by UID: deleted once.
        self._stopped: dict[Key, str] = {}
        # Jobs that matched their Workload, at which generations (the comparison is skipped until one moves).
        self.matches = MatchMemo()

    def reconcile(self, key: Key) -> None:
        ctx, store = self.ctx, self.ctx.store
        table = store.by_kind.get(self.kind)
        job = None if table is None else table.get(key)
        if job is None or self.framework not in with_implied(ctx.config.frameworks):
            return
        meta = job.metadata
        if meta.deletion_timestamp:
            # Kueue's finalize: a deleted job lets go of its finalizer (its Workload is an orphan).
            release = self.integration.release_patch(job)
            if release is not None and self._write(job, "job-release", release):
                ctx.dirty.workload(store.workload_key(job, self.kind))
            return
        if self._stopped and self._stopped.get(key) == meta.uid:
            return  # deleted at our request: nothing more until the API shows it going
        if meta.owner_references and not self.integration.top_level:
            parent = controller_parent(job, store.integrations)
            if parent is not None and self._child(job, parent[0], parent[1]):
                return
        if not self._managed(meta.labels, key[0]) or waits_for_reference(
            self.integration, job, key, self._unresolved
        ):
            return
        wl_key = store.workload_key(job, self.kind)
        workload = store.workloads.get(wl_key)
        asked_deleted, stopped = self.mismatches.facts(key, meta.uid, wl_key, workload)
        if workload is not None and PRIORITY_CLASS_LABEL in meta.labels:
            self._follow_priority_label(job, workload)
        admitted = ctx.engine.is_admitted(wl_key)
        # Evicted, its job still being stopped: never started again (reservation ends when it stops).
        evicted = (
            admitted and wl_key in ctx.engine.cache.evicting and workload is not None and evicting(workload)
        )
        known = known_of(
            admitted and not evicted,
            ctx.workload_writes.purposes(wl_key),
            deleted=asked_deleted,
            starting=ctx.kind_writes[self.kind].in_flight(key, "job-start"),
            stopping=stopped,
        )
        step = decide(self.integration, job, workload, known, ctx.engine.cache.flavors, self.matches)
        if not isinstance(step, Nothing):
            self._perform(job, wl_key, workload, step)
        elif workload is not None:
            self.reclaimable.follow(self.integration, job, workload)
        if evicted and workload is not None and isinstance(step, (Nothing, Suspend, Restore)):
            self.evictions.release_if_stopped(workload, self.integration, job)

    def _managed(self, labels: dict[str, str], namespace: str) -> bool:
        ctx, config = self.ctx, self.ctx.config
        selector = config.managed_jobs_namespace_selector
        return is_managed(
            labels,
            namespace,
            manage_without_queue_name=config.manage_jobs_without_queue_name,
            own_namespace=self.own_namespace,
            selector=selector,
            namespace_labels=None if selector is None else ctx.engine.cache.namespaces.get(namespace),
        )

    def _child(self, job: Any, parent_kind: Integration, parent_name: str) -> bool:
        """A job controlled by a job of another integration: True when that parent is managed
        (or not known yet), the child then only suspended while its parent is not admitted."""
        ctx, namespace = self.ctx, job.metadata.namespace
        parent = ctx.store.of_kind(parent_kind.kind).get((namespace, parent_name))
        if parent is None:
            return True  # Kueue waits for the owner to be found
        if not self._managed(parent.metadata.labels, namespace):
            return False  # an unmanaged parent: the job stands on its own
        workload = ctx.store.workloads.get(ctx.store.workload_key(parent, parent_kind.kind))
        admitted = workload is not None and any(
            c.type == "Admitted" and c.status == "True" for c in workload.status.conditions
        )
        if suspend_child(self.integration, job, parent_admitted=admitted):
            patch = Patch(self.integration.suspend_patch(job))
            if self._write(job, "job-suspend", patch):
                ctx.events.emit(job, "Normal", "Suspended", CHILD_SUSPENDED)
        return True

    def _perform(self, job: Any, wl_key: Key, workload: Workload | None, step: Step) -> None:
        if isinstance(step, Nothing):
            return
        if isinstance(step, CreateWorkload):
            if step.suspend is not None and self._write(job, "job-suspend", step.suspend):
                queue = job.metadata.labels.get(QUEUE_NAME_LABEL, "")
                self.ctx.events.emit(
                    job, "Normal", "Suspended", f"Suspended until its Workload is admitted by queue {queue}"
                )
            if step.create:
                self._create_workload(job, wl_key)
        elif isinstance(step, AwaitPrebuilt):
            if self._write(job, "job-suspend", step.suspend):
                self.ctx.events.emit(job, "Normal", "Stopped", MISSING_WORKLOAD)
        elif workload is None:
            return
        elif isinstance(step, Adopt):
            # (Kueue's adoption writes no Event.)
            update_workload(self.ctx, job, workload, "workload-owners", step.patch, None, self._ref(job))
        elif isinstance(step, Finish):
            outcome = step.outcome
            self.finishing.finish(workload, outcome.succeeded, outcome.message, reason=outcome.reason)
        elif isinstance(step, Start):
            self._write(job, "job-start", step.patch)
        elif isinstance(step, Suspend):
            if self.integration.stop_deletes:
                self._delete_job(job, workload)
            else:
                self._write(job, "job-suspend", step.patch)
        elif isinstance(step, Release):
            self._write(job, "job-release", step.patch)
        elif isinstance(step, Restore):
            self._write(job, "job-clear-start" if step.patch.subresource else "job-restore", step.patch)
        elif isinstance(step, DeleteMismatched):
            if step.stop is not None and self.integration.stop_deletes:
                self._delete_job(job, workload)
            elif step.stop is not None and self._write(job, "job-suspend", step.stop):
                self.mismatches.stopped(job)
                self.ctx.events.emit(job, "Normal", "Stopped", _NO_MATCH)
            if step.delete:
                self.mismatches.delete(job, workload)
        elif isinstance(step, UpdateMismatched):
            self.mismatches.update(job, workload, step.pod_sets)

    def _create_workload(self, job: Any, wl_key: Key) -> None:
        ctx = self.ctx
        key = (job.metadata.namespace, job.metadata.name)
        integration = self.integration
        pod_sets = integration.pod_sets(job)
        priority = resolve_priority_of(
            job.metadata.labels,
            [ps.template for ps in pod_sets],
            ctx.store.workload_priority_classes,
            ctx.store.priority_classes,
        )
        if isinstance(priority, MissingPriorityClass):
            # Kueue retries without a word; say once which field names what, and how to fix it.
            if self._unresolved.get(key) != priority.message:
                self._unresolved[key] = priority.message
                log.warning(
                    "Workload waits for a priority class", job=f"{key[0]}/{key[1]}", reason=priority.message
                )
                ctx.events.emit(job, "Warning", "PriorityClassNotFound", priority.message)
            return
        self._unresolved.pop(key, None)
        workload = self._shaped(
            job,
            workload_for_object(job.metadata, integration.api_version, integration.kind, pod_sets, priority),
        )
        workload = with_copied_labels(workload, job.metadata.labels, ctx.config.label_keys_to_copy)
        body = api_body(workload, WORKLOAD_API, "Workload")
        ctx.write(Create("create-workload", WORKLOADS, *wl_key, body, on_done=self._workload_created))

    def _shaped(self, job: Any, workload: Workload) -> Workload:
        """The Workload as created for `job` (a kind whose Workloads differ overrides this)."""
        return workload

    def _follow_priority_label(self, job: Any, workload: Workload) -> None:
        """The job's priority-class label changed: the Workload takes the new class's priority."""
        ctx = self.ctx
        update = priority_update(job, workload, ctx.store.workload_priority_classes)
        meta = workload.metadata
        if update is None or ctx.workload_writes.in_flight((meta.namespace, meta.name), "workload-priority"):
            return
        patch = {"spec": {"priority": update.value, "priorityClassRef": msgspec.to_builtins(update.ref)}}
        message = f"Updated workload priority class: {meta.namespace}/{meta.name}"
        update_workload(ctx, job, workload, "workload-priority", patch, message, None)

    def priority_classes_changed(self) -> None:
        """A class appeared or changed: jobs still without a Workload may resolve now."""
        for key in self._unresolved:
            self.ctx.dirty.jobs.add((self.kind, *key))

    def deleted(self, job: Any) -> None:
        """A job is gone: its Workload is let go (or forgotten, if the API never showed it)."""
        self._unresolved.pop((job.metadata.namespace, job.metadata.name), None)
        self._stopped.pop((job.metadata.namespace, job.metadata.name), None)
        self.matches.forget(job.metadata.namespace, job.metadata.name)
        wl_key = self.ctx.store.workload_key(job, self.kind)
        self.mismatches.forget((job.metadata.namespace, job.metadata.name), wl_key)
        if wl_key in self.ctx.store.workloads:
            self.ctx.dirty.workload(wl_key)
        else:
            self.ctx.engine.remove_workload(wl_key)

    # --- writes to the Job --------------------------------------------------------------

    def _delete_job(self, job: Any, workload: Workload) -> None:
        """Stop a job that cannot be suspended (a pod) by deleting it, as Kueue does."""
        key = (job.metadata.namespace, job.metadata.name)
        if job.metadata.deletion_timestamp or self._stopped.get(key) == job.metadata.uid:
            return  # asked for once; the watch shows it being deleted
        self._stopped[key] = job.metadata.uid
        if workload.metadata.deletion_timestamp:
            self.ctx.events.emit(job, "Normal", "Stopped", "Workload is deleted")
        elif not any(c.type == "Evicted" and c.status == "True" for c in workload.status.conditions):
            # (An eviction has its own Stopped Event.)
            self.ctx.events.emit(job, "Normal", "Stopped", "Not admitted by cluster queue")
        self.ctx.write(Delete("job-delete", self.integration.resource, *key, on_done=self._job_written))

    def _write(self, job: Any, purpose: JobWrite, patch: Patch) -> bool:
        """Ask for a start, suspend or restore once; False when it is already asked for."""
        key = (job.metadata.namespace, job.metadata.name)
        if self.ctx.kind_writes[self.kind].in_flight(key, purpose):
            return False  # in flight; its response updates the cached Job
        self.ctx.write(
            MergePatch(
                purpose,
                self.integration.resource,
                *key,
                patch.body,
                subresource="status" if purpose == "job-clear-start" else None,
                slot_name="job",
                on_done=self._job_written,
            )
        )
        return True

    def _job_written(self, done: WriteDone) -> None:
        ctx, action, key, projection = self.ctx, done.action, done.key, self.integration.projection
        applied = ctx.apply_job_write(key, done.body, self.integration) if done.ok and done.body else None
        if done.error is not None or done.superseded:
            ctx.write_failed(done, expected=(NotFound, Conflict))
        elif action.purpose == "job-start" and done.body is not None:
            started = applied if applied is not None else msgspec.json.decode(done.body, type=projection)
            self.matches.started(started.metadata)  # what starting changes is no mismatch
            owned = ctx.store.workloads.get(ctx.store.workload_key(started, self.kind))
            admission = owned.status.admission if owned is not None else None
            cq_name = admission.cluster_queue if admission is not None else ""
            ctx.events.emit(started, "Normal", "Started", f"Admitted by clusterQueue {cq_name}")
        elif action.purpose in ("job-clear-start", "job-suspend", "job-restore"):
            ctx.dirty.jobs.add((self.kind, *key))  # the template can be restored now (or the next step taken)

    def _workload_created(self, done: WriteDone) -> None:
        ctx, key = self.ctx, done.key
        if done.ok and done.body is not None:
            ctx.apply_workload_write(key, done.body)
            job = ctx.store.job(ctx.store.owner(key))
            if job is not None:
                ctx.events.emit(job, "Normal", "CreatedWorkload", f"Created Workload: {key[0]}/{key[1]}")
                ctx.metrics.jobs.workload_created(self.kind, job.metadata, ctx.store.workloads.get(key))
        else:
            ctx.write_failed(done, expected=(Conflict,))

    def _ref(self, job: Any) -> JobRef:
        return (self.kind, job.metadata.namespace, job.metadata.name)


class JobConcern(Protocol):
    """What reconciles the jobs of one kind (`Jobs`; pod groups have their own)."""

    def reconcile(self, key: Key) -> None: ...

    def priority_classes_changed(self) -> None: ...


class JobKinds:
    """The Jobs concern of every enabled integration, and their jobs' watch events (by kind);
    `extra`: the concerns of kinds kept otherwise (pod groups), reconciled and resynced alike."""

    def __init__(
        self,
        ctx: Context,
        integrations: Sequence[Integration],
        own_namespace: str,
        extra: Mapping[str, JobConcern] | None = None,
    ) -> None:
        self.ctx = ctx
        self.by_kind = {i.kind: Jobs(ctx, i, own_namespace) for i in integrations}
        self.concerns: dict[str, JobConcern] = {**self.by_kind, **(extra or {})}
        self.references = ReferenceEvents(ctx, list(integrations))  # the kinds jobs reference
        # A job resource's plural -> its kind.
        self.kind_of = {i.resource.plural: i.kind for i in integrations}

    def reconcile(self, ref: JobRef) -> None:
        self.concerns[ref[0]].reconcile((ref[1], ref[2]))

    def on_job(self, key: Key, job: Any, *, kind: str, ready: bool) -> None:
        """A job's watch event: stored, and (once synced) its Workload and pods looked at again."""
        ctx = self.ctx
        writes = ctx.kind_writes[kind]
        if job is None:
            gone = ctx.store.put_job(key, None, kind)
            writes.forget(key)
            if gone is not None and ready:
                self.by_kind[kind].deleted(gone)
            return
        if not writes.accept_event(key, job.metadata.resource_version):
            return  # older than our own write, already applied
        ctx.store.put_job(key, job, kind)
        if ready:
            ref: JobRef = (kind, key[0], key[1])
            ctx.dirty.pods.add(ref)
            ctx.dirty.jobs.add(ref)

    def relisted(self, plural: str) -> None:
        kind = self.kind_of.get(plural)
        if kind is not None:
            self.ctx.kind_writes[kind].relisted()

    def resync(self, plural: str, *, all_kinds: bool) -> None:
        """Every job of the kind listed as `plural` (of every kind with `all_kinds`) is marked."""
        kinds = self.concerns if all_kinds else [self.kind_of[plural]] if plural in self.kind_of else []
        store = self.ctx.store
        for kind in kinds:
            self.ctx.dirty.jobs.update((kind, *key) for key in store.of_kind(kind))

    def namespace_changed(self, namespace: str) -> None:
        """A Namespace's labels changed: under a managedJobsNamespaceSelector its jobs may move in
        or out of management."""
        if self.ctx.config.managed_jobs_namespace_selector is None:
            return
        for kind in self.concerns:
            refs = (key for key in self.ctx.store.of_kind(kind) if key[0] == namespace)
            self.ctx.dirty.jobs.update((kind, *key) for key in refs)

    def priority_classes_changed(self) -> None:
        for jobs in self.concerns.values():
            jobs.priority_classes_changed()

    def follow_labels(self) -> None:
        """Jobs naming a WorkloadPriorityClass may follow it now (Kueue re-reads the label on reconcile)."""
        store = self.ctx.store
        for kind in self.concerns:
            for key, job in store.of_kind(kind).items():
                if PRIORITY_CLASS_LABEL in job.metadata.labels:
                    self.ctx.dirty.jobs.add((kind, *key))
