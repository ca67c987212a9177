"""`reconciler explain pytorchjob|mpijob|... NAMESPACE/NAME`: a Kubeflow job explained through its
integration, on the walkthrough's queues (Job A holds the one GPU), before and after its Workload
exists."""

from __future__ import annotations

import dataclasses

import msgspec

from reconciler.api import Workload
from reconciler.core.model.workloads import workload_for_object
from reconciler.explain.analyze import explain
from reconciler.explain.render import render_text
from reconciler.explain.state import ClusterState, OtherJob, Target, explainable
from reconciler.integrations.kubeflow.pytorchjob import PYTORCHJOB
from tests.support.explain_state import NS, decode, walkthrough_state
from tests.support.kubeflow_jobs import pytorchjob_body, pytorchjob_of

A = "kueue-dra-running-a"


def _pytorchjob_state() -> ClusterState:
    body = pytorchjob_body("train", [("Master", 1, None), ("Worker", 1, "single-gpu")], queue="p3-dra-queue")
    body["metadata"].update({"namespace": NS, "uid": "uid-pt", "creationTimestamp": "2025-01-01T00:00:07Z"})
    job = pytorchjob_of(body)
    return dataclasses.replace(
        walkthrough_state("job", A),
        target=Target.parse("pytorchjob", f"{NS}/train"),
        job=None,
        other=OtherJob(PYTORCHJOB, job.metadata, job),
    )


def test_every_kubeflow_kind_is_explained_by_its_lowercase_kind() -> None:
    assert {"pytorchjob", "tfjob", "xgboostjob", "paddlejob", "jaxjob", "mpijob"} <= set(explainable())
    assert str(Target.parse("PyTorchJob", "ns/t")) == "PyTorchJob ns/t"
    assert str(Target.parse("mpijob", "ns/m")) == "MPIJob ns/m"


def test_a_pytorchjob_without_a_workload_yet_is_explained_from_its_replica_types() -> None:
    ex = explain(_pytorchjob_state())
    assert ex.state == "no Workload yet"
    assert "the controller has not created a Workload for this PyTorchJob" in ex.findings[0]
    # Its GPU worker waits for the GPU Job A holds; the master asks for none.
    assert [(r.pod_set, r.fits) for r in ex.quota if r.resource == "nvidia.com/gpu"] == [("worker", False)]
    assert any(h.job == f"{NS}/{A}" for h in ex.holders)
    assert render_text(ex).startswith(f"PyTorchJob {NS}/train is NO WORKLOAD YET")


def test_a_pytorchjob_with_its_workload_is_found_by_owner_and_explained_as_pending() -> None:
    state = _pytorchjob_state()
    assert state.other is not None
    made: Workload = workload_for_object(
        state.other.meta, PYTORCHJOB.api_version, PYTORCHJOB.kind, PYTORCHJOB.pod_sets(state.other.obj)
    )
    pending = {
        "type": "QuotaReserved",
        "status": "False",
        "reason": "Pending",
        "message": "couldn't assign flavors to pod set worker: insufficient unused quota",
        "lastTransitionTime": "2025-01-01T00:00:08Z",
    }
    raw: dict[str, object] = msgspec.json.decode(msgspec.json.encode(made))
    workload = decode({**raw, "status": {"conditions": [pending]}}, Workload)
    ex = explain(dataclasses.replace(state, workloads=[*state.workloads, workload]))
    assert ex.state == "pending"
    assert workload.metadata.name.startswith("pytorchjob-train-")
    assert ex.workload == f"{NS}/{workload.metadata.name}"
    assert ex.summary.startswith("it waits for quota in ClusterQueue p3-dra-cq, held by Job")
