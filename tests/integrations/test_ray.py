"""The ray integrations' pure parts: pod sets (head, worker groups, the submitter), the start
and restore patches, finished, active and PodsReady as Kueue reads them, Kueue's Skip of a
RayJob on an existing cluster, and a RayJob's RayCluster being its child."""

from __future__ import annotations

from typing import Any

import msgspec

from reconciler.api import Toleration
from reconciler.integrations import PODSET_LABEL, Nothing, PodSetStart, controller_parent, decide, known_of
from reconciler.integrations.ray import RAYCLUSTER, RAYJOB, submitter_template
from reconciler.integrations.registry import REGISTRY
from tests.support.rays import cluster_spec, raycluster_body, raycluster_of, rayjob_body, rayjob_of


def _patched(body: dict[str, Any], patch: bytes) -> dict[str, Any]:
    from tests.support.memory_api import merge

    merged: dict[str, Any] = merge(body, msgspec.json.decode(patch))
    return merged


def _templates(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {"head": spec["headGroupSpec"]["template"]}
    out.update({g["groupName"]: g["template"] for g in spec["workerGroupSpecs"]})
    return out


def test_a_clusters_pod_sets_are_the_head_and_each_worker_group_counting_replicas_times_hosts() -> None:
    body = raycluster_body("rc", [("a", 3, "gpu-b"), ("b", None, None), ("c", 2, None)])
    body["spec"]["workerGroupSpecs"][2]["numOfHosts"] = 4
    sets = RAYCLUSTER.pod_sets(raycluster_of(body))
    # As Kueue: the head one pod; a group's replicas (1 when unset) times numOfHosts above 1.
    assert [(ps.name, ps.count) for ps in sets] == [("head", 1), ("a", 3), ("b", 1), ("c", 8)]
    templates = _templates(body["spec"])
    assert msgspec.json.decode(sets[0].template) == templates["head"]
    # The group's claims stay in its pod set's template: the core charges them.
    assert msgspec.json.decode(sets[1].template)["spec"]["resourceClaims"] == [
        {"name": "gpu", "resourceClaimTemplateName": "gpu-b"}
    ]


def test_a_rayjob_in_k8s_job_mode_has_a_submitter_pod_set_with_kuberays_default_template() -> None:
    job = rayjob_of(rayjob_body("rj"))
    sets = RAYJOB.pod_sets(job)
    assert [(ps.name, ps.count) for ps in sets] == [("head", 1), ("gpu-workers", 2), ("submitter", 1)]
    submitter = msgspec.json.decode(sets[2].template)
    (container,) = submitter["spec"]["containers"]
    assert container["image"] == "rayproject/ray:2.46.0"  # the head's image
    assert container["resources"]["requests"] == {"cpu": "500m", "memory": "200Mi"}
    assert submitter["spec"]["restartPolicy"] == "Never"
    # Its own submitter template when it has one; none in the other submission modes.
    body = rayjob_body("rj")
    body["spec"]["submitterPodTemplate"] = {"spec": {"containers": [{"name": "s", "image": "x"}]}}
    assert msgspec.json.decode(submitter_template(rayjob_of(body)))["spec"]["containers"][0]["name"] == "s"
    for mode in ("HTTPMode", "SidecarMode", "InteractiveMode"):
        names = [ps.name for ps in RAYJOB.pod_sets(rayjob_of(rayjob_body("rj", mode=mode)))]
        assert names == ["head", "gpu-workers"]


def test_start_unsuspends_and_injects_each_pod_sets_flavor_keeping_the_rest_then_restore_gives_it_back() -> (
    None
):
    body = raycluster_body("rc", [("a", 1, "gpu-b"), ("b", 2, None)])
    body["spec"]["workerGroupSpecs"][1]["template"]["spec"]["tolerations"] = [
        {"key": "own", "operator": "Exists"}
    ]
    taint = Toleration(key="gpu", operator="Exists", effect="NoSchedule")
    starts = [
        PodSetStart("head", node_selector={"pool": "cpu"}, labels={PODSET_LABEL: "head"}),
        PodSetStart("a", node_selector={"gpu": "t4"}, tolerations=[taint], labels={PODSET_LABEL: "a"}),
        PodSetStart("b", labels={PODSET_LABEL: "b"}),
    ]
    cluster = raycluster_of(body)
    assert not RAYCLUSTER.restore_pending(cluster)
    started = _patched(body, RAYCLUSTER.start_patch(cluster, starts))
    assert started["spec"]["suspend"] is False
    templates = _templates(started["spec"])
    assert templates["head"]["spec"]["nodeSelector"] == {"pool": "cpu"}
    assert templates["head"]["metadata"]["labels"] == {PODSET_LABEL: "head"}
    assert templates["a"]["spec"]["nodeSelector"] == {"gpu": "t4"}
    assert templates["a"]["spec"]["tolerations"] == [
        {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert templates["b"]["spec"]["tolerations"] == [{"key": "own", "operator": "Exists"}]
    # Everything else of the groups (the list the patch replaces) goes back as it was.
    for before, after in zip(
        body["spec"]["workerGroupSpecs"], started["spec"]["workerGroupSpecs"], strict=True
    ):
        assert {k: v for k, v in after.items() if k != "template"} == {
            k: v for k, v in before.items() if k != "template"
        }
    assert started["spec"]["headGroupSpec"]["rayStartParams"] == {"dashboard-host": "0.0.0.0"}
    # Suspended, the templates come back as the Workload recorded them.
    suspended = _patched(started, RAYCLUSTER.suspend_patch(raycluster_of(started)))
    assert suspended["spec"]["suspend"] is True
    assert RAYCLUSTER.restore_pending(raycluster_of(suspended))
    recorded = RAYCLUSTER.pod_sets(cluster)
    patch = RAYCLUSTER.restore_patch(raycluster_of(suspended), recorded)
    assert patch is not None
    restored = _patched(suspended, patch.body)
    assert _templates(restored["spec"]) == _templates(body["spec"])
    assert not RAYCLUSTER.restore_pending(raycluster_of(restored))
    assert RAYCLUSTER.restore_patch(raycluster_of(restored), recorded) is None


def test_a_rayjobs_start_reaches_its_cluster_spec_and_its_own_submitter_template_only() -> None:
    body = rayjob_body("rj")
    starts = [
        PodSetStart(name, node_selector={"pool": name}, labels={PODSET_LABEL: name})
        for name in ("head", "gpu-workers", "submitter")
    ]
    started = _patched(body, RAYJOB.start_patch(rayjob_of(body), starts))
    assert started["spec"]["suspend"] is False
    templates = _templates(started["spec"]["rayClusterSpec"])
    assert templates["gpu-workers"]["spec"]["nodeSelector"] == {"pool": "gpu-workers"}
    # KubeRay's default submitter is not in the RayJob: nothing to inject it into (as Kueue).
    assert "submitterPodTemplate" not in started["spec"]
    body["spec"]["submitterPodTemplate"] = {"spec": {"containers": [{"name": "s", "image": "x"}]}}
    started = _patched(body, RAYJOB.start_patch(rayjob_of(body), starts))
    assert started["spec"]["submitterPodTemplate"]["spec"]["nodeSelector"] == {"pool": "submitter"}
    assert RAYJOB.restore_pending(rayjob_of(started))
    patch = RAYJOB.restore_patch(rayjob_of(started), RAYJOB.pod_sets(rayjob_of(body)))
    assert patch is not None
    assert (
        _patched(started, patch.body)["spec"]["submitterPodTemplate"] == body["spec"]["submitterPodTemplate"]
    )


def test_a_rayjob_finishes_active_and_ready_as_kueue_reads_its_status() -> None:
    def with_status(**status: Any) -> Any:
        body = rayjob_body("rj", suspend=False)
        body["status"] = status
        return rayjob_of(body)

    assert RAYJOB.finished(with_status(jobDeploymentStatus="Running")) is None
    done = RAYJOB.finished(with_status(jobDeploymentStatus="Complete", jobStatus="SUCCEEDED", message="ok"))
    assert done is not None
    assert (done.succeeded, done.message) == (True, "ok")
    failed = RAYJOB.finished(with_status(jobDeploymentStatus="Failed", jobStatus="FAILED", message="boom"))
    assert failed is not None
    assert (failed.succeeded, failed.message) == (False, "boom")
    # Active unless Suspended or new (no deployment status yet).
    assert not RAYJOB.is_active(with_status())
    assert not RAYJOB.is_active(with_status(jobDeploymentStatus="Suspended"))
    assert RAYJOB.is_active(with_status(jobDeploymentStatus="Initializing"))
    # PodsReady: its cluster's state is ready; then every pod of the Workload counts.
    assert not RAYJOB.pods_ready(with_status(rayClusterStatus={"state": ""}))
    ready = with_status(rayClusterStatus={"state": "ready"})
    assert RAYJOB.pods_ready(ready)
    assert RAYJOB.pods_ready_count(ready) == 4


def test_a_raycluster_never_finishes_and_is_active_and_ready_when_its_state_is_ready() -> None:
    body = raycluster_body("rc", suspend=False)
    for state, ready in (("", False), ("failed", False), ("suspended", False), ("ready", True)):
        body["status"] = {"state": state, "reason": "r"}
        cluster = raycluster_of(body)
        assert RAYCLUSTER.finished(cluster) is None
        assert RAYCLUSTER.is_active(cluster) is ready
        assert RAYCLUSTER.pods_ready(cluster) is ready
        assert RAYCLUSTER.pods_ready_count(cluster) == (3 if ready else 0)


def test_a_rayjob_on_an_existing_cluster_is_skipped() -> None:
    body = rayjob_body("rj", suspend=False)
    del body["spec"]["rayClusterSpec"]
    body["spec"]["clusterSelector"] = {"ray.io/cluster": "shared"}
    step = decide(RAYJOB, rayjob_of(body), None, known_of(False, (), deleted=False, starting=False), {})
    assert isinstance(step, Nothing)
    # Without the selector it would get a Workload (and be suspended first).
    del body["spec"]["clusterSelector"]
    body["spec"]["rayClusterSpec"] = cluster_spec([])
    step = decide(RAYJOB, rayjob_of(body), None, known_of(False, (), deleted=False, starting=False), {})
    assert not isinstance(step, Nothing)


def test_the_raycluster_of_a_rayjob_is_its_child() -> None:
    body = raycluster_body("rj-raycluster-x", suspend=False)
    body["metadata"]["ownerReferences"] = [
        {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "rj", "uid": "u", "controller": True}
    ]
    by_kind = {i.kind: i for i in REGISTRY.values()}
    parent = controller_parent(raycluster_of(body), by_kind)
    assert parent is not None
    assert parent[0] is RAYJOB
    assert parent[1] == "rj"
