"""The Kubeflow replica-spec integrations' pure parts (training-operator v1 kinds and MPIJob), as
Kueue v0.18.1's kubeflowjob and mpijob packages: pod sets per replica type in Kueue's order,
counts, suspend/start/restore patches, active, PodsReady, finished, and their webhooks."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from reconciler.admission.queue_rules import JobPolicy
from reconciler.admission.review import AdmissionRequest, GroupVersionResource
from reconciler.api import Toleration
from reconciler.api.kubeflow import JAXJob, TFJob, XGBoostJob
from reconciler.integrations import PODSET_LABEL, PodSetStart
from reconciler.integrations.kubeflow import jaxjob, mpijob, paddlejob, pytorchjob, tfjob, xgboostjob
from reconciler.integrations.registry import REGISTRATIONS, REGISTRY
from tests.support.kubeflow_jobs import (
    decoded,
    mpijob_body,
    mpijob_of,
    pytorchjob_body,
    pytorchjob_of,
    replica_job_body,
    with_status,
)
from tests.support.memory_api import merge
from tests.support.webhook_server import Lookups

PYTORCH = pytorchjob.PYTORCHJOB
MPI = mpijob.MPIJOB
FRAMEWORKS = [
    "kubeflow.org/pytorchjob",
    "kubeflow.org/tfjob",
    "kubeflow.org/xgboostjob",
    "kubeflow.org/paddlejob",
    "kubeflow.org/jaxjob",
    "kubeflow.org/mpijob",
]


def _patched(body: dict[str, Any], patch: bytes) -> dict[str, Any]:
    merged: dict[str, Any] = merge(body, msgspec.json.decode(patch))
    return merged


def test_each_kind_is_registered_once_under_kueues_framework_name() -> None:
    assert [f for f in REGISTRATIONS if f.startswith("kubeflow.org/")] == FRAMEWORKS
    kinds = {f: (REGISTRY[f].kind, REGISTRY[f].api_version) for f in FRAMEWORKS}
    assert kinds == {
        "kubeflow.org/pytorchjob": ("PyTorchJob", "kubeflow.org/v1"),
        "kubeflow.org/tfjob": ("TFJob", "kubeflow.org/v1"),
        "kubeflow.org/xgboostjob": ("XGBoostJob", "kubeflow.org/v1"),
        "kubeflow.org/paddlejob": ("PaddleJob", "kubeflow.org/v1"),
        "kubeflow.org/jaxjob": ("JAXJob", "kubeflow.org/v1"),
        "kubeflow.org/mpijob": ("MPIJob", "kubeflow.org/v2beta1"),
    }
    # Each may be another job's child (never TopLevel) and is stopped by suspending.
    assert all(not REGISTRY[f].top_level for f in FRAMEWORKS)
    assert all(not REGISTRY[f].stop_deletes for f in FRAMEWORKS)


def test_pod_sets_per_replica_type_in_kueues_order_named_in_lower_case() -> None:
    # Written Worker first: Master still comes first, as Kueue orders a PyTorchJob's types.
    body = pytorchjob_body("p", [("Worker", 3, "gpu-b"), ("Master", None, "gpu-a")])
    sets = PYTORCH.pod_sets(pytorchjob_of(body))
    assert [(ps.name, ps.count) for ps in sets] == [("master", 1), ("worker", 3)]
    assert msgspec.json.decode(sets[1].template) == body["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    tf = replica_job_body(
        "TFJob",
        "kubeflow.org/v1",
        "tfReplicaSpecs",
        "t",
        [("Evaluator", 1, None), ("Worker", 2, None), ("PS", 2, None), ("Chief", 1, None), ("Odd", 5, None)],
    )
    # A replica type outside the kind's order is no pod set (as in Kueue).
    assert [(ps.name, ps.count) for ps in tfjob.TFJOB.pod_sets(decoded(tf, TFJob))] == [
        ("chief", 1),
        ("ps", 2),
        ("worker", 2),
        ("evaluator", 1),
    ]
    xgb = replica_job_body("XGBoostJob", "kubeflow.org/v1", "xgbReplicaSpecs", "x", [("Worker", 0, None)])
    assert [(ps.name, ps.count) for ps in xgboostjob.XGBOOSTJOB.pod_sets(decoded(xgb, XGBoostJob))] == [
        ("worker", 0)
    ]
    jax = replica_job_body("JAXJob", "kubeflow.org/v1", "jaxReplicaSpecs", "j", [("Worker", 4, None)])
    assert [(ps.name, ps.count) for ps in jaxjob.JAXJOB.pod_sets(decoded(jax, JAXJob))] == [("worker", 4)]
    assert paddlejob.PADDLEJOB.order == ("Master", "Worker")
    mpi = mpijob_body("m", [("Worker", 2, "gpu-b"), ("Launcher", 1, None)])
    assert [(ps.name, ps.count) for ps in MPI.pod_sets(mpijob_of(mpi))] == [("launcher", 1), ("worker", 2)]


def test_suspended_is_the_run_policys_flag() -> None:
    assert PYTORCH.is_suspended(pytorchjob_of(pytorchjob_body("p", [("Master", 1, None)])))
    assert not PYTORCH.is_suspended(pytorchjob_of(pytorchjob_body("p", [("Master", 1, None)], suspend=None)))
    assert not PYTORCH.is_suspended(pytorchjob_of(pytorchjob_body("p", [("Master", 1, None)], suspend=False)))
    body = pytorchjob_body("p", [("Master", 1, None)], suspend=False)
    assert _patched(body, PYTORCH.suspend_patch(pytorchjob_of(body)))["spec"]["runPolicy"] == {
        "suspend": True
    }


def test_start_unsuspends_and_injects_each_pod_set_keeping_the_rest() -> None:
    body = pytorchjob_body("p", [("Master", 1, "gpu-a"), ("Worker", 2, "gpu-b")])
    body["spec"]["runPolicy"]["cleanPodPolicy"] = "None"
    worker = body["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    worker["spec"]["tolerations"] = [{"key": "own", "operator": "Exists"}]
    worker["spec"]["nodeSelector"] = {"zone": "a"}
    taint = Toleration(key="gpu", operator="Exists", effect="NoSchedule")
    starts = [
        PodSetStart("master", node_selector={"pool": "a"}, labels={PODSET_LABEL: "master"}),
        PodSetStart(
            "worker", node_selector={"pool": "b"}, tolerations=[taint], labels={PODSET_LABEL: "worker"}
        ),
    ]
    started = _patched(body, PYTORCH.start_patch(pytorchjob_of(body), starts))
    assert started["spec"]["runPolicy"] == {"suspend": False, "cleanPodPolicy": "None"}
    master = started["spec"]["pytorchReplicaSpecs"]["Master"]
    workers = started["spec"]["pytorchReplicaSpecs"]["Worker"]
    assert master["template"]["spec"]["nodeSelector"] == {"pool": "a"}
    assert master["template"]["metadata"]["labels"] == {PODSET_LABEL: "master"}
    assert workers["template"]["spec"]["nodeSelector"] == {"zone": "a", "pool": "b"}
    assert workers["template"]["spec"]["tolerations"] == [
        {"key": "own", "operator": "Exists"},
        {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
    ]
    assert workers["replicas"] == 2
    assert workers["restartPolicy"] == "Never"
    assert workers["template"]["spec"]["resourceClaims"] == worker["spec"]["resourceClaims"]
    assert PYTORCH.restore_pending(pytorchjob_of(started))
    assert not PYTORCH.restore_pending(pytorchjob_of(body))
    # Restoring from the Workload's recorded pod sets gives the templates back as created.
    recorded = PYTORCH.pod_sets(pytorchjob_of(body))
    suspended = _patched(started, PYTORCH.suspend_patch(pytorchjob_of(started)))
    patch = PYTORCH.restore_patch(pytorchjob_of(suspended), recorded)
    assert patch is not None
    assert patch.subresource is None
    restored = _patched(suspended, patch.body)
    assert restored["spec"]["pytorchReplicaSpecs"] == body["spec"]["pytorchReplicaSpecs"]
    assert PYTORCH.restore_patch(pytorchjob_of(restored), recorded) is None
    # Pod sets that are not the Workload's: nothing to restore from.
    assert PYTORCH.restore_patch(pytorchjob_of(suspended), recorded[:1]) is None


def test_active_ready_and_finished_from_the_jobs_status_as_kueue_reads_it() -> None:
    body = mpijob_body("m", [("Launcher", 1, None), ("Worker", 2, "gpu-b")], suspend=False)
    job = mpijob_of(body)
    assert not MPI.is_active(job)
    assert not MPI.pods_ready(job)
    assert MPI.finished(job) is None
    assert MPI.pods_ready_count(job) == 0
    running = mpijob_of(with_status(body, ("Created", "True"), ("Running", "True"), active={"Worker": 2}))
    assert MPI.is_active(running)
    assert MPI.pods_ready(running)
    assert MPI.pods_ready_count(running) == 3
    assert MPI.finished(running) is None
    done = mpijob_of(with_status(body, ("Running", "False"), ("Succeeded", "True")))
    outcome = MPI.finished(done)
    assert outcome is not None
    assert outcome.succeeded
    assert outcome.message == "job is Succeeded"
    failed = mpijob_of(with_status(body, ("Failed", "True")))
    outcome = MPI.finished(failed)
    assert outcome is not None
    assert not outcome.succeeded
    assert MPI.reclaimable_pods(done) == {}
    assert MPI.owns(job, "MPIJob", "kubeflow.org/v2beta1", "m")
    assert not MPI.owns(job, "MPIJob", "kubeflow.org/v1", "m")


def _review(
    resource: tuple[str, str, str], body: dict[str, Any], old: dict[str, Any] | None = None
) -> AdmissionRequest:
    return AdmissionRequest(
        uid="u",
        resource=GroupVersionResource(*resource),
        operation="CREATE" if old is None else "UPDATE",
        namespace="ns",
        object=msgspec.Raw(msgspec.json.encode(body)),
        old_object=msgspec.Raw(b"null" if old is None else msgspec.json.encode(old)),
    )


POLICY = JobPolicy(frameworks=frozenset(["batch/job", *FRAMEWORKS]))
PYTORCH_RESOURCE = ("kubeflow.org", "v1", "pytorchjobs")
MPI_RESOURCE = ("kubeflow.org", "v2beta1", "mpijobs")


@pytest.mark.asyncio
async def test_the_webhook_suspends_a_queued_job_at_the_run_policy() -> None:
    door = pytorchjob.DOOR
    without = pytorchjob_body("p", [("Master", 1, None)], suspend=None)
    verdict = await door.mutate(_review(PYTORCH_RESOURCE, without), POLICY, Lookups())
    assert [dict(op) for op in verdict.patch] == [
        {"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}}
    ]
    unsuspended = pytorchjob_body("p", [("Master", 1, None)], suspend=False)
    verdict = await door.mutate(_review(PYTORCH_RESOURCE, unsuspended), POLICY, Lookups())
    assert [dict(op) for op in verdict.patch] == [
        {"op": "add", "path": "/spec/runPolicy/suspend", "value": True}
    ]
    unqueued = pytorchjob_body("p", [("Master", 1, None)], suspend=False, queue=None)
    assert (await door.mutate(_review(PYTORCH_RESOURCE, unqueued), POLICY, Lookups())).patch == ()
    off = JobPolicy(frameworks=frozenset({"batch/job"}))
    assert (await door.mutate(_review(PYTORCH_RESOURCE, unsuspended), off, Lookups())).patch == ()
    paths = {r.name: r.path for r in door.routes()}
    assert paths == {
        "mpytorchjob.kb.io": "/mutate-kubeflow-org-v1-pytorchjob",
        "vpytorchjob.kb.io": "/validate-kubeflow-org-v1-pytorchjob",
    }


@pytest.mark.asyncio
async def test_the_webhook_applies_the_queue_name_rules_and_names_the_scheduling_policys_class() -> None:
    door = pytorchjob.DOOR
    running = pytorchjob_body("p", [("Master", 1, None)], suspend=False)
    moved = pytorchjob_body("p", [("Master", 1, None)], suspend=False, queue="other")
    refused = await door.validate(_review(PYTORCH_RESOURCE, moved, running), POLICY, Lookups())
    assert not refused.allowed
    assert "metadata.labels[kueue.x-k8s.io/queue-name]" in refused.message
    classed = pytorchjob_body("p", [("Master", 1, None)])
    classed["spec"]["runPolicy"]["schedulingPolicy"] = {"priorityClass": "high"}
    refused = await door.validate(_review(PYTORCH_RESOURCE, classed), POLICY, Lookups())
    assert not refused.allowed
    assert refused.message.startswith('spec.runPolicy.schedulingPolicy.priorityClass: Invalid value: "high"')
    assert "priorityClassName: high" in refused.message
    # The same class on the first template, or a WorkloadPriorityClass label: Kueue's result, allowed.
    classed["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["priorityClassName"] = "high"
    assert (await door.validate(_review(PYTORCH_RESOURCE, classed), POLICY, Lookups())).allowed
    labelled = pytorchjob_body("p", [("Master", 1, None)])
    labelled["spec"]["runPolicy"]["schedulingPolicy"] = {"priorityClass": "high"}
    labelled["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "wpc"
    assert (await door.validate(_review(PYTORCH_RESOURCE, labelled), POLICY, Lookups())).allowed


@pytest.mark.asyncio
async def test_an_mpijob_running_its_launcher_as_a_worker_gets_kueues_pod_index_offset() -> None:
    door = mpijob.DOOR
    body = mpijob_body("m", [("Launcher", 1, None), ("Worker", 2, None)])
    body["spec"]["runLauncherAsWorker"] = True
    verdict = await door.mutate(_review(MPI_RESOURCE, body), POLICY, Lookups())
    offset = {"annotations": {"kueue.x-k8s.io/pod-index-offset": "1"}}
    assert [dict(op) for op in verdict.patch] == [
        {"op": "add", "path": "/spec/mpiReplicaSpecs/Worker/template/metadata", "value": offset}
    ]
    body["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["metadata"] = {"annotations": {"a": "b"}}
    verdict = await door.mutate(_review(MPI_RESOURCE, body), POLICY, Lookups())
    where = "/spec/mpiReplicaSpecs/Worker/template/metadata/annotations"
    assert [dict(op) for op in verdict.patch] == [
        {"op": "add", "path": f"{where}/kueue.x-k8s.io~1pod-index-offset", "value": "1"}
    ]
    grouped = mpijob_body("m", [("Launcher", 1, None), ("Worker", 2, None)])
    grouped["spec"]["runLauncherAsWorker"] = True
    grouped["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["metadata"] = {
        "annotations": {"kueue.x-k8s.io/podset-group-name": "g"}
    }
    assert (await door.mutate(_review(MPI_RESOURCE, grouped), POLICY, Lookups())).patch == ()
    plain = mpijob_body("m", [("Launcher", 1, None), ("Worker", 2, None)])
    assert (await door.mutate(_review(MPI_RESOURCE, plain), POLICY, Lookups())).patch == ()


@pytest.mark.asyncio
async def test_a_topology_annotation_on_a_replica_template_is_refused_by_name() -> None:
    """The controller places only batch/v1 Jobs in topology domains: a managed job asking for it on a replica
    type's template is refused naming the annotation; the pod-index offset Kueue's MPIJob webhook
    writes is no topology request and passes."""
    body = pytorchjob_body("p", [("Master", 1, None), ("Worker", 2, "gpu")])
    body["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"] = {
        "annotations": {"kueue.x-k8s.io/podset-required-topology": "rack"}
    }
    refused = await pytorchjob.DOOR.validate(_review(PYTORCH_RESOURCE, body), POLICY, Lookups())
    assert not refused.allowed
    assert (
        "spec.pytorchReplicaSpecs.Worker.template.metadata.annotations"
        "[kueue.x-k8s.io/podset-required-topology]" in refused.message
    )
    assert "topology-aware scheduling is supported for batch/v1 Jobs and JobSets only" in refused.message
    unqueued = pytorchjob_body("p", [("Worker", 1, None)], queue=None)
    unqueued["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"] = {
        "annotations": {"kueue.x-k8s.io/podset-required-topology": "rack"}
    }
    assert (await pytorchjob.DOOR.validate(_review(PYTORCH_RESOURCE, unqueued), POLICY, Lookups())).allowed
    mpi = mpijob_body("m", [("Launcher", 1, None), ("Worker", 1, "gpu")])
    mpi["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["metadata"] = {
        "annotations": {"kueue.x-k8s.io/pod-index-offset": "1"}
    }
    assert (await mpijob.DOOR.validate(_review(MPI_RESOURCE, mpi), POLICY, Lookups())).allowed
