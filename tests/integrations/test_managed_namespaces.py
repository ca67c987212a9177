"""Which jobs the runtime manages by namespace: Kueue v0.18.1's default managedJobsNamespaceSelector.

Kueue defaults the selector to `kubernetes.io/metadata.name NotIn [kube-system, <its namespace>]`
and applies it to every job (ManagedJobsNamespaceSelectorAlwaysRespected, on by default in
v0.18.1): a job there is never suspended, nor given a Workload, with or without a queue name.
"""

from __future__ import annotations

import pytest
from reconciler.api import Job
from reconciler.api import Namespace
from reconciler.api.resources import JOBS
from reconciler.api.resources import NAMESPACES
from reconciler.config import parse_config
from reconciler.integrations import is_managed

from tests.support.builders import job_body
from tests.support.reconciler_harness import Harness
from tests.support.reconciler_harness import decode
from tests.support.reconciler_harness import of
from tests.support.reconciler_harness import queues

MANAGE_ALL = parse_config(
    {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "manageJobsWithoutQueueName": True,
        "namespace": "gpu-quota",
    }
)


def unsuspended(h: Harness, name: str, namespace: str, queue: str | None) -> Job:
    body = job_body(name, namespace=namespace, queue=queue, uid=f"uid-{namespace}-{name}")
    body["spec"]["suspend"] = False
    body["metadata"]["resourceVersion"] = h.next_rv()
    job: Job = decode(body, Job)
    return job


@pytest.mark.parametrize("namespace", ["kube-system", "gpu-quota"])
def test_jobs_without_a_queue_in_system_and_own_namespaces_are_left_running(namespace: str) -> None:
    h = Harness(MANAGE_ALL)
    queues(h)
    h.sync_all()
    h.event("ADDED", JOBS, unsuspended(h, "dns-check", namespace, queue=None))
    actions = h.take()
    assert of(actions, "job-suspend") == []
    assert of(actions, "create-workload") == []


def test_a_job_without_a_queue_elsewhere_is_suspended_and_queued() -> None:
    h = Harness(MANAGE_ALL)
    queues(h)
    h.sync_all()
    h.event("ADDED", JOBS, unsuspended(h, "train", "ns", queue=None))
    actions = h.take()
    assert [a.name for a in of(actions, "job-suspend")] == ["train"]
    assert len(of(actions, "create-workload")) == 1


def test_the_namespace_comes_from_the_caller_when_the_configuration_names_none() -> None:
    config = parse_config(
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "manageJobsWithoutQueueName": True,
        }
    )
    h = Harness(config, namespace="ops")
    queues(h)
    h.sync_all()
    h.event("ADDED", JOBS, unsuspended(h, "agent", "ops", queue=None))
    assert of(h.take(), "job-suspend") == []


def test_the_rule_itself() -> None:
    labelled = {"kueue.x-k8s.io/queue-name": "lq"}

    def manage_all(labels: dict[str, str], namespace: str) -> bool:
        return is_managed(labels, namespace, manage_without_queue_name=True, own_namespace="gpu-quota")

    assert not manage_all({}, "kube-system")
    assert not manage_all({}, "gpu-quota")
    # As Kueue v0.18.1 (the selector is respected for every job): a queue name changes nothing there.
    assert not manage_all(labelled, "kube-system")
    assert manage_all({}, "ns")
    assert not is_managed({}, "ns", manage_without_queue_name=False, own_namespace="gpu-quota")
    assert is_managed(labelled, "ns", manage_without_queue_name=False, own_namespace="gpu-quota")


SELECTED = parse_config(
    {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "manageJobsWithoutQueueName": True,
        "namespace": "gpu-quota",
        "managedJobsNamespaceSelector": {"matchLabels": {"team": "gpu"}},
    }
)


def namespace(h: Harness, name: str, labels: dict[str, str]) -> Namespace:
    body = {"metadata": {"name": name, "labels": labels, "resourceVersion": h.next_rv()}}
    ns: Namespace = decode(body, Namespace)
    return ns


def test_a_configured_selector_replaces_the_default_and_follows_the_namespace_labels() -> None:
    h = Harness(SELECTED)
    queues(h)
    h.event("ADDED", NAMESPACES, namespace(h, "research", {}))
    h.sync_all()
    h.event("ADDED", JOBS, unsuspended(h, "notebook", "research", queue=None))
    assert of(h.take(), "job-suspend") == []  # the namespace is not selected: left alone
    h.event("MODIFIED", NAMESPACES, namespace(h, "research", {"team": "gpu"}))
    actions = h.take()
    assert [a.name for a in of(actions, "job-suspend")] == ["notebook"]
    assert len(of(actions, "create-workload")) == 1


def test_the_rule_with_a_selector() -> None:
    selector = SELECTED.managed_jobs_namespace_selector
    assert selector is not None

    def managed(namespace: str, labels: dict[str, str] | None) -> bool:
        return is_managed(
            {},
            namespace,
            manage_without_queue_name=True,
            own_namespace="gpu-quota",
            selector=selector,
            namespace_labels=labels,
        )

    assert managed("ns", {"team": "gpu"})
    assert not managed("ns", {"team": "web"})
    assert not managed("ns", None)  # not known yet: only its name label, which the selector lacks
