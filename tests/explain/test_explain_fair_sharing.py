"""`reconciler explain` with admission fair sharing: the LocalQueue's score and place as the
controller wrote them, and (with --config's admissionFairSharing) the queue order by usage."""

from __future__ import annotations

import msgspec

from reconciler.api import (
    AdmissionFairSharingStatus,
    AdmissionScope,
    Condition,
    LocalQueue,
    LocalQueueFairSharingStatus,
    Workload,
)
from reconciler.core.queueing.admission_fair_sharing import AfsSettings
from reconciler.core.status import AFS_CONDITION
from reconciler.explain.analyze import explain
from reconciler.explain.render import render_text
from reconciler.explain.state import ClusterState
from tests.support.explain_state import NS, walkthrough_state, workload_of

B = "kueue-dra-pending-b"
RANKED = (
    "score 3 (weighted usage over weight 1); place 2 of 2 LocalQueues in ClusterQueue p3-dra-cq, "
    "lowest score admitted first"
)


def heavy_state() -> ClusterState:
    """Job B's LocalQueue used 3 GPUs lately (its status says so); LocalQueue light used nothing
    and has a Workload created after B's, in the same ClusterQueue, which orders by usage."""
    state = walkthrough_state("job", B)
    (cq,) = state.cluster_queues
    cq.spec.admission_scope = AdmissionScope("UsageBasedAdmissionFairSharing")
    (lq,) = state.local_queues
    lq.status.fair_sharing = LocalQueueFairSharingStatus(
        admission_fair_sharing_status=AdmissionFairSharingStatus(
            {"nvidia.com/gpu": "3"}, "2026-01-01T00:10:00Z"
        )
    )
    lq.status.conditions.append(Condition(type=AFS_CONDITION, status="True", reason="Ranked", message=RANKED))
    light = msgspec.json.decode(msgspec.json.encode(lq), type=LocalQueue)
    light.metadata.name, light.status.fair_sharing, light.status.conditions = "light", None, []
    state.local_queues.append(light)
    other = msgspec.json.decode(msgspec.json.encode(workload_of(state, B)), type=Workload)
    other.metadata.name, other.metadata.creation_timestamp = "other", "2030-01-01T00:00:00Z"
    other.spec.queue_name = "light"
    state.workloads.append(other)
    return state


def test_the_score_and_place_the_controller_wrote_are_shown() -> None:
    ex = explain(heavy_state())
    assert ex.fair_sharing == f"{RANKED}; consumed 3 nvidia.com/gpu (as of 2026-01-01T00:10:00Z)"
    assert f"Fair sharing: {RANKED}" in render_text(ex)


def test_with_the_configuration_the_lighter_local_queue_is_ahead() -> None:
    # Without --config the order is by priority and time: the later Workload is not ahead.
    assert explain(heavy_state()).ahead == []
    state = heavy_state()
    state.afs = AfsSettings(half_life=600, sampling=60)
    assert explain(state).ahead == [f"Workload {NS}/other"]
