"""The JobSet integration's pure parts: pod sets and counts, the start and restore patches,
finished, PodsReady, reclaimable pods, and the configuration's acceptance of its framework."""

from __future__ import annotations

from typing import Any

import msgspec

from reconciler.api import Toleration
from reconciler.config import parse_config
from reconciler.integrations import JOBSET, PODSET_LABEL, PodSetStart, enabled
from reconciler.integrations.children import controller_parent, suspend_child
from reconciler.integrations.registry import REGISTRY
from reconciler.runtime.shared.store import Store
from tests.support.jobsets import jobset_body, jobset_of

TWO = [("leader", 1, None, None, "gpu-a"), ("workers", 2, 2, 2, "gpu-b")]


def _patched(body: dict[str, Any], patch: bytes) -> dict[str, Any]:
    from tests.support.memory_api import merge

    merged: dict[str, Any] = merge(body, msgspec.json.decode(patch))
    return merged


def _pod_template(body: dict[str, Any], name: str) -> dict[str, Any]:
    (rj,) = [rj for rj in body["spec"]["replicatedJobs"] if rj["name"] == name]
    template: dict[str, Any] = rj["template"]["spec"]["template"]
    return template


def test_one_pod_set_per_replicated_job_counting_replicas_times_pods_per_job() -> None:
    body = jobset_body("js", [*TWO, ("a", 3, 4, 2, None), ("b", 2, 3, None, None), ("c", 2, 1, 5, None)])
    sets = JOBSET.pod_sets(jobset_of(body))
    # Pods per Job: parallelism (1 when unset), lowered to completions when those are fewer.
    assert [(ps.name, ps.count) for ps in sets] == [
        ("leader", 1),
        ("workers", 4),
        ("a", 6),
        ("b", 6),
        ("c", 2),
    ]
    # The pod set's template is the replicated job's pod template, as it is.
    assert msgspec.json.decode(sets[1].template) == _pod_template(body, "workers")


def test_start_injects_each_pod_sets_flavor_and_unsuspends_in_one_patch_keeping_the_rest() -> None:
    body = jobset_body("js", TWO)
    _pod_template(body, "workers")["spec"]["tolerations"] = [{"key": "own", "operator": "Exists"}]
    taint = Toleration(key="gpu", operator="Exists", effect="NoSchedule")
    starts = [
        PodSetStart("leader", node_selector={"pool": "a"}, labels={PODSET_LABEL: "leader"}),
        PodSetStart(
            "workers", node_selector={"pool": "b"}, tolerations=[taint], labels={PODSET_LABEL: "workers"}
        ),
    ]
    started = _patched(body, JOBSET.start_patch(jobset_of(body), starts))
    assert started["spec"]["suspend"] is False
    leader, workers = _pod_template(started, "leader"), _pod_template(started, "workers")
    assert leader["spec"]["nodeSelector"] == {"pool": "a"}
    assert leader["metadata"]["labels"] == {PODSET_LABEL: "leader"}
    assert workers["spec"]["nodeSelector"] == {"pool": "b"}
    assert workers["spec"]["tolerations"] == [
        {"key": "own", "operator": "Exists"},
        {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
    ]
    # Everything else in the list the patch replaces goes back as it was.
    for before, after in zip(body["spec"]["replicatedJobs"], started["spec"]["replicatedJobs"], strict=True):
        assert {k: v for k, v in after.items() if k != "template"} == {
            k: v for k, v in before.items() if k != "template"
        }
        assert after["template"]["spec"]["backoffLimit"] == 0
        assert (
            after["template"]["spec"]["template"]["spec"]["resourceClaims"]
            == (before["template"]["spec"]["template"]["spec"]["resourceClaims"])
        )
    assert JOBSET.restore_pending(jobset_of(started))
    assert not JOBSET.restore_pending(jobset_of(body))


def test_restore_gives_back_what_the_workload_recorded() -> None:
    body = jobset_body("js", TWO)
    _pod_template(body, "leader")["spec"]["nodeSelector"] = {"zone": "z1"}
    recorded = JOBSET.pod_sets(jobset_of(body))
    starts = [
        PodSetStart(ps.name, node_selector={"pool": "x"}, labels={PODSET_LABEL: ps.name}) for ps in recorded
    ]
    started = _patched(body, JOBSET.start_patch(jobset_of(body), starts))
    stopped = _patched(started, JOBSET.suspend_patch(jobset_of(started)))
    patch = JOBSET.restore_patch(jobset_of(stopped), recorded)
    assert patch is not None
    assert patch.subresource is None
    restored = _patched(stopped, patch.body)
    assert restored["spec"]["replicatedJobs"] == body["spec"]["replicatedJobs"]
    assert restored["spec"]["suspend"] is True
    assert not JOBSET.restore_pending(jobset_of(restored))
    # Already as recorded: nothing more to restore.
    assert JOBSET.restore_patch(jobset_of(restored), recorded) is None


def _with_status(status: dict[str, Any]) -> Any:
    body = jobset_body("js", TWO, suspend=False)
    body["status"] = status
    return jobset_of(body)


def test_finished_from_the_jobsets_completed_or_failed_condition() -> None:
    assert JOBSET.finished(_with_status({})) is None
    done = JOBSET.finished(
        _with_status({"conditions": [{"type": "Completed", "status": "True", "message": "ok"}]})
    )
    assert done is not None
    assert (done.succeeded, done.message) == (True, "ok")
    failed = JOBSET.finished(
        _with_status({"conditions": [{"type": "Failed", "status": "True", "message": "jobs failed"}]})
    )
    assert failed is not None
    assert (failed.succeeded, failed.message) == (False, "jobs failed")
    assert JOBSET.finished(_with_status({"conditions": [{"type": "Completed", "status": "False"}]})) is None


def test_pods_ready_when_every_job_is_ready_or_succeeded() -> None:
    # 1 leader Job + 2 worker Jobs of 2 pods: 5 pods.
    partial = _with_status(
        {"replicatedJobsStatus": [{"name": "leader", "ready": 1}, {"name": "workers", "ready": 1}]}
    )
    assert not JOBSET.pods_ready(partial)
    assert JOBSET.pods_ready_count(partial) == 3
    assert JOBSET.is_active(_with_status({"replicatedJobsStatus": [{"name": "workers", "active": 1}]}))
    assert not JOBSET.is_active(partial)
    full = _with_status(
        {
            "replicatedJobsStatus": [
                {"name": "leader", "succeeded": 1},
                {"name": "workers", "ready": 1, "succeeded": 1},
            ]
        }
    )
    assert JOBSET.pods_ready(full)
    assert JOBSET.pods_ready_count(full) == 5
    assert JOBSET.reclaimable_pods(full) == {"leader": 1, "workers": 2}


def test_the_configuration_enables_the_jobset_framework_by_its_kueue_name() -> None:
    doc = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]},
    }
    assert [i.kind for i in enabled(parse_config(doc).frameworks)] == ["Job", "JobSet"]
    assert REGISTRY["jobset.x-k8s.io/jobset"] is JOBSET


