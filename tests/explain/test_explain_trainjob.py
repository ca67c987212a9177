"""`reconciler explain trainjob NAMESPACE/NAME`: a TrainJob on the walkthrough's queues (Job A
holds the one GPU) is found through its Workload (by owner) and explained as waiting for Job A."""

from __future__ import annotations

import dataclasses

import msgspec

from reconciler.api import Workload
from reconciler.api.trainer import TrainingRuntime, TrainJob
from reconciler.core.model.workloads import workload_for_object
from reconciler.explain.analyze import explain
from reconciler.explain.render import render_text
from reconciler.explain.state import ClusterState, OtherJob, Target, explainable
from reconciler.integrations.trainjob import TRAINJOB
from tests.support.explain_state import NS, decode, walkthrough_state
from tests.support.trainjobs import node_job, runtime_body, trainjob_body

A = "kueue-dra-running-a"


def _state() -> tuple[ClusterState, Workload]:
    body = trainjob_body("train", num_nodes=1, queue="p3-dra-queue")
    body["metadata"].update(
        {"namespace": NS, "uid": "uid-train", "creationTimestamp": "2025-01-01T00:00:07Z"}
    )
    runtime = runtime_body(jobs=[node_job(gpu="single-gpu")])
    job = TRAINJOB.resolve(
        msgspec.json.decode(msgspec.json.encode(body), type=TrainJob),
        lambda *_: msgspec.json.decode(msgspec.json.encode(runtime), type=TrainingRuntime),
    )
    made = workload_for_object(job.metadata, TRAINJOB.api_version, TRAINJOB.kind, TRAINJOB.pod_sets(job))
    pending = {
        "type": "QuotaReserved",
        "status": "False",
        "reason": "Pending",
        "message": "couldn't assign flavors to pod set node: insufficient unused quota",
        "lastTransitionTime": "2025-01-01T00:00:08Z",
    }
    workload = decode(
        {**msgspec.json.decode(msgspec.json.encode(made)), "status": {"conditions": [pending]}}, Workload
    )
    walkthrough = walkthrough_state("job", A)
    # What explain fetches: the TrainJob as the API serves it (its runtime not read).
    served = msgspec.json.decode(msgspec.json.encode(body), type=TrainJob)
    state = dataclasses.replace(
        walkthrough,
        target=Target.parse("trainjob", f"{NS}/train"),
        job=None,
        other=OtherJob(TRAINJOB, served.metadata, served),
        workloads=[*walkthrough.workloads, workload],
    )
    return state, workload


def test_a_trainjob_is_taken_by_its_lowercase_kind() -> None:
    assert "trainjob" in explainable()
    assert str(Target.parse("TrainJob", "ns/t")) == "TrainJob ns/t"


def test_a_trainjob_with_its_workload_is_found_by_owner_and_explained_as_pending() -> None:
    state, workload = _state()
    assert [(ps.name, ps.count) for ps in workload.spec.pod_sets] == [("node", 1)]
    ex = explain(state)
    assert ex.state == "pending"
    assert ex.workload == f"{NS}/{workload.metadata.name}"
    assert workload.metadata.name.startswith("trainjob-train-")
    assert ex.summary.startswith("it waits for quota in ClusterQueue p3-dra-cq, held by Job")
    assert any(h.job == f"{NS}/{A}" for h in ex.holders)
    assert render_text(ex).startswith(f"TrainJob {NS}/train is PENDING")
