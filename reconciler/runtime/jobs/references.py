"""The kinds jobs reference (a TrainJob's runtimes): their watch events kept in the store, the
referring jobs resolved again and looked at; a job whose reference is missing waits, told once."""

from __future__ import annotations

from functools import partial
from typing import Any

import structlog

from reconciler.integrations import Integration, ReadsReferences, references_of
from reconciler.runtime.shared.context import Context
from reconciler.runtime.shared.store import Key

__all__ = ["ReferenceEvents", "waits_for_reference"]

log = structlog.get_logger("reconciler.jobs")


class ReferenceEvents:
    """One handler attribute per referenced resource plural (the watch table names
    `job_kinds.references.<plural>`)."""

    def __init__(self, ctx: Context, integrations: list[Integration]) -> None:
        self._ctx = ctx
        for reference in (r for i in integrations for r in references_of(i)):
            plural = reference.resource.plural
            setattr(self, plural, partial(self.on_reference, plural=plural))

    def on_reference(self, key: Key, obj: Any | None, *, plural: str) -> None:
        refs = self._ctx.store.put_reference(plural, key, obj)
        self._ctx.dirty.jobs.update(refs)


def waits_for_reference(integration: Integration, job: Any, key: Key, told: dict[Key, str]) -> bool:
    """Whether the job cannot be given a Workload until what it references is known (Kueue's
    reconcile fails and is retried); the reason is logged once per job."""
    if not isinstance(integration, ReadsReferences):
        return False
    why = integration.unresolved(job)
    if why is None:
        return False
    if told.get(key) != why:
        told[key] = why
        log.warning("job waits for what it references", job=f"{key[0]}/{key[1]}", reason=why)
    return True
