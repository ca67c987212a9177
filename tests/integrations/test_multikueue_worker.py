"""Issue 41 on the in-memory cluster: this controller as a MultiKueue worker, as Kueue v0.18.1's
worker behaves. A manager copies its Workload to the worker (no owner, the origin label), then a
copy of the job naming it in `kueue.x-k8s.io/prebuilt-workload-name`:

- the Workload is queued and admitted like any other and never finished as an orphan;
- a JobSet (as a batch/v1 Job) adopts it instead of creating one of its own and starts with the
  worker pod label on every replicated job;
- the manager's cleanup (the job deleted, then the Workload) frees the quota for the next one;
- metrics count the manager's Workloads per origin, ClusterQueue and status;
- an eviction on the manager (DeactivationTarget, reason EvictedOnManagerCluster, written on the
  worker's copy) deactivates and evicts the worker's Workload and suspends its job.
"""

from __future__ import annotations

import copy
from typing import Any

from reconciler.api.resources import JOBS, JOBSETS, WORKLOADS
from reconciler.config import parse_config
from reconciler.integrations.prebuilt import (
    MULTIKUEUE_ORIGIN_LABEL,
    MULTIKUEUE_WORKER_POD_LABEL,
    PREBUILT_WORKLOAD_KEY,
)
from reconciler.observability.metrics import Metrics
from reconciler.runtime.loop.snapshot import state_snapshot
from tests.support.builders import job_body
from tests.support.jobset_queues import TWO, condition, queues
from tests.support.jobsets import jobset_body
from tests.support.memory_cluster import GPU, T0, Cluster
from tests.support.metrics import scrape, value

ORIGIN = "multikueue"
# JobSets and Jobs, GPUs through deviceClassMappings; waitForPodsReady as v1beta2 defaults it
# (30 min), which a Workload admitted before its job exists is subject to, as in Kueue.
CONFIG = parse_config(
    {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]},
        "resources": {"deviceClassMappings": [{"name": GPU, "deviceClassNames": ["gpu.nvidia.com"]}]},
    }
)


def jobset_cluster() -> Cluster:
    return Cluster(CONFIG)


def _manager_copy(workload: dict[str, Any], name: str) -> dict[str, Any]:
    """What a MultiKueue manager creates on a worker from its own Workload: the spec, a name of
    its own, no owner, the origin label (and no status)."""
    meta = workload["metadata"]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "labels": {MULTIKUEUE_ORIGIN_LABEL: ORIGIN},
        },
        "spec": copy.deepcopy(workload["spec"]),
    }


def _jobset_workload(name: str) -> dict[str, Any]:
    """The Workload a manager made for a JobSet (on a cluster without quota: never admitted)."""
    manager = jobset_cluster()
    queues(manager, gpus=0)
    manager.api.add(JOBSETS, jobset_body(name, TWO))
    manager.settle()
    return _manager_copy(manager.workloads()[f"JobSet/{name}"], f"{name}-mk1")


def _job_workload(name: str) -> dict[str, Any]:
    manager = jobset_cluster()
    queues(manager, gpus=0)
    manager.api.add(JOBS, _gpu_job(name))
    manager.settle()
    return _manager_copy(manager.workloads()[f"Job/{name}"], f"{name}-mk1")


def _gpu_job(name: str, prebuilt: str | None = None) -> dict[str, Any]:
    body = job_body(name, queue="lq", claims=[{"name": "g", "resourceClaimTemplateName": "gpu-a"}])
    if prebuilt is not None:
        body["metadata"]["labels"].update({PREBUILT_WORKLOAD_KEY: prebuilt, MULTIKUEUE_ORIGIN_LABEL: ORIGIN})
    return body


def _stored_workloads(c: Cluster) -> dict[str, dict[str, Any]]:
    return {name: body for (plural, _, name), body in c.api.objects.items() if plural == WORKLOADS.plural}


def _holds_quota(workload: dict[str, Any]) -> bool:
    return workload.get("status", {}).get("admission") is not None


def test_a_managers_workload_is_admitted_and_never_finished_as_an_orphan() -> None:
    worker = jobset_cluster()
    queues(worker, gpus=3)
    worker.api.add(WORKLOADS, _jobset_workload("first"))
    worker.settle()
    # No job yet (the manager creates it once the Workload is admitted): admitted all the same.
    for later in (T0 + 60, T0 + 25 * 60):
        worker.tick(later)
        stored = _stored_workloads(worker)["first-mk1"]
        assert _holds_quota(stored)
        admitted = condition(stored, "Admitted")
        assert admitted is not None
        assert admitted["status"] == "True"
        assert condition(stored, "Finished") is None
        assert stored["metadata"].get("ownerReferences", []) == []
    assert worker.used_gpus() == 3


