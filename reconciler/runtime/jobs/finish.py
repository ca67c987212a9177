"""A job ended: its Workload is declared finished (Succeeded or Failed, with the job's message),
its quota returned once the write lands, and the job gets Kueue's FinishedWorkload Event."""

from __future__ import annotations

import msgspec

from reconciler.api import Workload
from reconciler.core.primitives.priority import priority_class_name
from reconciler.core.status import set_condition
from reconciler.kube import NotFound
from reconciler.runtime.shared.actions import WriteDone
from reconciler.runtime.shared.context import Context
from reconciler.runtime.shared.patches import workload_status_write
from reconciler.runtime.shared.store import JobRef, Key

__all__ = ["JobFinish"]


class JobFinish:
    def __init__(self, ctx: Context, *, only_releases: bool = False) -> None:
        self.ctx = ctx
        # The owner of a Workload whose finish landed is looked at again for what follows it;
        # with `only_releases` (jobs decided by `integrations.decide`, whose one step after a
        # finish is a Release) only when it carries a finalizer to let go of.
        self.only_releases = only_releases

    def finish(self, workload: Workload, succeeded: bool, message: str, *, reason: str = "") -> None:
        ctx = self.ctx
        conditions = set_condition(
            workload.status.conditions,
            "Finished",
            "True",
            reason or ("Succeeded" if succeeded else "Failed"),
            message,
            ctx.clock(),
            workload.metadata.generation or None,
        )
        patch = msgspec.json.encode({"status": {"conditions": msgspec.to_builtins(conditions)}})
        meta = workload.metadata
        ctx.write(workload_status_write("finish", (meta.namespace, meta.name), patch, self._finished))
        # The quota is released when the write lands (or the watch shows it finished), never
        # before: until then the API still counts this workload against the quota. The Event goes
        # on the job, as Kueue's job reconciler records it.
        job = ctx.store.job(ctx.store.owner((meta.namespace, meta.name)))
        ctx.events.emit(
            job if job is not None else workload,
            "Normal",
            "FinishedWorkload",
            f"Workload '{meta.namespace}/{meta.name}' is declared finished",
        )

    def _finished(self, done: WriteDone) -> None:
        ctx = self.ctx
        key = done.key
        if done.superseded and key in ctx.store.workloads:
            owner = ctx.store.owner(key)
            if owner is not None:
                ctx.dirty.jobs.add(owner)  # write it again
            return
        if done.ok and done.body is not None:
            ctx.apply_workload_write(key, done.body)
            ctx.engine.remove_workload(key)
            owner = ctx.store.owner(key)
            if owner is not None and self._follows(owner):
                ctx.dirty.jobs.add(owner)  # what follows a finish (a pod's finalizer goes)
            priority_class = priority_class_name(ctx.store.workloads.get(key))
            ctx.metrics.workload_finished(self._cluster_queue_of(key), priority_class)
        else:
            ctx.write_failed(done, expected=(NotFound,))

    def _follows(self, owner: JobRef) -> bool:
        """Whether a step may follow the finish for its job (a job without a finalizer has none:
        its Workload's event and its own changes bring it back when anything else moves)."""
        if not self.only_releases:
            return True
        integration, job = self.ctx.store.integrations.get(owner[0]), self.ctx.store.job(owner)
        return integration is None or job is None or integration.release_patch(job) is not None

    def _cluster_queue_of(self, key: Key) -> str:
        workload = self.ctx.store.workloads.get(key)
        if workload is None:
            return ""
        if workload.status.admission is not None:
            return workload.status.admission.cluster_queue
        return self.ctx.engine.queues.local_queues.get((key[0], workload.spec.queue_name), "")
