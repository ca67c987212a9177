"""A new integration is one module plus registration: a two-pod-set "TrainingRun" (defined in
tests/support/trainingrun.py) driven through the seam and the core, as the runtime drives a Job:
Workload created with both pod sets, charged and admitted with a flavor per pod set, started
with each pod set's node labels, evicted and suspended, restored, finished; and replaced when a
role's replicas are raised after admission."""

from __future__ import annotations

from typing import Any

import msgspec

from reconciler.api import Workload
from reconciler.core.engine import Engine
from reconciler.core.model.workloads import compile_workload, workload_for_object
from reconciler.core.scheduling.scheduler import Admit
from reconciler.core.status import admitted_workload_status
from reconciler.integrations import (
    PODSET_LABEL,
    CreateWorkload,
    DeleteMismatched,
    Finish,
    Known,
    Nothing,
    Restore,
    Start,
    Suspend,
    decide,
)
from tests.support.builders import cluster_queue, flavor
from tests.support.memory_api import merge
from tests.support.trainingrun import REGISTRY_WITH_TRAINING_RUN, TRAINING_RUN, TrainingRun, training_run

# Kueue's AssignQueueLabelsForPods labels on an admitted Workload's pods (LocalQueue lq, ClusterQueue cq).
QUEUE_LABELS = {"kueue.x-k8s.io/local-queue-name": "lq", "kueue.x-k8s.io/cluster-queue-name": "cq"}

GPU = "nvidia.com/gpu"
ROLES = [("leader", 1, {"cpu": "1"}), ("workers", 2, {"cpu": "1", GPU: "1"})]


def _patched(run: TrainingRun, patch: bytes) -> TrainingRun:
    body = merge(msgspec.json.decode(msgspec.json.encode(run)), msgspec.json.decode(patch))
    patched: TrainingRun = msgspec.json.decode(msgspec.json.encode(body), type=TrainingRun)
    return patched


def _engine() -> Engine:
    engine = Engine()
    engine.set_flavor(flavor("small", {"pool": "cpu"}))
    engine.set_flavor(flavor("big", {"pool": "gpu"}))
    engine.set_cluster_queue(
        cluster_queue("cq", [("small", {"cpu": 4, GPU: 0}), ("big", {"cpu": 4, GPU: 2})])
    )
    engine.set_local_queue("ns", "lq", "cq")
    engine.set_namespace("ns", {"kubernetes.io/metadata.name": "ns"})
    return engine


def _admit(engine: Engine, workload: Workload) -> Workload:
    info = compile_workload(workload, lookup_template=lambda ns, n: None, mappings={})
    assert [(ps.name, ps.count) for ps in info.pod_sets] == [("leader", 1), ("workers", 2)]
    engine.add_workload(info)
    (decision,) = engine.schedule()
    assert isinstance(decision, Admit)
    status = admitted_workload_status(workload.status, decision, "2026-01-01T00:00:00Z")
    return msgspec.structs.replace(workload, status=status)


def _templates(run: TrainingRun) -> dict[str, Any]:
    return {r.name: msgspec.json.decode(r.template) for r in run.spec.roles}


def test_the_training_run_is_registered_by_its_framework_name() -> None:
    assert REGISTRY_WITH_TRAINING_RUN["example.com/trainingrun"] is TRAINING_RUN
    assert "batch/job" in REGISTRY_WITH_TRAINING_RUN


