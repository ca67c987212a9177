"""In-use finalizers on ClusterQueues and ResourceFlavors, as Kueue keeps them."""

from __future__ import annotations

from typing import Any

import msgspec

from reconciler.api import ClusterQueue, ResourceFlavor
from reconciler.api.resources import CLUSTER_QUEUES, RESOURCE_FLAVORS
from reconciler.kube import Conflict
from reconciler.runtime.queues.in_use import RESOURCE_IN_USE
from reconciler.runtime.shared.actions import MergePatch
from reconciler.runtime.shared.writer import WriteDone
from tests.support.builders import cluster_queue_body
from tests.support.reconciler_harness import (
    GPU,
    Harness,
    apply_patch,
    decode,
    gpu_job,
    of,
    queues,
    submitted,
)

DELETED_AT = "2026-01-01T00:00:00Z"


def finalizers_of(action: MergePatch) -> tuple[list[str], str]:
    meta = msgspec.json.decode(action.patch)["metadata"]
    return meta["finalizers"], meta["resourceVersion"]


def cluster_queue(h: Harness, finalizers: list[str], *, deleting: bool = False) -> ClusterQueue:
    body: dict[str, Any] = cluster_queue_body("cq", [("t4", {GPU: 1})])
    body["metadata"].update(finalizers=finalizers, resourceVersion=h.next_rv())
    if deleting:
        body["metadata"]["deletionTimestamp"] = DELETED_AT
    result: ClusterQueue = decode(body, ClusterQueue)
    return result


def flavor(h: Harness, finalizers: list[str], *, deleting: bool = False) -> ResourceFlavor:
    meta: dict[str, Any] = {"name": "t4", "finalizers": finalizers, "resourceVersion": h.next_rv()}
    if deleting:
        meta["deletionTimestamp"] = DELETED_AT
    result: ResourceFlavor = decode({"metadata": meta, "spec": {"nodeLabels": {"gpu": "t4"}}}, ResourceFlavor)
    return result


def admitted_workload(h: Harness) -> tuple[str, str]:
    """One Job's Workload admitted into cq (holding its one GPU); its key."""
    workload = submitted(h, gpu_job(h, "a"))
    (admit,) = of(h.take(), "admit")
    admitted = apply_patch(h, workload, admit)
    h.reconciler.handle(WriteDone(admit, body=msgspec.json.encode(admitted)))
    return (admitted.metadata.namespace, admitted.metadata.name)


def test_the_finalizer_is_added_to_queues_and_flavors_lacking_it() -> None:
    h = Harness()
    queues(h)
    h.sync_all()
    actions = h.take()
    (cq_patch,) = of(actions, "cq-finalizer")
    (flavor_patch,) = of(actions, "flavor-finalizer")
    assert (cq_patch.resource, cq_patch.name) == (CLUSTER_QUEUES, "cq")
    assert (flavor_patch.resource, flavor_patch.name) == (RESOURCE_FLAVORS, "t4")
    assert finalizers_of(cq_patch)[0] == [RESOURCE_IN_USE]
    # Someone else adds a finalizer meanwhile: one write in flight at a time, so nothing yet ...
    h.event("MODIFIED", CLUSTER_QUEUES, cluster_queue(h, ["example.com/other"]))
    assert of(h.take(), "cq-finalizer") == []
    h.reconciler.handle(WriteDone(cq_patch, error=Conflict(409, "Conflict", "modified")))
    # ... and when the write for the old version fails, the newest is written at once, keeping
    # the other finalizer and conditional on the version seen.
    (retried,) = of(h.take(), "cq-finalizer")
    assert finalizers_of(retried) == (["example.com/other", RESOURCE_IN_USE], str(h.rv))


def test_a_deleted_cluster_queue_keeps_its_finalizer_while_quota_is_held() -> None:
    h = Harness()
    queues(h)
    h.event("MODIFIED", CLUSTER_QUEUES, cluster_queue(h, [RESOURCE_IN_USE]))
    h.event("MODIFIED", RESOURCE_FLAVORS, flavor(h, [RESOURCE_IN_USE]))
    h.sync_all()
    assert of(h.take(), "cq-finalizer") == []
    key = admitted_workload(h)
    h.event(
        "MODIFIED", CLUSTER_QUEUES, cluster_queue(h, ["example.com/other", RESOURCE_IN_USE], deleting=True)
    )
    h.reconciler.flush_status()
    assert of(h.take(), "cq-finalizer") == []
    # Terminating: nothing new is admitted into it, as its Active condition says.
    assert h.reconciler.core.cache.cluster_queue_active("cq") == (
        "False",
        "Terminating",
        "Can't admit new workloads; clusterQueue is terminating",
    )
    # The flavor it lists is deleted too: kept while the ClusterQueue exists.
    h.event("MODIFIED", RESOURCE_FLAVORS, flavor(h, [RESOURCE_IN_USE], deleting=True))
    assert of(h.take(), "flavor-finalizer") == []
    h.reconciler.core.release(key)  # the workload finished: its quota is back
    h.reconciler.flush_status()
    (release,) = of(h.take(), "cq-finalizer")
    assert finalizers_of(release) == (["example.com/other"], str(h.rv - 1))
    h.event("DELETED", CLUSTER_QUEUES, cluster_queue(h, ["example.com/other"], deleting=True))
    (flavor_release,) = of(h.take(), "flavor-finalizer")
    assert finalizers_of(flavor_release)[0] == []


def test_nothing_is_written_before_the_caches_have_synced() -> None:
    h = Harness()
    queues(h)
    h.event("MODIFIED", CLUSTER_QUEUES, cluster_queue(h, [RESOURCE_IN_USE], deleting=True))
    assert h.take() == []
    h.sync_all()
    (release,) = of(h.take(), "cq-finalizer")
    assert finalizers_of(release)[0] == []
