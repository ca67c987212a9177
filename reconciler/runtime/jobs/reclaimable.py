"""Finished pods give their quota back while their job still runs (Kueue's ReclaimablePods,
beta and on in v0.18.1): the job's integration counts, per pod set, the pods that no longer need
quota; when that differs from the Workload's `status.reclaimablePods`, the list is written (in
the Workload's pod-set order, empty removed). The Workload concern then charges the admitted
Workload less (`core.quota.cache.after_reclaim`), which frees quota for whoever waits.
"""

from __future__ import annotations

from typing import Any

import msgspec

from reconciler.api import Workload
from reconciler.integrations import Integration
from reconciler.runtime.shared.actions import WriteDone
from reconciler.runtime.shared.context import EXPECTED_MISSES, Context
from reconciler.runtime.shared.patches import workload_status_write

__all__ = ["ReclaimablePods"]


class ReclaimablePods:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def follow(self, integration: Integration, job: Any, workload: Workload) -> None:
        """Write the Workload's reclaimable pods when the job's count of them moved."""
        wanted = {name: count for name, count in integration.reclaimable_pods(job).items() if count > 0}
        shown = {r.name: r.count for r in workload.status.reclaimable_pods}
        meta = workload.metadata
        key = (meta.namespace, meta.name)
        if wanted == shown or self.ctx.workload_writes.in_flight(key, "reclaimable-pods"):
            return
        order = [ps.name for ps in workload.spec.pod_sets]
        listed = [{"name": n, "count": wanted[n]} for n in sorted(wanted, key=_at(order))]
        patch = msgspec.json.encode({"status": {"reclaimablePods": listed or None}})
        self.ctx.write(workload_status_write("reclaimable-pods", key, patch, self._written))

    def _written(self, done: WriteDone) -> None:
        ctx = self.ctx
        if not done.ok or done.body is None:
            ctx.write_failed(done, expected=EXPECTED_MISSES)
            ctx.dirty.workload(done.key)
            return
        ctx.apply_workload_write(done.key, done.body)
        ctx.dirty.workload(done.key, own_write=True)


def _at(order: list[str]) -> Any:
    def position(name: str) -> int:
        return order.index(name) if name in order else len(order)

    return position
