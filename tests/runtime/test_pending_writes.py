"""Two pending verdicts for one Workload in one pass: the later is written even when it equals
what the API shows, since the earlier write (still in flight) would otherwise have the last word."""

from __future__ import annotations

import msgspec

from reconciler.api.resources import WORKLOADS
from reconciler.core.scheduling.scheduler import Pending
from reconciler.runtime.writer import WriteDone
from tests.runtime.test_priorities import queued
from tests.support.reconciler_harness import Harness, apply_patch, gpu_job, of, queues


def test_a_later_verdict_follows_an_earlier_one_in_flight() -> None:
    h = Harness()
    queues(h, gpus=0)
    h.sync_all()
    workload = queued(h, gpu_job(h, "job"))
    h.event("ADDED", WORKLOADS, workload)
    (first,) = of(h.take(), "workload-status")
    shown = apply_patch(h, workload, first)
    h.reconciler.handle(WriteDone(first, body=msgspec.json.encode(shown)))
    h.take()
    real = next(c for c in shown.status.conditions if c.type == "QuotaReserved").message
    key = (shown.metadata.namespace, shown.metadata.name)
    sync = h.reconciler.workload_sync
    sync.pending(Pending(key, "Pending", "Workload no longer fits after processing another workload", "cq"))
    sync.pending(Pending(key, "Pending", real, "cq"))  # equal to what the API shows
    writes = of(h.take(), "workload-status")
    assert len(writes) == 2
    final = apply_patch(h, shown, writes[-1])
    assert next(c for c in final.status.conditions if c.type == "QuotaReserved").message == real