def test_a_two_pod_set_training_run_from_creation_to_finish() -> None:
    engine = _engine()
    run = training_run("r", ROLES, suspend=False)
    original = _templates(run)
    # No Workload yet: the running TrainingRun is suspended and its Workload created.
    step = decide(TRAINING_RUN, run, None, Known(), engine.flavors)
    assert isinstance(step, CreateWorkload)
    assert step.create
    assert step.suspend is not None
    run = _patched(run, step.suspend.body)
    assert run.spec.suspend
    pod_sets = TRAINING_RUN.pod_sets(run)
    workload = workload_for_object(run.metadata, TRAINING_RUN.api_version, TRAINING_RUN.kind, pod_sets)
    assert [(ps.name, ps.count) for ps in workload.spec.pod_sets] == [("leader", 1), ("workers", 2)]
    (owner,) = workload.metadata.owner_references
    assert (owner.api_version, owner.kind, owner.name) == ("example.com/v1", "TrainingRun", "r")
    # Charged and admitted pod set by pod set: the leader fits "small", the GPU workers only "big".
    workload = _admit(engine, workload)
    assert engine.ledger.used("cq", ("small", "cpu")) == 1000  # millicores
    assert engine.ledger.used("cq", ("big", "cpu")) == 2000
    assert engine.ledger.used("cq", ("big", GPU)) == 2
    # Started with each pod set's own node labels and pod set label.
    step = decide(TRAINING_RUN, run, workload, Known(admitted=True), engine.flavors)
    assert isinstance(step, Start)
    run = _patched(run, step.patch.body)
    assert not run.spec.suspend
    started = _templates(run)
    assert started["leader"]["spec"]["nodeSelector"] == {"pool": "cpu"}
    assert started["workers"]["spec"]["nodeSelector"] == {"pool": "gpu"}
    assert started["leader"]["metadata"]["labels"] == {PODSET_LABEL: "leader", **QUEUE_LABELS}
    assert started["workers"]["metadata"]["labels"] == {PODSET_LABEL: "workers", **QUEUE_LABELS}
    assert isinstance(decide(TRAINING_RUN, run, workload, Known(admitted=True), engine.flavors), Nothing)
    # Evicted (the ledger no longer holds it): suspended, then its templates restored.
    engine.release(("ns", workload.metadata.name))
    assert engine.ledger.used("cq", ("big", GPU)) == 0
    step = decide(TRAINING_RUN, run, workload, Known(), engine.flavors)
    assert isinstance(step, Suspend)
    run = _patched(run, step.patch.body)
    step = decide(TRAINING_RUN, run, workload, Known(), engine.flavors)
    assert isinstance(step, Restore)
    run = _patched(run, step.patch.body)
    assert _templates(run) == original
    assert isinstance(decide(TRAINING_RUN, run, workload, Known(), engine.flavors), Nothing)
    # Admitted again, started, and finished: the Workload is declared finished.
    run = _patched(run, b'{"spec":{"suspend":false}}')
    done = msgspec.structs.replace(
        run,
        status=msgspec.json.decode(
            b'{"conditions":[{"type":"Succeeded","status":"True","message":"ok"}]}', type=type(run.status)
        ),
    )
    step = decide(TRAINING_RUN, done, workload, Known(admitted=True), engine.flavors)
    assert isinstance(step, Finish)
    assert (step.outcome.succeeded, step.outcome.message) == (True, "ok")


def test_raising_one_role_after_admission_replaces_the_workload() -> None:
    engine = _engine()
    run = training_run("r", ROLES, suspend=True)
    workload = workload_for_object(
        run.metadata, TRAINING_RUN.api_version, TRAINING_RUN.kind, TRAINING_RUN.pod_sets(run)
    )
    workload = _admit(engine, workload)
    step = decide(TRAINING_RUN, run, workload, Known(admitted=True), engine.flavors)
    assert isinstance(step, Start)
    run = _patched(run, step.patch.body)
    raised = msgspec.json.decode(msgspec.json.encode(run))
    raised["spec"]["roles"][1]["replicas"] = 3
    run = msgspec.json.decode(msgspec.json.encode(raised), type=TrainingRun)
    step = decide(TRAINING_RUN, run, workload, Known(admitted=True), engine.flavors)
    assert isinstance(step, DeleteMismatched)
    assert step.stop is not None
    assert not step.delete
    assert msgspec.json.decode(step.stop.body) == {"spec": {"suspend": True}}
    # Stopped by the runtime: the templates come back as the Workload recorded them, then the
    # Workload goes (Kueue's stopJob).
    run = _patched(run, step.stop.body)
    step = decide(TRAINING_RUN, run, workload, Known(admitted=True, stopping=True), engine.flavors)
    assert isinstance(step, Restore)
    # Suspended by someone else (a manifest re-applied with suspend: true) while the Workload holds
    # quota: Kueue deletes the Workload and leaves the templates as they are.
    kept = decide(TRAINING_RUN, run, workload, Known(admitted=True), engine.flavors)
    assert kept == DeleteMismatched(None, delete=True)
    run = _patched(run, step.patch.body)
    assert not TRAINING_RUN.restore_pending(run)
    step = decide(TRAINING_RUN, run, workload, Known(admitted=True), engine.flavors)
    assert step == DeleteMismatched(None, delete=True)
