"""Queue order after a PodsReady timeout: waitForPodsReady.requeuingStrategy.timestamp."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.api import Condition
from reconciler.config import ConfigError, parse_config
from reconciler.core.model.workloads import compile_workload
from reconciler.core.primitives.ordering import CREATION_TIMESTAMP, EVICTION_TIMESTAMP, queue_order_timestamp
from reconciler.core.queueing.queues import QueueManager
from reconciler.integrations.batchjob import workload_for_job
from tests.support.builders import job

CREATED = "2026-01-01T00:00:00Z"
EVICTED_AT = "2026-01-01T01:00:00Z"


def workload(name: str, created: str, evicted: tuple[str, str] | None = None) -> Any:
    wl = workload_for_job(job(name, queue="lq", uid=f"uid-{name}", requests={"cpu": "1"}))
    wl.metadata.creation_timestamp = created
    if evicted is not None:
        reason, at = evicted
        wl.status.conditions = [
            Condition(type="Evicted", status="True", reason=reason, message="x", last_transition_time=at)
        ]
    return wl


@pytest.mark.parametrize(
    ("reason", "strategy", "expected"),
    [
        ("PodsReadyTimeout", EVICTION_TIMESTAMP, EVICTED_AT),
        ("PodsReadyTimeout", CREATION_TIMESTAMP, CREATED),
        ("AdmissionCheck", CREATION_TIMESTAMP, EVICTED_AT),  # always by its eviction
        ("Preempted", EVICTION_TIMESTAMP, CREATED),  # other evictions keep their creation time
    ],
)
def test_queue_order_timestamp(reason: str, strategy: str, expected: str) -> None:
    assert queue_order_timestamp(workload("a", CREATED, (reason, EVICTED_AT)), strategy) == expected


def test_a_timed_out_workload_goes_behind_those_created_before_its_eviction() -> None:
    def order(strategy: str) -> list[str]:
        queues = QueueManager()
        queues.set_cluster_queue("cq", strict_fifo=False)
        queues.set_local_queue("ns", "lq", "cq")
        for wl in (
            workload("timedout", CREATED, ("PodsReadyTimeout", EVICTED_AT)),
            workload("later", "2026-01-01T00:30:00Z"),
        ):
            info = compile_workload(wl, lookup_template=lambda ns, n: None, mappings={})
            info.name = wl.metadata.name.split("-")[1]
            info.created = queue_order_timestamp(wl, strategy) or info.created
            queues.add(info)
        return [name for _, name in queues.queues["cq"].ordered_keys()]

    assert order(EVICTION_TIMESTAMP) == ["later", "timedout"]
    assert order(CREATION_TIMESTAMP) == ["timedout", "later"]


def test_config_names_the_field_on_a_bad_timestamp() -> None:
    doc = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "waitForPodsReady": {"timeout": "5m", "requeuingStrategy": {"timestamp": "Admission"}},
    }
    with pytest.raises(ConfigError, match=r"waitForPodsReady\.requeuingStrategy\.timestamp"):
        parse_config(doc)
