"""Kueue's ensureOneWorkload for the jobs of one integration: a Workload that no longer matches its
job is deleted (its job stopped first when it runs) or, while it holds no quota and its job is
suspended, updated in place. What is remembered for it: the Workloads this runtime asked the API
to delete, and the jobs it stopped for not matching (only those get their pod templates restored
before the Workload goes, as Kueue's stopJob does; a job suspended by someone else keeps them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from reconciler.api import PodSet, Workload
from reconciler.api.resources import WORKLOADS
from reconciler.kube import Conflict, NotFound
from reconciler.runtime.shared.actions import Delete, MergePatch, Purpose, WriteDone
from reconciler.runtime.shared.context import Context
from reconciler.runtime.shared.store import JobRef, Key

__all__ = ["Mismatches", "update_workload"]


def update_workload(
    ctx: Context,
    job: Any,
    workload: Workload,
    purpose: Purpose,
    patch: object,
    message: str | None,
    look_again: JobRef | None,
) -> None:
    """Patch the job's Workload (`patch`: encoded bytes, or an object to encode); once it lands,
    the cache takes the answer and the job gets Kueue's `UpdatedWorkload` Event unless `message`
    is None (`look_again`: the job reconciled after, either way)."""
    meta = workload.metadata

    def done(result: WriteDone) -> None:
        if result.ok and result.body is not None:
            ctx.apply_workload_write(result.key, result.body)
            ctx.dirty.workload(result.key, own_write=True)
            if message is not None:
                ctx.events.emit(job, "Normal", "UpdatedWorkload", message)
        else:
            ctx.write_failed(result, expected=(NotFound, Conflict))
        if look_again is not None:
            ctx.dirty.jobs.add(look_again)

    body = patch if isinstance(patch, bytes) else msgspec.json.encode(patch)
    ctx.write(MergePatch(purpose, WORKLOADS, meta.namespace, meta.name, body, on_done=done))


class Mismatches:
    def __init__(self, ctx: Context, ref: Callable[[Any], JobRef]) -> None:
        self.ctx = ctx
        self._ref = ref
        # Workloads (by UID) we asked the API to delete because they no longer match their job.
        self._deleted: dict[Key, str] = {}
        # Jobs (by UID) this runtime stopped because their Workload no longer matched them.
        self._stops: dict[Key, str] = {}

    def facts(self, key: Key, job_uid: str, wl_key: Key, workload: Workload | None) -> tuple[bool, bool]:
        """(the Workload is one we asked to delete, we stopped the job for not matching it)."""
        deleted, stops = self._deleted, self._stops
        uid = None if workload is None else workload.metadata.uid
        if deleted and (uid is None or deleted.get(wl_key, uid) != uid):
            deleted.pop(wl_key, None)  # the deleted one is gone
        if stops and workload is None:
            stops.pop(key, None)  # its Workload went: the next one starts afresh
        asked = uid is not None and deleted.get(wl_key) == uid
        return asked, bool(stops) and stops.get(key) == job_uid

    def stopped(self, job: Any) -> None:
        """Our stop of `job` for not matching its Workload was sent."""
        self._stops[(job.metadata.namespace, job.metadata.name)] = job.metadata.uid

    def forget(self, key: Key, wl_key: Key) -> None:
        self._deleted.pop(wl_key, None)
        self._stops.pop(key, None)

    def delete(self, job: Any, workload: Workload) -> None:
        ctx, meta = self.ctx, workload.metadata
        self._deleted[(meta.namespace, meta.name)] = meta.uid

        def done(result: WriteDone) -> None:
            if result.ok:
                message = f"Deleted not matching Workload: {meta.namespace}/{meta.name}"
                ctx.events.emit(job, "Normal", "DeletedWorkload", message)
            else:
                self._deleted.pop((meta.namespace, meta.name), None)
                ctx.write_failed(result, expected=(NotFound,))
            ctx.dirty.jobs.add(self._ref(job))

        ctx.write(Delete("delete-workload", WORKLOADS, meta.namespace, meta.name, on_done=done))

    def update(self, job: Any, workload: Workload, pod_sets: list[PodSet]) -> None:
        meta = workload.metadata
        patch = {"metadata": {"resourceVersion": meta.resource_version}, "spec": {"podSets": pod_sets}}
        message = f"Updated not matching Workload for suspended job: {meta.namespace}/{meta.name}"
        update_workload(self.ctx, job, workload, "workload-update", patch, message, self._ref(job))
