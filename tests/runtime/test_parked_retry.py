"""The reconciler tries parked workloads again once Kueue's batch period has passed since quota
moved (the controller's `retry_parked_after`, 1 s by default), on the batch or tick after it."""

from __future__ import annotations

from reconciler.api.resources import WORKLOADS
from reconciler.runtime.loop.controller import ControllerOptions
from tests.support.reconciler_harness import Harness, jobs_with_workloads, of, queues


def test_the_waiting_job_is_admitted_a_batch_period_after_the_gpu_comes_back() -> None:
    now = [50.0]
    h = Harness()
    h.reconciler.ctx.monotonic = lambda: now[0]
    h.reconciler.ctx.engine.queues.retry_period = ControllerOptions().retry_parked_after
    queues(h)
    h.sync_all()
    workloads = jobs_with_workloads(h, "a", "b")
    for workload in workloads.values():
        h.event("ADDED", WORKLOADS, workload)
    assert [a.name for a in of(h.take(), "admit")] == [workloads["a"].metadata.name]
    h.event("DELETED", WORKLOADS, workloads["a"])  # the GPU comes back
    assert of(h.take(), "admit") == []
    now[0] = 50.9
    assert of(h.take(), "admit") == []
    now[0] = 51.0
    assert [a.name for a in of(h.take(), "admit")] == [workloads["b"].metadata.name]
