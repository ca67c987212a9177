"""Topology-aware scheduling for JobSets (Kueue's TAS for jobset.x-k8s.io/jobset): the door accepts
the placement annotations on each replicated job's pod template (slices and groups refused by
name); a JobSet admitted on a TAS flavor starts with Kueue's topology gate in every replicated
job's template, each pod set placed on its own, and the pods of its Jobs released into their
domains by rank (the Job's index within the replicated job and the pod's completion index); one
that fits no rack waits with Kueue's message; a restore takes the gate back out."""

from __future__ import annotations

import dataclasses
from typing import Any

import msgspec
import pytest

from reconciler.admission.queue_rules import JobPolicy
from reconciler.admission.review import AdmissionRequest, GroupVersionResource
from reconciler.api import TopologyAssignment
from reconciler.api.resources import (
    JOBS,
    JOBSETS,
    PODS,
)
from reconciler.config import Configuration
from reconciler.core.topology.assignment import decode_assignment
from reconciler.integrations.jobset import JOBSET
from reconciler.runtime.shared.actions import MergePatch
from reconciler.webhook.handlers import handle, routes
from tests.support.jobset_queues import CONFIG
from tests.support.jobsets import jobset_body, jobset_of
from tests.support.memory_cluster import Cluster, condition
from tests.support.topology_cluster import GATE, HOST, RACK, RACKS, tas_cluster

REQUIRED = "kueue.x-k8s.io/podset-required-topology"
# Replicated job "a": 2 Jobs of 2 pods; "b": 2 Jobs of 1 pod; every pod 2 CPUs (2 per 4-CPU node).
SHAPE = [("a", 2, 2, 2, None), ("b", 2, 1, 1, None)]
POLICY = JobPolicy(frameworks=frozenset({"batch/job", "jobset.x-k8s.io/jobset"}))
VALIDATE = next(r for r in routes() if r.path == "/validate-jobset-x-k8s-io-v1alpha2-jobset")


# The jobset framework alone: a JobSet's Jobs (and so their pods' controller) are of no enabled kind.
JOBSET_ONLY = dataclasses.replace(CONFIG, frameworks=("jobset.x-k8s.io/jobset",))


def tas_jobset(name: str, shape: Any = SHAPE, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    body = jobset_body(name, shape)
    for rj in body["spec"]["replicatedJobs"]:
        template = rj["template"]["spec"]["template"]
        template["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
        template["metadata"] = {"annotations": dict(annotations or {REQUIRED: RACK})}
    return body


def templates(c: Cluster, name: str) -> dict[str, Any]:
    return {rj["name"]: rj["template"]["spec"]["template"] for rj in c.jobset(name)["spec"]["replicatedJobs"]}


def make_pods(c: Cluster, jobset: str, rj: str, jobs: int, per_job: int, names: list[str]) -> None:
    """What the JobSet and job controllers make: a Job per index, the last first, its pods from
    the replicated job's template with the Job's index and the completion index (named from
    `names` in turn)."""
    owner = c.jobset(jobset)["metadata"]
    template = templates(c, jobset)[rj]
    for job_index in reversed(range(jobs)):
        job = f"{jobset}-{rj}-{job_index}"
        js_ref = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": jobset}
        c.api.add(
            JOBS,
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": job,
                    "namespace": "ns",
                    "ownerReferences": [{**js_ref, "uid": owner["uid"], "controller": True}],
                },
                "spec": {"template": template, "parallelism": per_job, "completions": per_job},
            },
        )
        job_uid = c.api.get(JOBS, "ns", job)["metadata"]["uid"]
        for index in range(per_job):
            pod = msgspec.json.decode(msgspec.json.encode(template))
            meta = pod.setdefault("metadata", {})
            meta.update(name=names.pop(0), namespace="ns")
            meta.setdefault("labels", {}).update(
                {
                    "batch.kubernetes.io/job-completion-index": str(index),
                    "jobset.sigs.k8s.io/job-index": str(job_index),
                }
            )
            job_ref = {"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": job_uid}
            meta["ownerReferences"] = [{**job_ref, "controller": True}]
            pod["status"] = {"phase": "Pending"}
            c.api.add(PODS, pod)


def ungates(actions: list[Any]) -> list[MergePatch]:
    return [a for a in actions if isinstance(a, MergePatch) and a.purpose == "pod-ungate"]