def test_a_job_controlled_by_a_jobset_is_its_child() -> None:
    store = Store(integrations={i.kind: i for i in REGISTRY.values()})
    owner = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "js", "controller": True}
    from reconciler.api import Job
    from tests.support.builders import job_body
    from tests.support.reconciler_harness import decode

    body = job_body("js-workers-0", queue=None)
    body["metadata"]["ownerReferences"] = [owner]
    child = decode(body, Job)
    parent = controller_parent(child, store.integrations)
    assert parent is not None
    assert (parent[0] is JOBSET, parent[1]) == (True, "js")
    # Another apiVersion, or no controller flag: not a child.
    body["metadata"]["ownerReferences"] = [{**owner, "apiVersion": "jobset.x-k8s.io/v1"}]
    assert controller_parent(decode(body, Job), store.integrations) is None
    body["metadata"]["ownerReferences"] = [{**owner, "controller": False}]
    assert controller_parent(decode(body, Job), store.integrations) is None
    # Suspended only while it runs, unfinished, without its parent admitted.
    running = decode({**job_body("j"), "spec": {**job_body("j")["spec"], "suspend": False}}, Job)
    assert suspend_child(REGISTRY["batch/job"], running, parent_admitted=False)
    assert not suspend_child(REGISTRY["batch/job"], running, parent_admitted=True)
    assert not suspend_child(REGISTRY["batch/job"], decode(job_body("j"), Job), parent_admitted=False)


def test_a_jobset_v0_12_object_decodes_with_its_new_fields_left_aside() -> None:
    """JobSet v0.12.0 adds volumeClaimPolicies, in-place restarts (their status counters and the
    RestartingJobSet condition) and per-Job restart counts; Kueue v0.18.1 reads none of them,
    and neither do the pod sets, PodsReady or finished here."""
    body = jobset_body("js", TWO)
    body["spec"]["volumeClaimPolicies"] = [
        {"templates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]}
    ]
    body["status"] = {
        "conditions": [
            {"type": "RestartingJobSet", "status": "True", "reason": "InPlaceRestart", "message": ""}
        ],
        "previousInPlaceRestartAttempt": 0,
        "currentInPlaceRestartAttempt": 1,
        "jobRestarts": [1, 0],
        "jobRestartsCountTowardsMax": [1, 0],
        "replicatedJobsStatus": [{"name": "leader", "ready": 1}, {"name": "workers", "ready": 2}],
    }
    jobset = jobset_of(body)
    assert [(ps.name, ps.count) for ps in JOBSET.pod_sets(jobset)] == [("leader", 1), ("workers", 4)]
    assert JOBSET.pods_ready(jobset)
    assert JOBSET.finished(jobset) is None
