"""Cohorts at the door (vcohort.kb.io): Kueue v0.18.1's rules for quotas, limits and weights."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from reconciler.admission.fielderrors import FieldError
from reconciler.admission.review import AdmissionRequest, decode_review
from reconciler.api import ClusterQueue, Cohort
from reconciler.webhook.clusterqueues import validate_cluster_queue
from reconciler.webhook.cohorts import validate_cohort
from reconciler.webhook.handlers import KUEUE_ROUTES, handle

GPU = "nvidia.com/gpu"
WHERE = "spec.resourceGroups[0].flavors[0].resources[0]"


def cohort_spec(*resources: dict[str, Any], **spec: Any) -> dict[str, Any]:
    groups = [{"coveredResources": [GPU], "flavors": [{"name": "t4", "resources": list(resources)}]}]
    return {"resourceGroups": groups if resources else [], **spec}


def cohort(*resources: dict[str, Any], **spec: Any) -> Cohort:
    body = {"metadata": {"name": "team"}, "spec": cohort_spec(*resources, **spec)}
    return msgspec.json.decode(msgspec.json.encode(body), type=Cohort)


def gpus(nominal: str | int, **limits: str) -> dict[str, Any]:
    return {"name": GPU, "nominalQuota": nominal, **limits}


def messages(errors: list[FieldError]) -> list[str]:
    return [str(e) for e in errors]


def test_a_good_cohort_passes() -> None:
    assert validate_cohort(cohort(gpus(2))) == []
    assert validate_cohort(cohort()) == []
    under = cohort(
        gpus(2, borrowingLimit="1", lendingLimit="5"), parentName="org", fairSharing={"weight": "0"}
    )
    assert validate_cohort(under) == []  # a Cohort may lend more than its own quota


def test_a_negative_quota_is_refused() -> None:
    assert messages(validate_cohort(cohort(gpus("-1")))) == [
        f'{WHERE}.nominalQuota: Invalid value: "-1": must be greater than or equal to 0'
    ]


def test_limits_need_a_parent_cohort() -> None:
    root = cohort(gpus(2, borrowingLimit="-1", lendingLimit="-1"))
    assert messages(validate_cohort(root)) == [
        f'{WHERE}.borrowingLimit: Invalid value: "-1": must be nil when parent is empty',
        f'{WHERE}.borrowingLimit: Invalid value: "-1": must be greater than or equal to 0',
        f'{WHERE}.lendingLimit: Invalid value: "-1": must be greater than or equal to 0',
        f'{WHERE}.lendingLimit: Invalid value: "-1": must be nil when parent is empty',
    ]


@pytest.mark.parametrize(
    ("weight", "detail"),
    [
        ("-1", '"-1": must be greater than or equal to 0'),
        ("1n", '"1n": When not 0, weight must be > 10e-9'),
    ],
)
def test_a_weight_is_not_negative_nor_too_small(weight: str, detail: str) -> None:
    bad = cohort(fairSharing={"weight": weight})
    assert messages(validate_cohort(bad)) == [f"spec.fairSharing: Invalid value: {detail}"]
    cq = msgspec.convert(
        {"metadata": {"name": "cq"}, "spec": {"fairSharing": {"weight": weight}}}, ClusterQueue
    )
    assert messages(validate_cluster_queue(cq)) == [f"spec.fairSharing: Invalid value: {detail}"]


def test_the_resource_groups_are_checked_as_a_cluster_queues() -> None:
    spec = cohort_spec(gpus(1))
    spec["resourceGroups"].append({"coveredResources": [GPU, "bad name"], "flavors": []})
    bad = msgspec.convert({"metadata": {"name": "team"}, "spec": spec}, Cohort)
    found = messages(validate_cohort(bad))
    assert f'spec.resourceGroups[1].coveredResources[0]: Duplicate value: "{GPU}"' in found
    assert any(
        m.startswith('spec.resourceGroups[1].coveredResources[1]: Invalid value: "bad name"') for m in found
    )


def review(request: dict[str, Any]) -> AdmissionRequest:
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    return decode_review(msgspec.json.encode(body))


@pytest.mark.asyncio
@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
async def test_the_route_is_kueues_and_refuses_on_create_and_update(operation: str) -> None:
    (route,) = [r for r in KUEUE_ROUTES if r.resource == "cohorts"]
    assert (route.path, route.name, route.mutating) == (
        "/validate-kueue-x-k8s-io-v1beta2-cohort",
        "vcohort.kb.io",
        False,
    )
    body = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "team"}}
    bad = {**body, "spec": cohort_spec(gpus(1, lendingLimit="1"))}
    request = {
        "uid": "u-1",
        "resource": {"group": "kueue.x-k8s.io", "version": "v1beta2", "resource": "cohorts"},
        "operation": operation,
        "name": "team",
        "object": bad,
        "oldObject": body if operation == "UPDATE" else None,
    }
    verdict = await handle(route, review(request), None, None)  # type: ignore[arg-type]
    assert not verdict.allowed
    assert verdict.message == f'{WHERE}.lendingLimit: Invalid value: "1": must be nil when parent is empty'
    good = {**request, "object": {**body, "spec": cohort_spec(gpus(1, lendingLimit="1"), parentName="org")}}
    verdict = await handle(route, review(good), None, None)  # type: ignore[arg-type]
    assert verdict.allowed
