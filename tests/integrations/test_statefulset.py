"""The StatefulSet webhooks (framework statefulset), as Kueue v0.18.1: mstatefulset.kb.io marks a
managed set's pod template as suspended by its parent (nothing else), leaves a set another
framework marked; vstatefulset.kb.io allows replicas only to or from zero (not while the
scale-down's pods remain), refuses a changed pod spec shape naming each part, and applies the
queue-name and priority-class rules; the pod webhook then holds the set's pods."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest

from reconciler.admission.queue_rules import JobPolicy
from reconciler.admission.review import AdmissionRequest, GroupVersionResource, Verdict
from reconciler.api import ObjectMeta
from reconciler.integrations import REGISTRATIONS, with_implied
from reconciler.webhook.handlers import handle, routes
from tests.support.pods import apply_ops, pod_body

MUTATE = next(r for r in routes() if r.name == "mstatefulset.kb.io")
VALIDATE = next(r for r in routes() if r.name == "vstatefulset.kb.io")
POLICY = JobPolicy(frameworks=frozenset({"batch/job", "statefulset"}), own_namespace="kueue-system")
PARENT = "kueue.x-k8s.io/pod-suspending-parent"


class Lookups:
    def __init__(self, *, default_queue: bool = False) -> None:
        self.default_queue = default_queue

    async def default_local_queue_exists(self, namespace: str) -> bool:
        return self.default_queue

    async def namespace_labels(self, namespace: str) -> dict[str, str]:
        return {}

    async def object_meta(self, api_version: str, kind: str, namespace: str, name: str) -> ObjectMeta | None:
        return None

    async def workload_admitted(self, namespace: str, name: str) -> bool:
        return False


def sts_body(
    *, replicas: int = 2, labels: dict[str, str] | None = None, status: dict[str, int] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": "web",
            "namespace": "ns",
            "labels": {"kueue.x-k8s.io/queue-name": "lq"} if labels is None else labels,
        },
        "spec": {
            "replicas": replicas,
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod_body("x")["spec"]},
        },
        "status": status or {},
    }


def _request(body: dict[str, Any], old: dict[str, Any] | None = None) -> AdmissionRequest:
    return AdmissionRequest(
        uid="u",
        resource=GroupVersionResource("apps", "v1", "statefulsets"),
        operation="CREATE" if old is None else "UPDATE",
        namespace="ns",
        object=msgspec.Raw(msgspec.json.encode(body)),
        old_object=msgspec.Raw(msgspec.json.encode(old)) if old is not None else msgspec.Raw(b"null"),
    )


async def _validate(body: dict[str, Any], old: dict[str, Any] | None = None) -> Verdict:
    return await handle(VALIDATE, _request(body, old), POLICY, Lookups())


def test_statefulset_implies_the_pod_integration_and_is_a_kind_made_from_its_pods() -> None:
    registration = REGISTRATIONS["statefulset"]
    assert registration.implies == ("pod",)
    assert registration.integration is not None
    assert registration.integration.jobs_from_pods
    assert with_implied(["statefulset"]) == ("statefulset", "pod")


@pytest.mark.asyncio
async def test_a_managed_sets_template_is_marked_and_another_frameworks_set_left_alone() -> None:
    body = sts_body()
    verdict = await handle(MUTATE, _request(body), POLICY, Lookups())
    stored = apply_ops(body, list(verdict.patch))
    assert stored["spec"]["template"]["metadata"] == {
        "labels": {"app": "web"},
        "annotations": {PARENT: "statefulset"},
    }
    assert stored["metadata"]["labels"] == body["metadata"]["labels"]
    lws_owned = copy.deepcopy(body)
    lws_owned["spec"]["template"]["metadata"]["annotations"] = {
        PARENT: "leaderworkerset.x-k8s.io/leaderworkerset"
    }
    assert (await handle(MUTATE, _request(lws_owned), POLICY, Lookups())).patch == ()
    unnamed = sts_body(labels={})
    assert (await handle(MUTATE, _request(unnamed), POLICY, Lookups())).patch == ()
    defaulted = apply_ops(
        unnamed, list((await handle(MUTATE, _request(unnamed), POLICY, Lookups(default_queue=True))).patch)
    )
    assert defaulted["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "default"}
    assert defaulted["spec"]["template"]["metadata"]["annotations"] == {PARENT: "statefulset"}


@pytest.mark.asyncio
async def test_replicas_change_only_to_or_from_zero() -> None:
    old = sts_body(replicas=2)
    assert (
        await _validate(sts_body(replicas=3), old)
    ).message == "spec.replicas: Invalid value: 3: field is immutable"
    assert (await _validate(sts_body(replicas=0), old)).allowed
    scaled_down = sts_body(replicas=0)
    assert (await _validate(sts_body(replicas=2), scaled_down)).allowed
    remaining = sts_body(replicas=2, status={"replicas": 1})
    assert (
        await _validate(remaining, scaled_down)
    ).message == "spec.replicas: Forbidden: scaling down is still in progress"
    # Not managed (no queue name): any replicas.
    assert (await _validate(sts_body(replicas=3, labels={}), sts_body(replicas=2, labels={}))).allowed


@pytest.mark.asyncio
async def test_the_pod_spec_shape_and_the_queue_name_are_kept() -> None:
    old = sts_body()
    new = copy.deepcopy(old)
    new["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:2"  # not in the shape
    assert (await _validate(new, old)).message == (
        'spec.template.spec.containers[0].resources.requests: Invalid value: {"cpu":"2"}: field is immutable'
    )
    moved = sts_body(labels={"kueue.x-k8s.io/queue-name": "other"})
    assert (await _validate(moved, old)).allowed  # no replica ready yet
    ready = sts_body(status={"readyReplicas": 2})
    assert (await _validate(moved, ready)).message == (
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "other": field is immutable'
    )
