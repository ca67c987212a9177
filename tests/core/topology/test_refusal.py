"""Until topology-aware scheduling works end to end, every way of asking for it is refused by name:
a flavor's spec.topologyName (at the door, and in the scheduler while the nodes are not fed), a pod
template's topology annotations (at each kind's door); in the core, a Workload's placement request
is read (annotations or topologyRequest) and what the core does not do (slices, groups) refused."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from reconciler.admission.queue_rules import JobPolicy
from reconciler.admission.review import AdmissionRequest, GroupVersionResource
from reconciler.admission.topology_door import topology_requests_refused
from reconciler.api import ResourceFlavor, Workload
from reconciler.core.engine import Engine
from reconciler.core.model.workloads import TOPOLOGY_REFUSAL, compile_workload
from reconciler.core.scheduling.scheduler import Pending
from reconciler.core.topology.requests import (
    GROUP_NAME,
    PREFERRED,
    SLICE_CONSTRAINTS,
    SLICE_REQUIRED,
    SLICE_SIZE,
    UNCONSTRAINED,
)
from reconciler.integrations.batchjob import workload_for_job
from reconciler.webhook.flavors import validate_resource_flavor
from reconciler.webhook.handlers import handle, routes
from tests.support.builders import cluster_queue, decode, job, job_body

GPU = "nvidia.com/gpu"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
JOB_VALIDATE = next(r for r in routes() if r.path == "/validate-batch-v1-job")


def annotated_job_body(annotations: dict[str, str]) -> dict[str, Any]:
    body = job_body("j", uid="uid-j", requests={GPU: "1"})
    body["spec"]["template"].setdefault("metadata", {})["annotations"] = annotations
    return body


UNSUPPORTED = (SLICE_REQUIRED, SLICE_SIZE, SLICE_CONSTRAINTS, GROUP_NAME)


@pytest.mark.parametrize("annotation", UNSUPPORTED)
def test_a_slice_or_group_annotation_makes_the_workload_inadmissible_naming_it(annotation: str) -> None:
    spec = decode(annotated_job_body({annotation: "rack"}), type(job("x")))
    info = compile_workload(workload_for_job(spec), lookup_template=lambda ns, n: None, mappings={})
    assert info.problem is not None
    assert info.problem.message == (
        f"spec.podSets[0].template.metadata.annotations[{annotation}]: Forbidden: "
        "not supported by this controller's topology-aware scheduling"
    )


def test_the_placement_annotations_become_the_pod_sets_request() -> None:
    asked = {REQUIRED: "rack", PREFERRED: "block", UNCONSTRAINED: "true"}
    for name, value in asked.items():
        spec = decode(annotated_job_body({name: value}), type(job("x")))
        info = compile_workload(workload_for_job(spec), lookup_template=lambda ns, n: None, mappings={})
        assert info.problem is None
        request = info.pod_sets[0].topology
        assert request is not None
        assert (request.required, request.preferred, request.unconstrained) == (
            value if name == REQUIRED else None,
            value if name == PREFERRED else None,
            name == UNCONSTRAINED,
        )


def test_a_workload_topology_request_is_read_and_its_groups_refused_by_name() -> None:
    workload = workload_for_job(job("j", uid="uid-j", requests={GPU: "1"}))
    raw = msgspec.json.decode(msgspec.json.encode(workload))
    raw["spec"]["podSets"][0]["topologyRequest"] = {"required": "rack"}
    info = compile_workload(decode(raw, Workload), lookup_template=lambda ns, n: None, mappings={})
    assert info.problem is None
    assert info.pod_sets[0].topology is not None
    assert info.pod_sets[0].topology.required == "rack"
    raw["spec"]["podSets"][0]["topologyRequest"] = {"required": "rack", "podSetGroupName": "g"}
    info = compile_workload(decode(raw, Workload), lookup_template=lambda ns, n: None, mappings={})
    assert info.problem is not None
    assert info.problem.message == (
        "spec.podSets[0].topologyRequest.podSetGroupName: Forbidden: "
        "not supported by this controller's topology-aware scheduling"
    )


def test_a_job_without_topology_annotations_compiles() -> None:
    spec = decode(annotated_job_body({"unrelated": "x"}), type(job("x")))
    info = compile_workload(workload_for_job(spec), lookup_template=lambda ns, n: None, mappings={})
    assert info.problem is None


def test_the_door_names_each_annotated_template_wherever_it_sits() -> None:
    nested = {
        "metadata": {"annotations": {REQUIRED: "top-level metadata is not a template"}},
        "spec": {
            "replicatedJobs": [
                {"template": {"spec": {"template": {"metadata": {"annotations": {REQUIRED: "rack"}}}}}}
            ]
        },
    }
    found = [str(e) for e in topology_requests_refused(msgspec.Raw(msgspec.json.encode(nested)))]
    assert found == [
        f"spec.replicatedJobs[0].template.spec.template.metadata.annotations[{REQUIRED}]: Forbidden: "
        "topology-aware scheduling is not supported by this controller yet: remove the topology "
        "annotations from the pod template (the job is then admitted without a topology placement)"
    ]
    plain = msgspec.json.encode(job_body("j"))
    assert topology_requests_refused(msgspec.Raw(plain)) == []


def tas_flavor(name: str) -> ResourceFlavor:
    body = {"metadata": {"name": name}, "spec": {"nodeLabels": {"pool": "a"}, "topologyName": "default"}}
    result: ResourceFlavor = decode(body, ResourceFlavor)
    return result


def test_the_flavor_webhook_refuses_topology_name() -> None:
    assert [str(e) for e in validate_resource_flavor(tas_flavor("f"))] == [
        "spec.topologyName: Forbidden: topology-aware scheduling is not supported by this controller "
        "yet: remove spec.topologyName (the flavor's quota is then admitted without a topology placement)"
    ]


def test_a_topology_flavor_that_got_in_is_never_used_silently() -> None:
    state = Engine()
    state.set_flavor(tas_flavor("tas"))
    state.set_namespace("ns", {})
    state.set_cluster_queue(cluster_queue("cq", [("tas", {GPU: 4})]))
    state.set_local_queue("ns", "lq", "cq")
    spec = job("j", queue="lq", uid="uid-j", requests={GPU: "1"})
    state.add_workload(
        compile_workload(workload_for_job(spec), lookup_template=lambda ns, n: None, mappings={})
    )
    (decision,) = state.schedule()
    assert isinstance(decision, Pending)
    assert "flavor tas has spec.topologyName default: topology-aware scheduling is not supported" in (
        decision.message
    )


@pytest.mark.asyncio
async def test_the_job_webhook_refuses_a_topology_annotation() -> None:
    body = annotated_job_body({REQUIRED: "rack"})
    request = AdmissionRequest(
        uid="u",
        resource=GroupVersionResource("batch", "v1", "jobs"),
        operation="CREATE",
        namespace="ns",
        object=msgspec.Raw(msgspec.json.encode(body)),
    )
    verdict = await handle(JOB_VALIDATE, request, JobPolicy(), None)  # type: ignore[arg-type]
    assert not verdict.allowed
    assert verdict.message == (
        f"spec.template.metadata.annotations[{REQUIRED}]: Forbidden: topology-aware scheduling is not "
        "supported by this controller yet: remove the topology annotations from the pod template (the "
        "job is then admitted without a topology placement)"
    )


@pytest.mark.parametrize(
    "annotation",
    [
        "kueue.x-k8s.io/podset-required-topology",
        "kueue.x-k8s.io/podset-preferred-topology",
        "kueue.x-k8s.io/podset-unconstrained-topology",
        "kueue.x-k8s.io/podset-slice-required-topology",
        "kueue.x-k8s.io/podset-slice-size",
        "kueue.x-k8s.io/podset-slice-required-topology-constraints",
        "kueue.x-k8s.io/podset-group-name",
    ],
)
def test_each_of_kueues_pod_set_topology_annotations_is_refused_by_name_at_the_door(annotation: str) -> None:
    """Every pod-template annotation Kueue v0.18.1's TAS reads (docs/kueue-surface.yaml), spelled
    out here rather than taken from the code's own list: each is refused naming it."""
    body = {"spec": {"template": {"metadata": {"annotations": {annotation: "1"}}}}}
    found = [str(e) for e in topology_requests_refused(msgspec.Raw(msgspec.json.encode(body)))]
    assert found == [f"spec.template.metadata.annotations[{annotation}]: Forbidden: {TOPOLOGY_REFUSAL}"]
