"""The TrainJob integration at the seam: its pod sets made from the runtime's JobSet template
with the TrainJob's overrides (numNodes, resourcesPerNode, image, runtime patches) as the trainer
makes its JobSet, its start through Kueue's runtime patch, its stop and restore, its status read
as Kueue reads it, and the reasons a TrainJob waits (runtime missing, MPI, MultiKueue)."""

from __future__ import annotations

from typing import Any

import msgspec

from reconciler.admission.queue_rules import JobPolicy
from reconciler.api import Toleration
from reconciler.api.resources import Resource
from reconciler.api.trainer import TrainingRuntime, TrainJob
from reconciler.integrations import PodSetStart
from reconciler.integrations.trainjob import TRAINJOB, default_trainjob
from reconciler.integrations.trainjob.merge import strategic_merge
from tests.support.trainjobs import ANCESTOR, node_job, runtime_body, trainjob_body

Obj = dict[str, Any]


def resolved(job: Obj, *runtimes: Obj) -> TrainJob:
    kept = {
        ("", r["metadata"]["name"])
        if "namespace" not in r["metadata"]
        else (r["metadata"]["namespace"], r["metadata"]["name"]): msgspec.json.decode(
            msgspec.json.encode(r), type=TrainingRuntime
        )
        for r in runtimes
    }

    def lookup(resource: Resource, namespace: str, name: str) -> Any:
        found = kept.get((namespace, name))
        return found if found is not None and found.kind == resource.kind else None

    obj = msgspec.json.decode(msgspec.json.encode(job), type=TrainJob)
    return TRAINJOB.resolve(obj, lookup)


def template(ps: Any) -> Obj:
    decoded: Obj = msgspec.json.decode(ps.template)
    return decoded


def test_pod_sets_follow_the_runtime_and_the_trainjob_overrides() -> None:
    initializer = {
        "name": "dataset-initializer",
        "replicas": 3,
        "template": {
            "metadata": {"labels": {ANCESTOR: "dataset-initializer"}},
            "spec": {"template": {"spec": {"containers": [{"name": "dataset-initializer", "image": "i"}]}}},
        },
    }
    extra = {"name": "sidecar", "replicas": 2, "template": {"spec": {"parallelism": 3, "completions": 2}}}
    runtime = runtime_body(
        jobs=[initializer, node_job(parallelism=5), extra], ml_policy={"numNodes": 2, "torch": {}}
    )
    trainer = {"image": "train:v2", "resourcesPerNode": {"requests": {"cpu": "4"}, "limits": {"cpu": "4"}}}
    job = resolved(trainjob_body("t", num_nodes=3, trainer=trainer), runtime)
    assert TRAINJOB.unresolved(job) is None
    pod_sets = TRAINJOB.pod_sets(job)
    # One Job per initializer and trainer step; the trainer's node count is the TrainJob's numNodes;
    # any other replicated job keeps its replicas and counts max(parallelism, 1) pods (completions
    # are set to the same count).
    assert [(ps.name, ps.count) for ps in pod_sets] == [
        ("dataset-initializer", 1),
        ("node", 3),
        ("sidecar", 6),
    ]
    node = template(pod_sets[1])["spec"]["containers"][0]
    assert node["image"] == "train:v2"
    # resourcesPerNode replaces the container's resources (its claims too, as the trainer does).
    assert node["resources"] == {"limits": {"cpu": "4"}, "requests": {"cpu": "4"}}
    assert template(pod_sets[1])["spec"]["resourceClaims"] == [
        {"name": "gpu", "resourceClaimTemplateName": "gpu"}
    ]


def test_the_runtime_numnodes_counts_without_an_override_and_one_without_policy_its_parallelism() -> None:
    with_policy = runtime_body(jobs=[node_job(parallelism=7)], ml_policy={"numNodes": 2})
    assert [ps.count for ps in TRAINJOB.pod_sets(resolved(trainjob_body("t"), with_policy))] == [2]
    plain = runtime_body(jobs=[node_job(parallelism=7)])
    assert [ps.count for ps in TRAINJOB.pod_sets(resolved(trainjob_body("t"), plain))] == [7]
    # numNodes of the TrainJob applies without an mlPolicy too (the plain-ML plugin).
    assert [ps.count for ps in TRAINJOB.pod_sets(resolved(trainjob_body("t", num_nodes=4), plain))] == [4]


