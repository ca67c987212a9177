"""A merge patch of a job's Workload written on the job's behalf (its pod sets replaced, its
prebuilt Workload adopted): once it lands the cache takes the answer, and the job is looked at
again either way."""

from __future__ import annotations

from typing import Any

import msgspec

from reconciler.api import Workload
from reconciler.api.resources import WORKLOADS
from reconciler.kube import Conflict, NotFound
from reconciler.runtime.shared.actions import MergePatch, Purpose, WriteDone
from reconciler.runtime.shared.context import Context
from reconciler.runtime.shared.store import JobRef

__all__ = ["patch_workload"]


def patch_workload(
    ctx: Context,
    job: Any,
    workload: Workload,
    purpose: Purpose,
    patch: object,
    message: str | None,
    *,
    look_again: JobRef | None,
) -> None:
    """Patch the job's Workload (`patch`: encoded bytes, or an object to encode); once it lands
    the job gets Kueue's `UpdatedWorkload` Event with `message` unless it is None (`look_again`:
    the job reconciled after, whatever the answer)."""
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
