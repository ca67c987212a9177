"""A leading reconciler harness with its metrics, and Workloads with a given creation time."""

from __future__ import annotations

import datetime as dt

import msgspec

from reconciler.api import Workload
from reconciler.observability.metrics import Metrics
from reconciler.runtime.loop.snapshot import state_snapshot
from tests.support.reconciler_harness import Harness, decode

CREATED_EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.UTC).timestamp()


def with_creation(workload: Workload, stamp: str) -> Workload:
    body = msgspec.json.decode(msgspec.json.encode(workload))
    body["metadata"]["creationTimestamp"] = stamp
    result: Workload = decode(body, Workload)
    return result


def leader_harness(wait_seconds: float = 7.0) -> tuple[Harness, Metrics]:
    h = Harness()
    metrics = Metrics("leader", wall_clock=lambda: CREATED_EPOCH + wait_seconds, version="1.2.3")
    h.reconciler.metrics = metrics
    metrics.state_source = lambda: state_snapshot(h.reconciler)
    return h, metrics