def test_runtime_patches_are_merged_strategically_in_order() -> None:
    user = {
        "manager": "example.com/me",
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "spec": {
                                    "template": {
                                        "metadata": {"labels": {"team": "a"}},
                                        "spec": {
                                            "nodeSelector": {"zone": "z1"},
                                            "containers": [
                                                {"name": "node", "env": [{"name": "A", "value": "1"}]}
                                            ],
                                        },
                                    }
                                }
                            },
                        }
                    ]
                }
            }
        },
    }
    job = resolved(trainjob_body("t", patches=[user]), runtime_body())
    pod = template(TRAINJOB.pod_sets(job)[0])
    assert pod["metadata"]["labels"] == {"team": "a"}
    assert pod["spec"]["nodeSelector"] == {"zone": "z1"}
    (container,) = pod["spec"]["containers"]
    assert container["image"] == "busybox"
    assert container["env"] == [{"name": "A", "value": "1"}]


def test_strategic_merge_replaces_plain_lists_and_merges_keyed_ones() -> None:
    base = {
        "tolerations": [{"key": "a"}],
        "containers": [{"name": "c", "image": "x"}],
        "nodeSelector": {"k": "v"},
    }
    patch = {
        "tolerations": [{"key": "b"}],
        "containers": [{"name": "c", "args": ["1"]}],
        "nodeSelector": {"k": None},
    }
    assert strategic_merge(base, patch) == {
        "tolerations": [{"key": "b"}],
        "containers": [{"name": "c", "image": "x", "args": ["1"]}],
        "nodeSelector": {},
    }


