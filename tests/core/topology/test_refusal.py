"""Topology-aware scheduling at the doors and in the core: a flavor's spec.topologyName is accepted
and checked as Kueue's CRD checks it; a batch/v1 Job's placement annotations pass its webhook, checked
as Kueue checks them, while slices and groups (and any other kind's topology annotations) are
refused by name; in the core a Workload's placement request is read (annotations or
topologyRequest), what the core does not do (slices, groups) refused, and a TAS flavor is never
used silently: without the nodes, or for a Workload of another kind, it is refused by name."""

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
        "topology-aware scheduling is supported for batch/v1 Jobs and JobSets only by this controller: "
        "remove the topology annotations from the pod template (the job is then admitted without a "
        "topology placement)"
    ]
    plain = msgspec.json.encode(job_body("j"))
    assert topology_requests_refused(msgspec.Raw(plain)) == []


def tas_flavor(name: str) -> ResourceFlavor:
    body = {"metadata": {"name": name}, "spec": {"nodeLabels": {"pool": "a"}, "topologyName": "default"}}
    result: ResourceFlavor = decode(body, ResourceFlavor)
    return result


def test_the_flavor_webhook_accepts_topology_name_and_checks_it_as_kueues_crd() -> None:
    assert validate_resource_flavor(tas_flavor("f")) == []
    bad = decode({"metadata": {"name": "f"}, "spec": {"topologyName": "Not_A_Name"}}, ResourceFlavor)
    assert [str(e) for e in validate_resource_flavor(bad)] == [
        'spec.topologyName: Invalid value: "Not_A_Name": a lowercase RFC 1123 subdomain must consist of '
        "lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
        "character (e.g. 'example.com', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        "spec.nodeLabels: Required value: at least one nodeLabel is required when topology is set",
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
    assert "flavor tas has spec.topologyName default: topology-aware scheduling needs the nodes" in (
        decision.message
    )


async def job_verdict(annotations: dict[str, str]) -> Any:
    request = AdmissionRequest(
        uid="u",
        resource=GroupVersionResource("batch", "v1", "jobs"),
        operation="CREATE",
        namespace="ns",
        object=msgspec.Raw(msgspec.json.encode(annotated_job_body(annotations))),
    )
    return await handle(JOB_VALIDATE, request, JobPolicy(), None)  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_the_job_webhook_accepts_the_placement_annotations() -> None:
    for asked in ({REQUIRED: "cloud.com/rack"}, {PREFERRED: "rack"}, {UNCONSTRAINED: "true"}):
        verdict = await job_verdict(asked)
        assert verdict.allowed, verdict.message


@pytest.mark.asyncio
async def test_the_job_webhook_checks_them_as_kueue_and_refuses_slices_by_name() -> None:
    path = "spec.template.metadata.annotations"
    verdict = await job_verdict({REQUIRED: "rack", PREFERRED: "block"})
    assert not verdict.allowed
    assert verdict.message == (
        f'{path}: Invalid value: must not contain more than one topology annotation: ["{REQUIRED}", '
        f'"{PREFERRED}", "{UNCONSTRAINED}"]'
    )
    verdict = await job_verdict({UNCONSTRAINED: "yes"})
    assert verdict.message == f'{path}[{UNCONSTRAINED}]: Invalid value: "yes": must be a boolean value'
    verdict = await job_verdict({REQUIRED: "-rack"})
    assert verdict.message is not None
    assert verdict.message.startswith(f'{path}[{REQUIRED}]: Invalid value: "-rack"')
    verdict = await job_verdict({REQUIRED: "rack", SLICE_REQUIRED: "rack", SLICE_SIZE: "2"})
    assert verdict.message == (
        f"[{path}[{SLICE_REQUIRED}]: Forbidden: not supported by this controller's topology-aware "
        f"scheduling, {path}[{SLICE_SIZE}]: Forbidden: not supported by this controller's "
        "topology-aware scheduling]"
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
