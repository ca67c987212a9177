"""Jobs to Workloads, pod requests as Kubernetes computes them, and DRA charges."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from reconciler.api import PodSpecView, ResourceClaimTemplate
from reconciler.core.devices.dra import CLAIMS_NOT_SUPPORTED, DraProblem
from reconciler.core.engine import Engine
from reconciler.core.model.workloads import RESOURCE_IN_USE_FINALIZER, compile_workload
from reconciler.core.primitives.podrequests import pod_requests
from reconciler.integrations.batchjob import job_pod_count, job_workload_name, workload_for_job
from tests.support.builders import claim_template, decode, gpu_request, job

MAPPINGS = {"gpu.nvidia.com": "nvidia.com/gpu"}


def spec(body: dict[str, Any]) -> PodSpecView:
    result: PodSpecView = decode(body, PodSpecView)
    return result


def test_workload_name_matches_kueue() -> None:
    # The vector Kueue's own tests assert.
    assert job_workload_name("name", "uid") == "job-name-ef3a1"


def test_workload_name_truncates_long_job_names() -> None:
    name = job_workload_name("x" * 300, "uid")
    assert len(name) == 253
    assert name.startswith("job-xxx")
    assert name[-6] == "-"


@pytest.mark.parametrize(
    ("parallelism", "completions", "count"),
    [(1, 1, 1), (3, None, 3), (4, 2, 2), (None, 5, 1), (0, 3, 0)],
)
def test_pod_count(parallelism: int | None, completions: int | None, count: int) -> None:
    assert job_pod_count(job("j", parallelism=parallelism, completions=completions)) == count


def test_workload_for_job_carries_kueue_metadata() -> None:
    wl = workload_for_job(job("train", uid="1234", parallelism=2, completions=4))
    assert wl.metadata.name == job_workload_name("train", "1234")
    assert wl.metadata.labels == {"kueue.x-k8s.io/job-uid": "1234"}
    assert wl.metadata.finalizers == [RESOURCE_IN_USE_FINALIZER]
    owner = wl.metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.uid, owner.controller) == ("Job", "train", "1234", True)
    assert wl.spec.queue_name == "lq"
    assert [(p.name, p.count) for p in wl.spec.pod_sets] == [("main", 2)]


def test_job_controller_labels_are_dropped_from_the_template() -> None:
    j = job("j")
    template = msgspec.json.decode(j.spec.template)
    template["metadata"] = {
        "labels": {
            "controller-uid": "x",
            "batch.kubernetes.io/controller-uid": "x",
            "job-name": "j",
            "batch.kubernetes.io/job-name": "j",
            "team": "a",
        }
    }
    j.spec.template = msgspec.Raw(msgspec.json.encode(template))
    labels = msgspec.json.decode(workload_for_job(j).spec.pod_sets[0].template)["metadata"]["labels"]
    assert labels == {"batch.kubernetes.io/job-name": "j", "team": "a"}


def test_job_controller_labels_written_with_json_escapes_are_dropped_too() -> None:
    # The template is looked into only when it may hold those keys: escapes always count as "may".
    j = job("j")
    template = msgspec.json.decode(j.spec.template)
    template["metadata"] = {"labels": {"team": "a"}}
    raw = msgspec.json.encode(template).replace(
        b'"team"', b'"job\\u002dname":"j","controller\\u002duid":"x","team"'
    )
    j.spec.template = msgspec.Raw(raw)
    labels = msgspec.json.decode(workload_for_job(j).spec.pod_sets[0].template)["metadata"]["labels"]
    assert labels == {"team": "a"}


def test_containers_sum_and_limits_fill_missing_requests() -> None:
    s = spec(
        {
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
                {"name": "b", "resources": {"limits": {"cpu": "1", "nvidia.com/gpu": "1"}}},
            ]
        }
    )
    assert pod_requests(s) == {"cpu": 1500, "memory": 1024**3, "nvidia.com/gpu": 1}


def test_init_containers_take_the_max_and_sidecars_add() -> None:
    s = spec(
        {
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}],
            "initContainers": [
                {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "200m"}}},
                {"name": "setup", "resources": {"requests": {"cpu": "2", "memory": "64Mi"}}},
            ],
            "overhead": {"cpu": "100m"},
        }
    )
    # main + sidecar = 1.2; setup runs with the sidecar: 2.2; max 2.2 + overhead 0.1.
    assert pod_requests(s) == {"cpu": 2300, "memory": 64 * 1024**2}


def test_pod_level_resources_win() -> None:
    s = spec(
        {
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
            "resources": {"requests": {"cpu": "4"}},
        }
    )
    assert pod_requests(s) == {"cpu": 4000, "memory": 1024**3}


def _compile(
    body_claims: list[dict[str, str]],
    templates: list[ResourceClaimTemplate],
    mappings: dict[str, str] | None = None,
    parallelism: int = 1,
) -> Any:
    wl = workload_for_job(
        job("j", claims=body_claims, parallelism=parallelism, completions=parallelism, requests={"cpu": "1"})
    )
    by_name = {(t.metadata.namespace, t.metadata.name): t for t in templates}
    return compile_workload(
        wl,
        lookup_template=lambda ns, n: by_name.get((ns, n)),
        mappings=MAPPINGS if mappings is None else mappings,
    )


def test_dra_charges_count_per_pod() -> None:
    info = _compile(
        [{"name": "g", "resourceClaimTemplateName": "two"}],
        [claim_template("two", [gpu_request(2)])],
        parallelism=3,
    )
    assert info.problem is None
    assert info.pod_sets[0].per_pod == {"cpu": 1000, "nvidia.com/gpu": 2}
    assert info.total_requests() == [("main", {"cpu": 3000, "nvidia.com/gpu": 6})]


def test_dra_sums_requests_and_skips_admin_access() -> None:
    t = claim_template(
        "mix",
        [
            gpu_request(1),
            {"name": "x", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
            gpu_request(5, adminAccess=True),
        ],
    )
    info = _compile([{"name": "g", "resourceClaimTemplateName": "mix"}], [t])
    assert info.pod_sets[0].per_pod["nvidia.com/gpu"] == 2


def _problem(
    claims: list[dict[str, str]],
    templates: list[ResourceClaimTemplate],
    mappings: dict[str, str] | None = None,
) -> DraProblem:
    problem = _compile(claims, templates, mappings).problem
    assert problem is not None
    assert isinstance(problem, DraProblem)
    return problem


def test_unmapped_device_class_message_is_kueues() -> None:
    problem = _problem(
        [{"name": "g", "resourceClaimTemplateName": "single-gpu"}],
        [claim_template("single-gpu", [gpu_request()])],
        mappings={},
    )
    assert problem.message == (
        "spec.podSets[0].template.spec.resourceClaims[0].resourceClaimTemplateName: Not found: "
        '"DeviceClass gpu.nvidia.com is not mapped in DRA configuration for podset main"'
    )
    assert not problem.retryable


def test_allocation_mode_all_is_rejected_without_the_device_inventory() -> None:
    t = claim_template(
        "gpu-template",
        [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}}],
    )
    problem = _problem([{"name": "g", "resourceClaimTemplateName": "gpu-template"}], [t])
    assert problem.message == (
        "spec.podSets[0].template.spec.resourceClaims[0].devices.requests[0].exactly.allocationMode: "
        "Invalid value: \"All\": ResourceClaimTemplate gpu-template: AllocationMode 'All' is not supported; "
        "this controller charges it from the device inventory: set deviceInventory.mode to Report or "
        "Enforce in the Configuration"
    )


def test_resource_claim_name_is_rejected_without_a_claim_lookup() -> None:
    # Kueue's behaviour, kept where no claims are known (compile_workload without lookup_claim).
    problem = _problem([{"name": "g", "resourceClaimName": "shared"}], [])
    assert problem.message == CLAIMS_NOT_SUPPORTED
    assert problem.requeue_message == "DRA resource claims not supported"


def test_missing_template_is_retryable() -> None:
    problem = _problem([{"name": "g", "resourceClaimTemplateName": "later"}], [])
    assert problem.retryable
    assert problem.message.startswith(
        "spec.podSets[0].template.spec.resourceClaims[0]: Internal error: failed to get claim spec "
        "for ResourceClaimTemplate later in podset main: "
    )


def test_a_workload_whose_requests_cannot_be_charged_is_in_no_local_queue_count() -> None:
    """As Kueue: such a workload gets its Inadmissible condition but is in no queue, so its
    LocalQueue does not count it as pending (a missing-but-coming LocalQueue's would)."""
    info = _compile(
        [{"name": "g", "resourceClaimTemplateName": "single-gpu"}],
        [claim_template("single-gpu", [gpu_request()])],
        mappings={},
    )
    assert info.problem is not None
    engine = Engine()
    engine.set_local_queue("ns", info.queue_name, "cq")
    engine.add_workload(info)
    assert engine.local_queue_members("ns", info.queue_name) == (0, [])
    assert engine.queues.local_queue_pending_counts("ns", info.queue_name) == (0, 0)