def test_start_fills_kueues_patch_and_unsuspends_in_one_write_and_restore_empties_it() -> None:
    job = resolved(trainjob_body("t"), runtime_body())
    start = PodSetStart(
        "node",
        node_selector={"gpu": "t4"},
        tolerations=[Toleration(key="gpu", operator="Exists", effect="NoSchedule")],
        labels={"kueue.x-k8s.io/podset": "node"},
    )
    patch = msgspec.json.decode(TRAINJOB.start_patch(job, [start]))
    assert patch["spec"]["suspend"] is False
    (kueue,) = patch["spec"]["runtimePatches"]
    assert kueue["manager"] == "kueue.x-k8s.io/manager"
    (entry,) = kueue["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    pod = entry["template"]["spec"]["template"]
    assert entry["name"] == "node"
    assert pod["metadata"] == {"labels": {"kueue.x-k8s.io/podset": "node"}}
    assert pod["spec"]["nodeSelector"] == {"gpu": "t4"}
    assert pod["spec"]["tolerations"] == [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    # As stored after the start: pending restore; the injected labels show in the pod sets.
    body = trainjob_body("t", suspend=False)
    body["spec"]["runtimePatches"] = patch["spec"]["runtimePatches"]
    started = resolved(body, runtime_body())
    assert TRAINJOB.restore_pending(started)
    assert template(TRAINJOB.pod_sets(started)[0])["spec"]["nodeSelector"] == {"gpu": "t4"}
    # Stopped while a Job is still active: nothing restored yet (the trainer would refuse it).
    body["spec"]["suspend"] = True
    body["status"] = {"jobsStatus": [{"name": "node", "active": 1}]}
    assert TRAINJOB.restore_patch(resolved(body, runtime_body()), []) is None
    body["status"] = {"jobsStatus": [{"name": "node", "active": 0}]}
    restore = TRAINJOB.restore_patch(resolved(body, runtime_body()), [])
    assert restore is not None
    assert msgspec.json.decode(restore.body) == {
        "spec": {
            "runtimePatches": [
                {"manager": "kueue.x-k8s.io/manager", "trainingRuntimeSpec": {"template": {"spec": {}}}}
            ]
        }
    }


def test_status_read_as_kueue_reads_it() -> None:
    body = trainjob_body("t", num_nodes=2)
    body["status"] = {"jobsStatus": [{"name": "node", "ready": 1, "active": 1}]}
    job = resolved(body, runtime_body())
    # One Job of two pods: ready once that Job is.
    assert TRAINJOB.pods_ready(job)
    assert TRAINJOB.pods_ready_count(job) == 2
    assert TRAINJOB.is_active(job)
    assert TRAINJOB.finished(job) is None
    body["status"] = {
        "jobsStatus": [{"name": "node", "succeeded": 1}],
        "conditions": [{"type": "Complete", "status": "True", "reason": "JobsCompleted", "message": "done"}],
    }
    done = resolved(body, runtime_body())
    outcome = TRAINJOB.finished(done)
    assert outcome is not None
    assert (outcome.succeeded, outcome.message) == (True, "done")
    assert TRAINJOB.reclaimable_pods(done) == {"node": 2}
    failed = {"type": "Failed", "status": "True", "reason": "Failed", "message": "boom"}
    body["status"] = {"conditions": [failed]}
    outcome = TRAINJOB.finished(resolved(body, runtime_body()))
    assert outcome is not None
    assert not outcome.succeeded


def test_a_trainjob_waits_naming_what_is_missing() -> None:
    missing = resolved(trainjob_body("t", runtime="nope"))
    assert TRAINJOB.unresolved(missing) == (
        "spec.runtimeRef: ClusterTrainingRuntime nope not found (create it, or name an existing one)"
    )
    assert not TRAINJOB.pods_ready(missing)
    local = resolved(
        trainjob_body("t", runtime="mine", kind="TrainingRuntime"), runtime_body("mine", namespace="ns")
    )
    assert TRAINJOB.unresolved(local) is None
    mpi = resolved(trainjob_body("t"), runtime_body(ml_policy={"mpi": {}}))
    assert "spec.mlPolicy.mpi is not handled" in (TRAINJOB.unresolved(mpi) or "")
    body = trainjob_body("t")
    body["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    assert "spec.managedBy" in (TRAINJOB.unresolved(resolved(body, runtime_body())) or "")


def test_the_webhook_suspends_a_queued_trainjob_and_adds_kueues_runtime_patch() -> None:
    body = trainjob_body("t", suspend=False)
    body["spec"]["runtimePatches"] = []
    job = msgspec.json.decode(msgspec.json.encode(body), type=TrainJob)
    policy = JobPolicy(frameworks=frozenset({"trainer.kubeflow.org/trainjob"}))
    ops = default_trainjob(job, policy, default_queue_exists=False)
    assert ops == [
        {"op": "add", "path": "/spec/suspend", "value": True},
        {
            "op": "add",
            "path": "/spec/runtimePatches",
            "value": [
                {"manager": "kueue.x-k8s.io/manager", "trainingRuntimeSpec": {"template": {"spec": {}}}}
            ],
        },
    ]
    assert (
        default_trainjob(job, JobPolicy(frameworks=frozenset({"batch/job"})), default_queue_exists=False)
        == []
    )


def test_a_trainjob_without_kueues_patch_gets_it_when_started() -> None:
    """Created while the webhook was off: Kueue's patch is added by the start (Kueue would fail to
    start it, its quota held)."""
    body = trainjob_body("t")
    body["spec"]["runtimePatches"] = [{"manager": "example.com/me"}]
    job = resolved(body, runtime_body())
    assert TRAINJOB.unresolved(job) is None
    patch = msgspec.json.decode(TRAINJOB.start_patch(job, [PodSetStart("node", node_selector={"gpu": "t4"})]))
    mine, kueue = patch["spec"]["runtimePatches"]
    assert mine == {"manager": "example.com/me"}
    assert kueue["manager"] == "kueue.x-k8s.io/manager"
    (entry,) = kueue["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert entry["template"]["spec"]["template"]["spec"]["nodeSelector"] == {"gpu": "t4"}
