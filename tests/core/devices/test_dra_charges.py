"""DRA beyond Kueue: firstAvailable requests and shared (resourceClaimName) claims."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reconciler.api import ResourceClaim, ResourceClaimTemplate, Workload
from reconciler.core.model.workloads import WorkloadInfo, compile_workload
from reconciler.integrations.batchjob import workload_for_job
from tests.support.builders import claim_template, decode, gpu_request, job

MAPPINGS = {"gpu.nvidia.com": "nvidia.com/gpu", "mig.nvidia.com": "nvidia.com/mig"}


def shared_claim(name: str, requests: Sequence[Mapping[str, Any]], namespace: str = "ns") -> ResourceClaim:
    result: ResourceClaim = decode(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"devices": {"requests": [dict(r) for r in requests]}},
        },
        ResourceClaim,
    )
    return result


def first_available(*subrequests: Mapping[str, Any], name: str = "gpu") -> dict[str, Any]:
    return {"name": name, "firstAvailable": [dict(s) for s in subrequests]}


def compile_(
    workload: Workload,
    templates: Sequence[ResourceClaimTemplate] = (),
    claims: Sequence[ResourceClaim] = (),
    mappings: Mapping[str, str] = MAPPINGS,
    covered: frozenset[str] | None = None,
) -> WorkloadInfo:
    by_template = {(t.metadata.namespace, t.metadata.name): t for t in templates}
    by_claim = {(c.metadata.namespace, c.metadata.name): c for c in claims}
    return compile_workload(
        workload,
        lookup_template=lambda ns, n: by_template.get((ns, n)),
        lookup_claim=lambda ns, n: by_claim.get((ns, n)),
        mappings=mappings,
        covered=None if covered is None else covered.__contains__,
    )


def job_workload(claims: Sequence[Mapping[str, str]], parallelism: int = 1) -> Workload:
    return workload_for_job(job("j", claims=claims, parallelism=parallelism, completions=parallelism))


# --- firstAvailable ---------------------------------------------------------------------------


def test_first_available_charges_the_first_mapped_subrequest_and_records_it() -> None:
    template = claim_template(
        "alt",
        [
            first_available(
                {"name": "a100", "deviceClassName": "a100.example.com", "count": 1},
                {"name": "mig", "deviceClassName": "mig.nvidia.com", "count": 2},
                {"name": "t4", "deviceClassName": "gpu.nvidia.com", "count": 1},
            )
        ],
    )
    info = compile_(job_workload([{"name": "g", "resourceClaimTemplateName": "alt"}], 3), [template])
    assert info.problem is None
    assert info.pod_sets[0].per_pod == {"nvidia.com/mig": 2}
    assert info.total_requests() == [("main", {"nvidia.com/mig": 6})]
    assert info.choices == (
        "podset main, claim g, request gpu: subrequest mig "
        "(DeviceClass mig.nvidia.com charged as 2 nvidia.com/mig)",
    )
    assert info.devices_by_class == {"mig.nvidia.com": 6}
    assert info.claims_by_class == {"mig.nvidia.com": 3}


def test_first_available_count_defaults_to_one_and_sums_with_exact_requests() -> None:
    template = claim_template(
        "mix",
        [gpu_request(1), first_available({"name": "any", "deviceClassName": "gpu.nvidia.com"}, name="x")],
    )
    info = compile_(job_workload([{"name": "g", "resourceClaimTemplateName": "mix"}]), [template])
    assert info.pod_sets[0].per_pod == {"nvidia.com/gpu": 2}


def test_first_available_with_no_mapped_subrequest_names_the_first_class() -> None:
    template = claim_template(
        "alt",
        [
            first_available(
                {"name": "a", "deviceClassName": "b.example.com"},
                {"name": "b", "deviceClassName": "a.example.com"},
            )
        ],
    )
    info = compile_(job_workload([{"name": "g", "resourceClaimTemplateName": "alt"}]), [template])
    assert info.problem is not None
    assert not info.problem.retryable
    assert info.problem.unmapped_class == "a.example.com"
    assert info.problem.message == (
        "spec.podSets[0].template.spec.resourceClaims[0].devices.requests[0].firstAvailable: Not found: "
        '"DeviceClass a.example.com is not mapped in DRA configuration for podset main"'
    )


def test_first_available_all_mode_on_the_chosen_subrequest_is_refused() -> None:
    template = claim_template(
        "alt", [first_available({"name": "a", "deviceClassName": "gpu.nvidia.com", "allocationMode": "All"})]
    )
    info = compile_(job_workload([{"name": "g", "resourceClaimTemplateName": "alt"}]), [template])
    assert info.problem is not None
    assert "firstAvailable[0].allocationMode" in info.problem.message


def test_the_choice_follows_the_mappings() -> None:
    template = claim_template(
        "alt",
        [
            first_available(
                {"name": "mig", "deviceClassName": "mig.nvidia.com"},
                {"name": "t4", "deviceClassName": "gpu.nvidia.com"},
            )
        ],
    )
    workload = job_workload([{"name": "g", "resourceClaimTemplateName": "alt"}])
    only_gpu = compile_(workload, [template], mappings={"gpu.nvidia.com": "nvidia.com/gpu"})
    assert only_gpu.pod_sets[0].per_pod == {"nvidia.com/gpu": 1}
    assert "subrequest t4" in only_gpu.choices[0]
    # Different charges give different shapes: the scheduler never reuses a verdict across them.
    assert compile_(workload, [template]).shape != only_gpu.shape


def test_first_available_prefers_what_the_cluster_queue_covers() -> None:
    template = claim_template(
        "alt",
        [
            first_available(
                {"name": "mig", "deviceClassName": "mig.nvidia.com"},
                {"name": "t4", "deviceClassName": "gpu.nvidia.com", "count": 2},
            )
        ],
    )
    workload = job_workload([{"name": "g", "resourceClaimTemplateName": "alt"}])
    gpu_only = compile_(workload, [template], covered=frozenset({"nvidia.com/gpu"}))
    assert gpu_only.pod_sets[0].per_pod == {"nvidia.com/gpu": 2}
    both = compile_(workload, [template], covered=frozenset({"nvidia.com/gpu", "nvidia.com/mig"}))
    assert both.pod_sets[0].per_pod == {"nvidia.com/mig": 1}
    # Covering neither: the first mapped subrequest, whose message then tells what is missing.
    neither = compile_(workload, [template], covered=frozenset({"cpu"}))
    assert neither.pod_sets[0].per_pod == {"nvidia.com/mig": 1}


# --- shared claims ----------------------------------------------------------------------------


def test_a_shared_claim_is_charged_once_whatever_the_pod_count() -> None:
    claim = shared_claim("team-gpus", [gpu_request(2)])
    workload = job_workload([{"name": "shared", "resourceClaimName": "team-gpus"}], parallelism=4)
    info = compile_(workload, claims=[claim])
    assert info.problem is None
    assert info.pod_sets[0].per_pod == {}
    assert info.pod_sets[0].once == {"nvidia.com/gpu": 2}
    assert info.total_requests() == [("main", {"nvidia.com/gpu": 2})]
    assert info.devices_by_class == {"gpu.nvidia.com": 2}
    assert info.claims_by_class == {"gpu.nvidia.com": 1}


def test_shared_and_template_claims_add_up() -> None:
    claim = shared_claim("team-gpus", [gpu_request(1)])
    template = claim_template("one", [gpu_request(1)])
    workload = job_workload(
        [
            {"name": "shared", "resourceClaimName": "team-gpus"},
            {"name": "own", "resourceClaimTemplateName": "one"},
        ],
        parallelism=3,
    )
    info = compile_(workload, [template], [claim])
    assert info.total_requests() == [("main", {"nvidia.com/gpu": 4})]


def test_a_shared_claim_named_by_two_pod_sets_is_charged_on_the_first_only() -> None:
    claim = shared_claim("team-gpus", [gpu_request(1)])
    body: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {
            "queueName": "lq",
            "podSets": [
                {
                    "name": name,
                    "count": 2,
                    "template": {
                        "spec": {
                            "containers": [{"name": "c", "image": "x"}],
                            "resourceClaims": [{"name": "s", "resourceClaimName": "team-gpus"}],
                        }
                    },
                }
                for name in ("driver", "workers")
            ],
        },
    }
    info = compile_(decode(body, Workload), claims=[claim])
    assert info.total_requests() == [("driver", {"nvidia.com/gpu": 1}), ("workers", {})]


def test_a_missing_shared_claim_is_retryable_and_names_the_field() -> None:
    info = compile_(job_workload([{"name": "shared", "resourceClaimName": "later"}]))
    assert info.problem is not None
    assert info.problem.retryable
    assert info.problem.message.startswith(
        'spec.podSets[0].template.spec.resourceClaims[0].resourceClaimName: Not found: "later": '
        "ResourceClaim ns/later does not exist"
    )


def test_a_shared_claim_of_an_unmapped_class_is_reported_as_unmapped() -> None:
    claim = shared_claim("team-gpus", [gpu_request(1, device_class="fpga.example.com")])
    info = compile_(job_workload([{"name": "shared", "resourceClaimName": "team-gpus"}]), claims=[claim])
    assert info.problem is not None
    assert info.problem.unmapped_class == "fpga.example.com"
    assert info.problem.message.startswith(
        "spec.podSets[0].template.spec.resourceClaims[0].resourceClaimName: Not found"
    )


def test_a_shared_claim_may_use_first_available() -> None:
    claim = shared_claim(
        "team-gpus",
        [
            first_available(
                {"name": "x", "deviceClassName": "x.example.com"},
                {"name": "t4", "deviceClassName": "gpu.nvidia.com", "count": 3},
            )
        ],
    )
    info = compile_(job_workload([{"name": "shared", "resourceClaimName": "team-gpus"}], 2), claims=[claim])
    assert info.total_requests() == [("main", {"nvidia.com/gpu": 3})]
    assert info.choices == (
        "podset main, claim shared (ResourceClaim team-gpus, shared), request gpu: subrequest t4 "
        "(DeviceClass gpu.nvidia.com charged as 3 nvidia.com/gpu)",
    )
