"""A kind defined only in the tests (tests/support/trainingrun.py: its module and its
Registration) and one registration call: the webhook server serves its webhooks, the generated
manifests grant and configure them, and the runtime admits, starts and finishes its jobs. No
module of the controller is touched; after the call the registry is as it was."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator

import msgspec
import pytest

from reconciler import generated
from reconciler.admission.queue_rules import JobPolicy
from reconciler.admission.review import AdmissionRequest, GroupVersionResource
from reconciler.api.resources import CLUSTER_QUEUES, LOCAL_QUEUES, NAMESPACES, RESOURCE_FLAVORS
from reconciler.config import parse_config
from reconciler.integrations import REGISTRATIONS, REGISTRY, Registration, registered
from reconciler.webhook.handlers import handle, routes
from tests.support.builders import cluster_queue_body
from tests.support.memory_cluster import Cluster
from tests.support.trainingrun import TRAINING_RUN, TRAINING_RUN_REGISTRATION, training_run
from tests.support.webhook_server import Lookups

FRAMEWORK = TRAINING_RUN.framework
RUNS = TRAINING_RUN.resource
ROLES = [("leader", 1, {"cpu": "1"}), ("workers", 2, {"cpu": "1", "nvidia.com/gpu": "1"})]
CONFIG = dataclasses.replace(
    parse_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}),
    frameworks=("batch/job", FRAMEWORK),
)


@pytest.fixture
def registration() -> Iterator[Registration]:
    assert FRAMEWORK not in REGISTRY
    with registered(TRAINING_RUN_REGISTRATION) as done:
        yield done
    assert FRAMEWORK not in REGISTRY
    assert FRAMEWORK not in REGISTRATIONS


def _review(body: bytes, operation: str = "CREATE") -> AdmissionRequest:
    resource = GroupVersionResource(RUNS.group, RUNS.version, RUNS.plural)
    return AdmissionRequest(
        uid="u", resource=resource, operation=operation, namespace="ns", object=msgspec.Raw(body)
    )


@pytest.mark.asyncio
@pytest.mark.usefixtures("registration")
async def test_its_webhooks_are_served_and_suspend_a_queued_run() -> None:
    served = {r.name: r for r in routes()}
    mutate, validate = served["mtrainingrun.kb.io"], served["vtrainingrun.kb.io"]
    assert (mutate.path, validate.path) == (
        "/mutate-example-com-v1-trainingrun",
        "/validate-example-com-v1-trainingrun",
    )
    run = msgspec.json.encode(training_run("r", ROLES, suspend=False))
    policy = JobPolicy(frameworks=frozenset(CONFIG.frameworks))
    verdict = await handle(mutate, _review(run), policy, Lookups())
    assert verdict.allowed
    assert [dict(op) for op in verdict.patch] == [{"op": "add", "path": "/spec/suspend", "value": True}]
    bad = json.loads(run)
    bad["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "Not_A_Name"
    refused = await handle(validate, _review(json.dumps(bad).encode()), policy, Lookups())
    assert not refused.allowed
    assert "metadata.labels[kueue.x-k8s.io/queue-name]" in refused.message
    # Its framework off: the webhooks let its objects pass unchanged.
    off = JobPolicy(frameworks=frozenset({"batch/job"}))
    assert (await handle(mutate, _review(run), off, Lookups())).patch == ()


@pytest.mark.usefixtures("registration")
def test_the_generated_manifests_configure_its_webhooks_and_grant_its_access() -> None:
    rbac = "\n".join(generated.rbac_rules(REGISTRATIONS.values()))
    assert (
        "- apiGroups: [example.com]\n  resources: [trainingruns]\n  verbs: [get, list, watch, patch]" in rbac
    )
    target = generated.TARGETS[1]
    mutating = "\n".join(generated.webhooks(target, True, list(REGISTRATIONS.values())))
    assert "- name: mtrainingrun.kb.io" in mutating
    assert "      path: /mutate-example-com-v1-trainingrun" in mutating


def _queues(c: Cluster) -> None:
    c.api.add(NAMESPACES, {"metadata": {"name": "ns", "labels": {"kubernetes.io/metadata.name": "ns"}}})
    c.api.add(RESOURCE_FLAVORS, {"metadata": {"name": "gpus"}, "spec": {"nodeLabels": {"pool": "gpu"}}})
    c.api.add(CLUSTER_QUEUES, cluster_queue_body("cq", [("gpus", {"cpu": 4, "nvidia.com/gpu": 2})]))
    c.api.add(LOCAL_QUEUES, {"metadata": {"name": "lq", "namespace": "ns"}, "spec": {"clusterQueue": "cq"}})


@pytest.mark.usefixtures("registration")
def test_the_runtime_admits_starts_and_finishes_it() -> None:
    c = Cluster(CONFIG)  # the registry as it stands: the registration call is all it takes
    _queues(c)
    c.api.sync()
    c.api.add(RUNS, msgspec.json.decode(msgspec.json.encode(training_run("r", ROLES, suspend=True))))
    c.settle()
    workload = c.only_workload()
    assert [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]] == [
        ("leader", 1),
        ("workers", 2),
    ]
    assert c.api.get(RUNS, "ns", "r")["spec"]["suspend"] is False
    assert c.api.reasons("TrainingRun", "r") == ["CreatedWorkload", "Started"]
    done = {"conditions": [{"type": "Succeeded", "status": "True", "message": "done"}]}
    c.api.change(RUNS, "ns", "r", {"status": done})
    c.settle()
    conditions = {x["type"]: x["status"] for x in c.only_workload()["status"]["conditions"]}
    assert conditions["Finished"] == "True"
