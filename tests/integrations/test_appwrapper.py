"""The AppWrapper integration's pure parts: pod sets as Kueue reads them through AppWrapper's
utilities (recorded, declared or inferred per component; the template Kueue compares, with the
DRA claims kept), the start's podSetInfos and their restore, finished, active and PodsReady from
the AppWrapper's status, and the objects it wraps being its children."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from reconciler.api import Toleration
from reconciler.integrations import PODSET_LABEL, PodSetStart, controller_parent
from reconciler.integrations.appwrapper import APPWRAPPER, infer, kueue_template
from reconciler.integrations.appwrapper.podsets import PathError, value_at
from reconciler.integrations.batchjob import BATCH_JOB
from reconciler.integrations.registry import REGISTRY
from tests.support.appwrappers import appwrapper_body, appwrapper_of, wrapped_job
from tests.support.builders import job_body


def _patched(body: dict[str, Any], patch: bytes) -> dict[str, Any]:
    from tests.support.memory_api import merge

    merged: dict[str, Any] = merge(body, msgspec.json.decode(patch))
    return merged


def _sets(body: dict[str, Any]) -> list[tuple[str, int | None]]:
    return [(ps.name, ps.count) for ps in APPWRAPPER.pod_sets(appwrapper_of(body))]


def test_a_wrapped_jobs_pod_set_counts_its_parallelism_or_fewer_completions_named_by_index() -> None:
    body = appwrapper_body(
        "aw",
        [
            {"template": wrapped_job("a", parallelism=3)},
            {"template": wrapped_job("b", parallelism=4, completions=2)},
        ],
    )
    assert _sets(body) == [("aw-0", 3), ("aw-1", 2)]
    (first, _) = APPWRAPPER.pod_sets(appwrapper_of(body))
    template = msgspec.json.decode(first.template)
    # The claims stay (beyond Kueue: AppWrapper v1.2.2 drops them), so the core charges the GPUs.
    assert template["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "gpu-a"}]
    (container,) = template["spec"]["containers"]
    assert container["resources"] == {"requests": {"cpu": "1"}, "claims": [{"name": "gpu"}]}
    # The API server's defaults filled in as AppWrapper's GetPodTemplateSpec does.
    assert (container["imagePullPolicy"], container["terminationMessagePath"]) == (
        "IfNotPresent",
        "/dev/termination-log",
    )
    assert template["spec"]["schedulerName"] == "default-scheduler"
    assert template["spec"]["restartPolicy"] == "Never"
    assert template["metadata"] == {"labels": {"app": "a"}}


def test_declared_pod_sets_win_over_inference_and_recorded_ones_over_both() -> None:
    job = wrapped_job("a", parallelism=3)
    declared = [{"path": "template.spec.template", "replicas": 5}]
    body = appwrapper_body("aw", [{"template": job, "podSets": declared}])
    assert _sets(body) == [("aw-0", 5)]
    # Once the AppWrapper controller records one entry per component, those are read.
    body["status"] = {
        "componentStatus": [
            {
                "name": "a",
                "kind": "Job",
                "apiVersion": "batch/v1",
                "podSets": [{"path": "template.spec.template", "replicas": 7}],
            }
        ]
    }
    assert _sets(body) == [("aw-0", 7)]
    # A pod set whose path leads to no pod template is left out; unset replicas count 1.
    body["status"]["componentStatus"][0]["podSets"] = [
        {"path": "template.spec.nothing"},
        {"path": "template.spec.template"},
    ]
    assert _sets(body) == [("aw-0", 1)]


def test_inference_knows_jobsets_pytorchjobs_rayclusters_and_deployments() -> None:
    pod = {"spec": {"containers": [{"name": "c", "image": "x"}]}}
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "spec": {
            "replicatedJobs": [{"replicas": 2, "template": {"spec": {"parallelism": 3, "template": pod}}}]
        },
    }
    assert [(p.path, p.replicas) for p in infer(jobset)] == [
        ("template.spec.replicatedJobs[0].template.spec.template", 6)
    ]
    pytorch = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "spec": {
            "pytorchReplicaSpecs": {"Master": {"template": pod}, "Worker": {"replicas": 4, "template": pod}}
        },
    }
    assert [p.replicas for p in infer(pytorch)] == [1, 4]
    ray = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "spec": {"headGroupSpec": {"template": pod}, "workerGroupSpecs": [{"replicas": 2, "template": pod}]},
    }
    assert [(p.path, p.replicas) for p in infer(ray)] == [
        ("template.spec.headGroupSpec.template", 1),
        ("template.spec.workerGroupSpecs[0].template", 2),
    ]
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 3, "template": pod}}
    assert [p.replicas for p in infer(deployment)] == [3]
    assert infer({"apiVersion": "v1", "kind": "ConfigMap", "data": {}}) == []
    # A known kind whose pod template has no spec: refused, as AppWrapper's InferPodSets.
    with pytest.raises(PathError):
        infer({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": {}}})


def test_paths_take_fields_and_indexes_and_name_where_they_fail() -> None:
    obj = {"spec": {"items": [{"a": 1}, {"a": 2}]}}
    assert value_at(obj, "template.spec.items[1].a") == 2
    for bad, said in (
        ("spec.items", "must be 'template'"),
        ("template.spec.items[2]", "no item 2"),
        ("template.spec.x", "no field 'x'"),
    ):
        with pytest.raises(PathError, match=said):
            value_at(obj, bad)


def test_the_template_keeps_no_value_set_for_the_grace_period_and_defaults_latest_images_to_always() -> None:
    found = {
        "spec": {
            "terminationGracePeriodSeconds": 5,
            "containers": [{"name": "c", "image": "busybox"}, {"name": "d", "image": "r/x@sha256:ab"}],
        }
    }
    template = kueue_template(found)
    assert "terminationGracePeriodSeconds" not in template["spec"]  # (as AppWrapper v1.2.2 copies it)
    assert [c["imagePullPolicy"] for c in template["spec"]["containers"]] == ["Always", "IfNotPresent"]
    assert kueue_template({"spec": {"containers": []}})["spec"]["terminationGracePeriodSeconds"] == 30


def test_start_gives_each_components_pod_sets_their_pod_set_infos_and_restore_clears_them() -> None:
    body = appwrapper_body("aw", [{"template": wrapped_job("a")}, {"template": wrapped_job("b")}])
    taint = Toleration(key="gpu", operator="Exists", effect="NoSchedule")
    starts = [
        PodSetStart("aw-0", node_selector={"gpu": "t4"}, tolerations=[taint], labels={PODSET_LABEL: "aw-0"}),
        PodSetStart(
            "aw-1", node_selector={"gpu": "a100"}, labels={PODSET_LABEL: "aw-1"}, scheduling_gates=("g",)
        ),
    ]
    aw = appwrapper_of(body)
    assert not APPWRAPPER.restore_pending(aw)
    started = _patched(body, APPWRAPPER.start_patch(aw, starts))
    assert started["spec"]["suspend"] is False
    first, second = started["spec"]["components"]
    assert first["podSetInfos"] == [
        {
            "labels": {PODSET_LABEL: "aw-0"},
            "nodeSelector": {"gpu": "t4"},
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        }
    ]
    assert second["podSetInfos"] == [
        {
            "labels": {PODSET_LABEL: "aw-1"},
            "nodeSelector": {"gpu": "a100"},
            "schedulingGates": [{"name": "g"}],
        }
    ]
    assert first["template"] == body["spec"]["components"][0]["template"]  # the wrapped object as it was
    # The pod sets do not change with the start (the templates are the wrapped objects').
    assert APPWRAPPER.pod_sets(appwrapper_of(started)) == APPWRAPPER.pod_sets(aw)
    suspended = _patched(started, APPWRAPPER.suspend_patch(appwrapper_of(started)))
    assert suspended["spec"]["suspend"] is True
    assert APPWRAPPER.restore_pending(appwrapper_of(suspended))
    patch = APPWRAPPER.restore_patch(appwrapper_of(suspended), APPWRAPPER.pod_sets(aw))
    assert patch is not None
    restored = _patched(suspended, patch.body)
    assert restored["spec"]["components"] == body["spec"]["components"]
    assert APPWRAPPER.restore_patch(appwrapper_of(restored), []) is None


def test_finished_active_and_ready_as_kueue_reads_an_appwrappers_status() -> None:
    def with_status(phase: str, **conditions: str) -> Any:
        body = appwrapper_body("aw", suspend=False)
        body["status"] = {
            "phase": phase,
            "conditions": [{"type": k, "status": v} for k, v in conditions.items()],
        }
        return appwrapper_of(body)

    assert APPWRAPPER.finished(with_status("Running", QuotaReserved="True")) is None
    done = APPWRAPPER.finished(with_status("Succeeded"))
    assert done is not None
    assert (done.succeeded, done.message) == (True, "AppWrapper finished successfully")
    # Failed, but its resources still being deleted: not finished yet.
    assert APPWRAPPER.finished(with_status("Failed", ResourcesDeployed="True")) is None
    failed = APPWRAPPER.finished(with_status("Failed", ResourcesDeployed="False"))
    assert failed is not None
    assert (failed.succeeded, failed.message) == (False, "AppWrapper failed")
    assert APPWRAPPER.is_active(with_status("Running", QuotaReserved="True"))
    assert not APPWRAPPER.is_active(with_status("Suspended", QuotaReserved="False"))
    ready = with_status("Running", PodsReady="True")
    assert APPWRAPPER.pods_ready(ready)
    assert APPWRAPPER.pods_ready_count(ready) == 2
    assert APPWRAPPER.pods_ready_count(with_status("Running", PodsReady="False")) == 0


def test_the_job_an_appwrapper_makes_is_its_child() -> None:
    body = job_body("aw-job")
    body["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "workload.codeflare.dev/v1beta2",
            "kind": "AppWrapper",
            "name": "aw",
            "uid": "u",
            "controller": True,
        }
    ]
    by_kind = {i.kind: i for i in REGISTRY.values()}
    parent = controller_parent(
        msgspec.json.decode(msgspec.json.encode(body), type=BATCH_JOB.projection), by_kind
    )
    assert parent is not None
    assert (parent[0], parent[1]) == (APPWRAPPER, "aw")