@pytest.mark.parametrize("config", [CONFIG, JOBSET_ONLY], ids=["with-batch-job", "jobset-only"])
def test_each_replicated_job_is_placed_in_one_rack_and_its_pods_released_by_job_and_pod_index(
    config: Configuration,
) -> None:
    """Its pods are found by the Workload they name (as Kueue finds them), also when the batch/job
    framework is off and their Jobs are of no enabled kind."""
    c = tas_cluster(config)
    c.api.add(JOBSETS, tas_jobset("js"))
    c.settle()
    assert c.jobset("js")["spec"]["suspend"] is False
    workload = c.workloads()["JobSet/js"]
    assignments = {a["name"]: a for a in workload["status"]["admission"]["podSetAssignments"]}
    assert set(assignments) == {"a", "b"}
    assert all(a["topologyAssignment"] is not None for a in assignments.values())
    for template in templates(c, "js").values():
        assert template["spec"]["schedulingGates"] == [{"name": GATE}]
        assert template["metadata"]["annotations"]["kueue.x-k8s.io/workload"] == workload["metadata"]["name"]
    # Job 1's pods come first (q, s), then Job 0's (p, r): by their completion index alone they
    # would take the first node; by rank (Job index x 2 + completion index) Job 0's take it.
    make_pods(c, "js", "a", 2, 2, ["a-q", "a-s", "a-p", "a-r"])
    make_pods(c, "js", "b", 2, 1, ["b-y", "b-x"])
    patches = ungates(c.settle())
    assert sorted(p.name for p in patches) == ["a-p", "a-q", "a-r", "a-s", "b-x", "b-y"]
    hosts = {
        name: c.pod(name)["spec"]["nodeSelector"][HOST] for name in ("a-p", "a-q", "a-r", "a-s", "b-x", "b-y")
    }
    assert all(GATE not in str(c.pod(name)["spec"].get("schedulingGates")) for name in hosts)
    assert len({RACKS[hosts[n]] for n in ("a-p", "a-q", "a-r", "a-s")}) == 1  # required: rack
    assert len({RACKS[hosts[n]] for n in ("b-x", "b-y")}) == 1
    placed = decode_assignment(msgspec.convert(assignments["a"]["topologyAssignment"], TopologyAssignment))
    first, second = (domain.values[-1] for domain in placed.domains)
    assert (hosts["a-p"], hosts["a-r"], hosts["a-q"], hosts["a-s"]) == (first, first, second, second)
    # Replays change nothing: no pod is released twice.
    for name in hosts:
        c.api.change(PODS, "ns", name, {"status": {"phase": "Running"}})
    c.reconciler.flush_status()
    assert ungates(c.settle()) == []


def test_a_jobset_whose_replicated_job_fits_no_rack_waits_with_kueues_message() -> None:
    c = tas_cluster(CONFIG)
    # 5 pods of 2 CPUs: a rack holds 4.
    c.api.add(JOBSETS, tas_jobset("big", [("a", 5, 1, 1, None)]))
    c.settle()
    assert c.jobset("big")["spec"]["suspend"] is True
    assert condition(c.workloads()["JobSet/big"], "QuotaReserved") == (
        "False",
        "Pending",
        'couldn\'t assign flavors to pod set a: topology "default" allows to fit only 4 out of 5 pod(s)',
    )


def test_restoring_a_stopped_jobset_takes_the_gate_and_the_workload_annotation_back_out() -> None:
    c = tas_cluster(CONFIG)
    c.api.add(JOBSETS, tas_jobset("js"))
    c.settle()
    started = jobset_of(c.jobset("js"))
    recorded = JOBSET.pod_sets(jobset_of(tas_jobset("js")))
    patch = JOBSET.restore_patch(started, recorded)
    assert patch is not None
    for rj in msgspec.json.decode(patch.body)["spec"]["replicatedJobs"]:
        template = rj["template"]["spec"]["template"]
        assert "schedulingGates" not in template["spec"]
        assert template["metadata"]["annotations"] == {REQUIRED: RACK}


async def verdict(annotations: dict[str, str]) -> Any:
    body = tas_jobset("js", annotations=annotations)
    request = AdmissionRequest(
        uid="u",
        resource=GroupVersionResource("jobset.x-k8s.io", "v1alpha2", "jobsets"),
        operation="CREATE",
        namespace="ns",
        object=msgspec.Raw(msgspec.json.encode(body)),
    )
    return await handle(VALIDATE, request, POLICY, None)  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_the_jobset_webhook_accepts_the_placement_annotations_and_refuses_slices_by_name() -> None:
    for asked in ({REQUIRED: RACK}, {"kueue.x-k8s.io/podset-preferred-topology": RACK}):
        result = await verdict(asked)
        assert result.allowed, result.message
    result = await verdict({REQUIRED: RACK, "kueue.x-k8s.io/podset-group-name": "g"})
    assert not result.allowed
    path = "spec.replicatedJobs[0].template.spec.template.metadata.annotations"
    assert result.message is not None
    assert result.message.startswith(
        f"[{path}[kueue.x-k8s.io/podset-group-name]: Forbidden: not supported by this controller's "
        "topology-aware scheduling"
    )
