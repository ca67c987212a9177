"""Two pending verdicts for one Workload in one pass: the later is written even when it equals
what the API shows, since the earlier write (still in flight) would otherwise have the last word."""

from __future__ import annotations

import msgspec

from reconciler.api.resources import WORKLOADS
from reconciler.core.scheduling.scheduler import Pending
from reconciler.runtime.shared.writer import WriteDone
from tests.support.priority_jobs import queued
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


def test_a_verdict_equal_to_the_one_in_flight_is_not_written_again() -> None:
    """Cycles in quick succession decide the same verdict while its write is still in flight: it
    is written once (the shape bench saw every pending message written twice)."""
    h = Harness()
    queues(h, gpus=0)
    h.sync_all()
    workload = queued(h, gpu_job(h, "job"))
    h.event("ADDED", WORKLOADS, workload)
    (first,) = of(h.take(), "workload-status")  # in flight: its response has not come
    message = next(
        c for c in apply_patch(h, workload, first).status.conditions if c.type == "QuotaReserved"
    ).message
    key = (workload.metadata.namespace, workload.metadata.name)
    sync = h.reconciler.workload_sync
    sync.pending(Pending(key, "Pending", message, "cq"))
    sync.pending(Pending(key, "Pending", message, "cq"))
    assert of(h.take(), "workload-status") == []
    # A different verdict still follows the one in flight.
    sync.pending(Pending(key, "Pending", "Workload no longer fits after processing another workload", "cq"))
    assert len(of(h.take(), "workload-status")) == 1
