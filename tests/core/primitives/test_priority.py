"""Workload priority from WorkloadPriorityClass, PriorityClass or the cluster default, as Kueue derives it."""

from __future__ import annotations

from typing import Any

import msgspec

from reconciler.api import Job, PriorityClass, PriorityClassRef, WorkloadPriorityClass
from reconciler.core.primitives.priority import (
    MissingPriorityClass,
    ResolvedPriority,
    priority_update,
    resolve_priority,
)
from reconciler.integrations.batchjob import workload_for_job
from tests.support.builders import decode, job_body


def wpc(name: str, value: int) -> WorkloadPriorityClass:
    result: WorkloadPriorityClass = decode(
        {"metadata": {"name": name}, "value": value}, WorkloadPriorityClass
    )
    return result


def pc(name: str, value: int, default: bool = False) -> PriorityClass:
    body = {"metadata": {"name": name}, "value": value, "globalDefault": default}
    result: PriorityClass = decode(body, PriorityClass)
    return result


def job_with(label: str | None = None, pod_class: str | None = None) -> Job:
    body: dict[str, Any] = job_body("train", uid="u1")
    if label is not None:
        body["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = label
    if pod_class is not None:
        body["spec"]["template"]["spec"]["priorityClassName"] = pod_class
    result: Job = decode(body, Job)
    return result


WPCS = {"high": wpc("high", 1000), "low": wpc("low", 10)}
PCS = {"pods-high": pc("pods-high", 500), "fallback": pc("fallback", 7, default=True)}


def test_the_label_names_a_workload_priority_class_first() -> None:
    got = resolve_priority(job_with("high", "pods-high"), WPCS, PCS)
    assert got == ResolvedPriority(1000, PriorityClassRef("kueue.x-k8s.io", "WorkloadPriorityClass", "high"))


def test_else_the_pod_templates_priority_class() -> None:
    got = resolve_priority(job_with(pod_class="pods-high"), WPCS, PCS)
    assert got == ResolvedPriority(500, PriorityClassRef("scheduling.k8s.io", "PriorityClass", "pods-high"))


def test_else_the_lowest_global_default_else_zero() -> None:
    two_defaults = {**PCS, "other": pc("other", 3, default=True)}
    got = resolve_priority(job_with(), WPCS, two_defaults)
    assert got == ResolvedPriority(3, PriorityClassRef("scheduling.k8s.io", "PriorityClass", "other"))
    assert resolve_priority(job_with(), WPCS, {}) == ResolvedPriority(0, None)


def test_a_missing_class_names_the_field_and_the_fix() -> None:
    got = resolve_priority(job_with("urgent"), WPCS, PCS)
    assert isinstance(got, MissingPriorityClass)
    assert "label kueue.x-k8s.io/priority-class" in got.message
    assert "'urgent'" in got.message
    assert "create it" in got.message
    missing_pod_class = resolve_priority(job_with(pod_class="nope"), WPCS, PCS)
    assert isinstance(missing_pod_class, MissingPriorityClass)
    assert missing_pod_class.field == "spec.template.spec.priorityClassName"


def test_the_workload_carries_priority_and_its_class() -> None:
    resolved = resolve_priority(job_with("low"), WPCS, PCS)
    assert isinstance(resolved, ResolvedPriority)
    spec = msgspec.json.decode(msgspec.json.encode(workload_for_job(job_with("low"), resolved)))["spec"]
    assert spec["priority"] == 10
    assert spec["priorityClassRef"] == {
        "group": "kueue.x-k8s.io",
        "kind": "WorkloadPriorityClass",
        "name": "low",
    }


def test_a_changed_label_moves_a_workload_priority_but_never_a_pod_priority() -> None:
    low = resolve_priority(job_with("low"), WPCS, PCS)
    assert isinstance(low, ResolvedPriority)
    workload = workload_for_job(job_with("low"), low)
    update = priority_update(job_with("high"), workload, WPCS)
    assert update is not None
    assert update.value == 1000
    assert priority_update(job_with("low"), workload, WPCS) is None  # unchanged
    assert priority_update(job_with("ghost"), workload, WPCS) is None  # missing class: keep
    from_pods = resolve_priority(job_with(pod_class="pods-high"), WPCS, PCS)
    assert isinstance(from_pods, ResolvedPriority)
    pods_workload = workload_for_job(job_with(pod_class="pods-high"), from_pods)
    assert priority_update(job_with("high", "pods-high"), pods_workload, WPCS) is None
