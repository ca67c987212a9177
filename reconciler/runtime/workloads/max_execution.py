"""The maximum execution time of admitted Workloads (`spec.maximumExecutionTimeSeconds`), enforced
as Kueue v0.18.1 does: a timer per admitted Workload with a maximum, at the Admitted condition's
transition time plus what is left after `status.accumulatedPastExecutionTimeSeconds` (so a
restarted controller keeps the deadline). When it passes: DeactivationTarget=True, reason
`MaximumExecutionTimeExceeded`, with the accumulated time cleared, and a Warning Event; then
`spec.active: false`. The eviction follows from there, as for any deactivated Workload (the
PodsReady part's `refresh`), with the target's reason and message.

The timer fires as a dirty mark of the Workload (the loop's default for a timer), which brings it
back here through the Workload concern's `sync`.
"""

from __future__ import annotations

import msgspec
import structlog

from reconciler.api import Workload
from reconciler.api.resources import WORKLOADS
from reconciler.core.scheduling.max_execution import (
    DEACTIVATION_TARGET,
    MAXIMUM_EXECUTION_TIME_EXCEEDED,
    TARGET_MESSAGE,
    exceeded_message,
    execution_deadline,
)
from reconciler.core.status import set_condition
from reconciler.runtime.shared.actions import MergePatch, WriteDone
from reconciler.runtime.shared.context import EXPECTED_MISSES, Context
from reconciler.runtime.shared.patches import (
    holds_quota,
    is_true,
    status_patch,
    workload_status_write,
)
from reconciler.runtime.shared.store import Key

__all__ = ["TIMER", "MaxExecution"]

log = structlog.get_logger(__name__)

TIMER = "max-exec"
# Writes after which the Workload is looked at again (what it shows then decides).
_SETTLING = ("admit", "evict", "finish", "deactivate", "max-exec")


class MaxExecution:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def check(self, key: Key, workload: Workload) -> None:
        """An admitted Workload with a maximum gets its timer, or is made a deactivation target once
        the maximum has passed; an active one that is a target is deactivated. As in Kueue, this
        holds while it is admitted, also evicting: the eviction of an inactive Workload removes
        DeactivationTarget, and while its job stops it is written again (with its Event)."""
        ctx = self.ctx
        if not holds_quota(workload):
            ctx.timers.cancel(key, TIMER)
            return
        if ctx.workload_writes.in_flight(key, *_SETTLING):
            return
        if is_true(workload.status.conditions, DEACTIVATION_TARGET):
            ctx.timers.cancel(key, TIMER)
            if workload.spec.active:
                self._deactivate(workload)  # (also after a restart between Kueue's two writes)
            return
        at = execution_deadline(
            workload.spec.maximum_execution_time_seconds,
            workload.status.accumulated_past_execution_time_seconds,
            workload.status.conditions,
        )
        if at is None:
            ctx.timers.cancel(key, TIMER)
        elif at > ctx.wall():
            ctx.timers.set(key, TIMER, at)
        else:
            ctx.timers.cancel(key, TIMER)
            log.debug("maximum execution time exceeded", workload=f"{key[0]}/{key[1]}")
            self._target(workload)

    def _target(self, workload: Workload) -> None:
        """DeactivationTarget=True (MaximumExecutionTimeExceeded), the accumulated time cleared."""
        meta = workload.metadata
        conditions = set_condition(
            workload.status.conditions,
            DEACTIVATION_TARGET,
            "True",
            MAXIMUM_EXECUTION_TIME_EXCEEDED,
            TARGET_MESSAGE,
            self.ctx.clock(),
            meta.generation or None,
        )
        status = msgspec.structs.replace(
            workload.status, conditions=conditions, accumulated_past_execution_time_seconds=None
        )
        body = msgspec.json.decode(status_patch(status, meta.resource_version))
        body["status"]["accumulatedPastExecutionTimeSeconds"] = None  # (a merge patch removes a null)
        self.ctx.write(
            workload_status_write(
                "max-exec", (meta.namespace, meta.name), msgspec.json.encode(body), self._targeted
            )
        )

    def _targeted(self, done: WriteDone) -> None:
        ctx = self.ctx
        key = done.key
        if not done.ok or done.body is None:
            ctx.write_failed(done, expected=EXPECTED_MISSES)
            ctx.dirty.workload(key)  # decide again on fresh state
            return
        ctx.apply_workload_write(key, done.body)
        workload = ctx.store.workloads.get(key)
        if workload is None:
            return
        maximum = workload.spec.maximum_execution_time_seconds or 0
        ctx.events.emit(workload, "Warning", MAXIMUM_EXECUTION_TIME_EXCEEDED, exceeded_message(maximum))
        if workload.spec.active:
            self._deactivate(workload)
        else:
            ctx.dirty.workload(key, own_write=True)

    def _deactivate(self, workload: Workload) -> None:
        """spec.active: false; the eviction follows once the API shows it."""
        meta = workload.metadata
        key = (meta.namespace, meta.name)
        if self.ctx.workload_writes.in_flight(key, "deactivate"):
            return
        patch = b'{"spec":{"active":false}}'
        self.ctx.write(
            MergePatch("deactivate", WORKLOADS, meta.namespace, meta.name, patch, on_done=self._deactivated)
        )

    def _deactivated(self, done: WriteDone) -> None:
        ctx = self.ctx
        key = done.key
        if done.ok and done.body is not None:
            ctx.apply_workload_write(key, done.body)
            ctx.dirty.workload(key, own_write=True)
            return
        ctx.write_failed(done, expected=EXPECTED_MISSES)
        ctx.dirty.workload(key)
