"""`reconciler explain KIND NAMESPACE/NAME` for every registered kind, not only batch/v1 Job:
a RayCluster on the walkthrough's queues (Job A holds the one GPU), before and after its
Workload exists, and the kinds whose pods form groups sent to their Workloads."""

from __future__ import annotations

import dataclasses

import msgspec
import pytest

from reconciler.api import Workload
from reconciler.core.model.workloads import workload_for_object
from reconciler.explain.analyze import explain
from reconciler.explain.render import render_text
from reconciler.explain.state import ClusterState, OtherJob, Target, TargetError, explainable
from reconciler.integrations.ray import RAYCLUSTER
from tests.support.explain_state import NS, decode, walkthrough_state
from tests.support.rays import raycluster_body, raycluster_of

A = "kueue-dra-running-a"


def _raycluster_state(*, labelled: bool = True) -> ClusterState:
    body = raycluster_body(
        "rc", [("gpu-workers", 1, "single-gpu")], queue="p3-dra-queue" if labelled else None
    )
    body["metadata"].update({"namespace": NS, "uid": "uid-rc", "creationTimestamp": "2025-01-01T00:00:07Z"})
    cluster = raycluster_of(body)
    walkthrough = walkthrough_state("job", A)
    return dataclasses.replace(
        walkthrough,
        target=Target.parse("raycluster", f"{NS}/rc"),
        job=None,
        other=OtherJob(RAYCLUSTER, cluster.metadata, cluster),
    )


def test_every_registered_kind_but_grouped_ones_is_taken_by_its_lowercase_kind() -> None:
    assert {"raycluster", "rayjob", "jobset"} <= set(explainable())
    assert str(Target.parse("RayCluster", "ns/rc")) == "RayCluster ns/rc"
    with pytest.raises(TargetError, match="'cronjob': explain one of job, workload, "):
        Target.parse("cronjob", "ns/x")
    assert str(Target.parse("pod", "ns/p")) == "Pod ns/p"  # a pod's Workload is owned by it
    with pytest.raises(TargetError, match="explain one of them with `reconciler explain workload"):
        Target.parse("leaderworkerset", "ns/x")


def test_a_raycluster_without_a_workload_yet_is_explained_from_its_own_pod_sets() -> None:
    ex = explain(_raycluster_state())
    assert ex.state == "no Workload yet"
    assert "the controller has not created a Workload for this RayCluster" in ex.findings[0]
    # What it would get: its GPU worker group waits for the GPU Job A holds.
    assert [(r.pod_set, r.resource, r.fits) for r in ex.quota if r.resource == "nvidia.com/gpu"] == [
        ("gpu-workers", "nvidia.com/gpu", False)
    ]
    assert any(h.job == f"{NS}/{A}" for h in ex.holders)
    assert render_text(ex).startswith(f"RayCluster {NS}/rc is NO WORKLOAD YET")


def test_a_raycluster_with_its_workload_is_found_by_owner_and_explained_as_pending() -> None:
    state = _raycluster_state()
    assert state.other is not None
    made: Workload = workload_for_object(
        state.other.meta, RAYCLUSTER.api_version, RAYCLUSTER.kind, RAYCLUSTER.pod_sets(state.other.obj)
    )
    workload = decode(
        {**decode_builtin(made), "status": {"conditions": [_pending()]}},
        Workload,
    )
    state = dataclasses.replace(state, workloads=[*state.workloads, workload])
    ex = explain(state)
    assert ex.state == "pending"
    assert ex.workload == f"{NS}/{workload.metadata.name}"
    assert workload.metadata.name.startswith("raycluster-rc-")
    assert ex.summary.startswith("it waits for quota in ClusterQueue p3-dra-cq, held by Job")


def test_a_raycluster_without_a_queue_name_is_not_managed() -> None:
    ex = explain(_raycluster_state(labelled=False))
    assert ex.state == "not managed"
    assert ex.summary.startswith("the RayCluster has no kueue.x-k8s.io/queue-name label")


def decode_builtin(workload: Workload) -> dict[str, object]:
    out: dict[str, object] = msgspec.json.decode(msgspec.json.encode(workload))
    return out


def _pending() -> dict[str, str]:
    return {
        "type": "QuotaReserved",
        "status": "False",
        "reason": "Pending",
        "message": "couldn't assign flavors to pod set gpu-workers: insufficient unused quota",
        "lastTransitionTime": "2025-01-01T00:00:08Z",
    }