def test_a_jobset_adopts_the_managers_workload_and_runs_with_the_worker_pod_label() -> None:
    worker = jobset_cluster()
    queues(worker, gpus=3)
    worker.api.add(WORKLOADS, _jobset_workload("first"))
    worker.settle()
    jobset = jobset_body("first", TWO)
    jobset["metadata"]["labels"].update({PREBUILT_WORKLOAD_KEY: "first-mk1", MULTIKUEUE_ORIGIN_LABEL: ORIGIN})
    worker.api.add(JOBSETS, jobset)
    worker.settle()
    # Its own Workload is never created: it runs under the manager's, which it now controls.
    workloads = _stored_workloads(worker)
    assert sorted(workloads) == ["first-mk1"]
    owned = workloads["first-mk1"]
    uid = worker.jobset("first")["metadata"]["uid"]
    assert owned["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "name": "first",
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert owned["metadata"]["labels"] == {MULTIKUEUE_ORIGIN_LABEL: ORIGIN, "kueue.x-k8s.io/job-uid": uid}
    started = worker.jobset("first")
    assert started["spec"]["suspend"] is False
    for rj in started["spec"]["replicatedJobs"]:
        labels = rj["template"]["spec"]["template"]["metadata"]["labels"]
        assert labels[MULTIKUEUE_WORKER_POD_LABEL] == "true"
    assert worker.used_gpus() == 3
    assert "CreatedWorkload" not in worker.api.reasons("JobSet", "first")


def test_the_managers_cleanup_frees_the_quota_for_its_next_workload() -> None:
    worker = jobset_cluster()
    queues(worker, gpus=1)
    worker.api.add(WORKLOADS, _job_workload("a"))
    worker.api.add(WORKLOADS, _job_workload("b"))
    worker.settle()
    stored = _stored_workloads(worker)
    assert (_holds_quota(stored["a-mk1"]), _holds_quota(stored["b-mk1"])) == (True, False)
    worker.api.add(JOBS, _gpu_job("a", prebuilt="a-mk1"))
    worker.settle()
    assert worker.job("a")["spec"]["suspend"] is False
    # The manager removes its remote objects: the job first, then the Workload.
    worker.api.delete(JOBS, "ns", "a")
    worker.settle()
    worker.api.delete(WORKLOADS, "ns", "a-mk1")
    worker.settle()
    stored = _stored_workloads(worker)
    assert sorted(stored) == ["b-mk1"]
    assert _holds_quota(stored["b-mk1"])
    assert worker.used_gpus() == 1


def test_an_eviction_on_the_manager_deactivates_the_workers_workload_and_suspends_its_job() -> None:
    worker = jobset_cluster()
    queues(worker, gpus=1)
    worker.api.add(WORKLOADS, _job_workload("a"))
    worker.settle()
    worker.api.add(JOBS, _gpu_job("a", prebuilt="a-mk1"))
    worker.settle()
    assert worker.job("a")["spec"]["suspend"] is False
    # Kueue's manager writes the target on the worker's copy (SetDeactivationTarget).
    target = {
        "type": "DeactivationTarget",
        "status": "True",
        "reason": "EvictedOnManagerCluster",
        "message": "Evicted on manager: Preempted to accommodate a workload",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    conditions = [*_stored_workloads(worker)["a-mk1"]["status"]["conditions"], target]
    worker.api.change(WORKLOADS, "ns", "a-mk1", {"status": {"conditions": conditions}})
    worker.settle()
    stored = _stored_workloads(worker)["a-mk1"]
    assert stored["spec"]["active"] is False
    evicted = condition(stored, "Evicted")
    assert evicted is not None
    assert (evicted["status"], evicted["reason"]) == ("True", "DeactivatedDueToEvictedOnManagerCluster")
    assert evicted["message"] == (
        "The workload is deactivated due to Evicted on manager: Preempted to accommodate a workload"
    )
    assert condition(stored, "DeactivationTarget") is None
    assert worker.job("a")["spec"]["suspend"] is True
    assert not _holds_quota(stored)
    assert worker.used_gpus() == 0


def test_metrics_count_a_managers_workloads_per_origin_queue_and_status() -> None:
    worker = jobset_cluster()
    queues(worker, gpus=1)
    worker.api.add(WORKLOADS, _job_workload("a"))
    worker.api.add(WORKLOADS, _job_workload("b"))
    worker.api.add(JOBS, _gpu_job("c"))  # this cluster's own: not counted
    worker.settle()
    metrics = Metrics("leader")
    metrics.state_source = lambda: state_snapshot(worker.reconciler)
    _, samples = scrape(metrics)
    family = "dra_quota_multikueue_workloads"
    assert value(samples, family, origin=ORIGIN, cluster_queue="cq", status="admitted") == 1
    assert value(samples, family, origin=ORIGIN, cluster_queue="cq", status="pending") == 1
    assert sum(v for (name, _), v in samples.items() if name == family) == 2
