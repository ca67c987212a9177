"""A LocalQueue whose ClusterQueue is gone shows no flavorsReservation or flavorsUsage, as in
Kueue v0.18.1 (empty usage, omitted from its JSON): the status patch removes the lists rather
than writing empty ones (found by the conformance scenario resource-in-use)."""

from __future__ import annotations

import json
from typing import Any

from reconciler.api import ClusterQueue
from reconciler.api.resources import CLUSTER_QUEUES

from tests.support.builders import cluster_queue_body
from tests.support.reconciler_harness import CONFIG
from tests.support.reconciler_harness import GPU
from tests.support.reconciler_harness import Harness
from tests.support.reconciler_harness import decode
from tests.support.reconciler_harness import of
from tests.support.reconciler_harness import queues


def _lq_patches(h: Harness) -> list[dict[str, Any]]:
    actions = h.take()
    h.reconciler.flush_status()
    actions += h.take()
    return [json.loads(a.patch)["status"] for a in of(actions, "lq-status")]


def test_the_usage_lists_are_removed_once_the_cluster_queue_is_gone() -> None:
    h = Harness(CONFIG)
    h.sync_all()
    queues(h)
    (shown,) = _lq_patches(h)
    assert shown["flavorsReservation"] == [{"name": "t4", "resources": [{"name": GPU, "total": "0"}]}]
    cq = decode(cluster_queue_body("cq", [("t4", {GPU: 1})]), ClusterQueue)
    h.event("DELETED", CLUSTER_QUEUES, cq)
    (gone,) = _lq_patches(h)
    assert gone["conditions"][0]["reason"] == "ClusterQueueDoesNotExist"
    assert gone["flavorsReservation"] is None  # a merge patch's null: removed
    assert gone["flavorsUsage"] is None
