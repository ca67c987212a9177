"""Letting go of Workloads whose Job is gone (or that are being deleted): an orphan still
holding quota is finished (OwnerNotFound), as Kueue does, and the in-use finalizer is released."""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from reconciler.api import Workload
from reconciler.api.resources import WORKLOADS
from reconciler.core.model.workloads import RESOURCE_IN_USE_FINALIZER
from reconciler.core.status import set_condition
from reconciler.runtime.shared.actions import MergePatch, WriteDone
from reconciler.runtime.shared.context import EXPECTED_MISSES, Context
from reconciler.runtime.shared.patches import workload_status_write
from reconciler.runtime.shared.store import Key

__all__ = ["Orphans"]


class Orphans:
    def __init__(self, ctx: Context, forget: Callable[[Key], None]) -> None:
        self.ctx = ctx
        # Drops a workload from the core and from what was fed to it.
        self._forget = forget

    def finish(self, workload: Workload) -> None:
        """Finished=True OwnerNotFound: its quota returns once the write lands."""
        meta = workload.metadata
        key = (meta.namespace, meta.name)
        if self.ctx.workload_writes.in_flight(key, "finish"):
            return
        conditions = set_condition(
            workload.status.conditions,
            "Finished",
            "True",
            "OwnerNotFound",
            "The workload's owner no longer exists",
            self.ctx.clock(),
            meta.generation or None,
        )
        self.ctx.write(
            workload_status_write(
                "finish",
                (meta.namespace, meta.name),
                msgspec.json.encode({"status": {"conditions": msgspec.to_builtins(conditions)}}),
                self._finished,
            )
        )

    def _finished(self, done: WriteDone) -> None:
        if done.ok and done.body is not None:
            self.ctx.apply_workload_write(done.key, done.body)
            self._forget(done.key)  # finished: its quota is free
        else:
            self.ctx.write_failed(done, expected=EXPECTED_MISSES)

    def release_finalizer(self, workload: Workload) -> None:
        meta = workload.metadata
        if RESOURCE_IN_USE_FINALIZER not in meta.finalizers:
            return
        rest = [f for f in meta.finalizers if f != RESOURCE_IN_USE_FINALIZER]
        # The patch carries the resourceVersion; a conflict retries on the next event.
        patch = msgspec.json.encode(
            {"metadata": {"finalizers": rest, "resourceVersion": meta.resource_version}}
        )
        self.ctx.write(
            MergePatch(
                "release-finalizer",
                WORKLOADS,
                meta.namespace,
                meta.name,
                patch,
                on_done=lambda done: self.ctx.write_failed(done, expected=EXPECTED_MISSES),
            )
        )
