"""Partial admission of a batch/v1 Job (Kueue's PartialAdmission, beta and on in v0.18.1): a Job
annotated `kueue.x-k8s.io/job-min-parallelism` that does not fit whole is admitted with the most
pods that fit, down to its minimum, and runs that many; Kueue's webhook rules for the annotations."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from reconciler.admission.queue_rules import JobPolicy
from reconciler.admission.review import AdmissionRequest, GroupVersionResource, Verdict
from reconciler.api import ObjectMeta
from reconciler.api.resources import CLUSTER_QUEUES, JOBS, WORKLOAD_PRIORITY_CLASSES
from reconciler.core.model.workloads import PodSetInfo, WorkloadInfo
from reconciler.core.primitives.selectors import PodPlacement
from reconciler.core.scheduling.partial import largest_fit
from reconciler.integrations import BATCH_JOB
from reconciler.integrations.base import PodSetStart
from reconciler.webhook.handlers import handle, routes
from tests.support.builders import job_body
from tests.support.explain_state import decode
from tests.support.memory_cluster import Cluster, admitted, condition

PODS_READY = "All pods reached readiness and the workload is running"

MIN = "kueue.x-k8s.io/job-min-parallelism"
SYNC = "kueue.x-k8s.io/job-completions-equal-parallelism"


def _job(name: str, parallelism: int, least: int | None, **more: str) -> dict[str, Any]:
    body = job_body(
        name,
        parallelism=parallelism,
        completions=parallelism,
        claims=[{"name": "g", "resourceClaimTemplateName": "gpu"}],
    )
    annotations = {} if least is None else {MIN: str(least)}
    body["metadata"]["annotations"] = {**annotations, **more}
    return body


def _info(*sets: tuple[int, int | None]) -> WorkloadInfo:
    info = WorkloadInfo("ns", "w", "u", "lq", 0, "")
    for i, (count, least) in enumerate(sets):
        info.pod_sets.append(PodSetInfo(f"p{i}", count, PodPlacement(), {"gpu": 1}, min_count=least))
    return info


def test_the_search_finds_the_largest_sizes_that_fit_down_to_the_minimum() -> None:
    def fits_within(limit: int) -> Any:
        return lambda info: (
            [ps.count for ps in info.pod_sets] if sum(ps.count for ps in info.pod_sets) <= limit else None
        )

    assert largest_fit(_info((8, 2)), fits_within(5)) == [5]
    assert largest_fit(_info((8, 2)), fits_within(1)) is None  # below the minimum
    assert largest_fit(_info((8, None)), fits_within(5)) is None  # all or nothing
    # Two pod sets give up the same share of what each may give up (Kueue's steps).
    assert largest_fit(_info((4, 2), (6, None)), fits_within(9)) == [3, 6]


def test_a_job_that_does_not_fit_whole_runs_with_the_pods_that_fit_and_keeps_running() -> None:
    c = Cluster()
    c.queues(gpus=3)
    c.api.add(JOBS, _job("wide", parallelism=5, least=2))
    c.settle()
    assert admitted(c, "wide")
    workload = c.workload("wide")
    assert workload["spec"]["podSets"][0]["minCount"] == 2
    assert workload["status"]["admission"]["podSetAssignments"][0]["count"] == 3
    job = c.job("wide")
    assert job["spec"]["suspend"] is False
    assert job["spec"]["parallelism"] == 3
    assert job["spec"]["completions"] == 5  # left alone without the completions annotation
    assert c.used_gpus() == 3
    c.settle()
    assert admitted(c, "wide")  # the smaller Job still matches its Workload: not stopped
    assert c.job("wide")["spec"]["suspend"] is False
    # Its three admitted pods ready: the Workload's pods are all ready (three, not five).
    c.api.change(JOBS, "ns", "wide", {"status": {"ready": 3, "active": 3}})
    c.settle()
    assert condition(c.workload("wide"), "PodsReady") == ("True", "Started", PODS_READY)


def test_a_job_without_the_annotation_waits_whole() -> None:
    c = Cluster()
    c.queues(gpus=3)
    c.api.add(JOBS, _job("wide", parallelism=5, least=None))
    c.settle()
    assert not admitted(c, "wide")
    assert c.used_gpus() == 0


def test_start_sets_the_admitted_parallelism_and_restore_gives_the_recorded_one_back() -> None:
    body = _job("j", parallelism=4, least=2, **{SYNC: "true"})
    body["spec"]["completionMode"] = "Indexed"
    job = decode(body, BATCH_JOB.projection)
    (pod_set,) = BATCH_JOB.pod_sets(job)
    assert (pod_set.count, pod_set.min_count) == (4, 2)
    started = msgspec.json.decode(BATCH_JOB.start_patch(job, [PodSetStart("main", count=3)]))
    assert (started["spec"]["parallelism"], started["spec"]["completions"]) == (3, 3)
    body["spec"].update(parallelism=3, completions=3, suspend=True)
    body["spec"]["template"]["metadata"] = {"labels": {"kueue.x-k8s.io/podset": "main"}}
    patch = BATCH_JOB.restore_patch(decode(body, BATCH_JOB.projection), [pod_set])
    assert patch is not None
    restored = msgspec.json.decode(patch.body)
    assert (restored["spec"]["parallelism"], restored["spec"]["completions"]) == (4, 4)


VALIDATE = next(r for r in routes() if r.path == "/validate-batch-v1-job")
ON = JobPolicy(frameworks=frozenset({"batch/job"}), job_kinds=frozenset({("batch/v1", "Job")}))


class _Lookups:
    async def default_local_queue_exists(self, namespace: str) -> bool:
        return False

    async def namespace_labels(self, namespace: str) -> dict[str, str]:
        return {}

    async def object_meta(self, api_version: str, kind: str, namespace: str, name: str) -> ObjectMeta | None:
        return None

    async def workload_admitted(self, namespace: str, name: str) -> bool:
        return False


async def _verdict(body: dict[str, Any], old: dict[str, Any] | None = None) -> Verdict:
    request = AdmissionRequest(
        uid="u",
        resource=GroupVersionResource("batch", "v1", "jobs"),
        operation="CREATE" if old is None else "UPDATE",
        namespace="ns",
        object=msgspec.Raw(msgspec.json.encode(body)),
    )
    if old is not None:
        request.old_object = msgspec.Raw(msgspec.json.encode(old))
    return await handle(VALIDATE, request, ON, _Lookups())


@pytest.mark.asyncio
async def test_kueues_rules_for_the_annotations_and_the_elastic_job_refused_by_name() -> None:
    assert (await _verdict(_job("j", 4, 2))).allowed
    verdict = await _verdict(_job("j", 4, 4))
    assert verdict.message == f"metadata.annotations[{MIN}]: Invalid value: 4: should be between 0 and 3"
    verdict = await _verdict(_job("j", 4, None, **{MIN: "two"}))
    assert verdict.message == (
        f'metadata.annotations[{MIN}]: Invalid value: "two": strconv.Atoi: parsing "two": invalid syntax'
    )
    verdict = await _verdict(_job("j", 4, 2, **{SYNC: "true"}))
    assert (
        verdict.message
        == f'metadata.annotations[{SYNC}]: Invalid value: "true": should not be enabled for NonIndexed jobs'
    )
    verdict = await _verdict(_job("j", 4, None, **{"kueue.x-k8s.io/elastic-job": "true"}))
    assert verdict.message.startswith(
        'metadata.annotations[kueue.x-k8s.io/elastic-job]: Invalid value: "true": '
        "elastic jobs (workload slices) are not supported"
    )
    running = _job("j", 4, 2)
    running["spec"]["suspend"] = False
    grown = _job("j", 5, 2)
    grown["spec"]["suspend"] = False
    verdict = await _verdict(grown, running)
    assert verdict.message == (
        "spec.parallelism: Forbidden: "
        "cannot change when partial admission is enabled and the job is not suspended"
    )


def _preempting_queues(c: Cluster, gpus: int) -> None:
    """The queues of `c.queues` whose ClusterQueue preempts lower priorities; classes low and high."""
    c.queues(gpus=gpus)
    c.api.change(CLUSTER_QUEUES, "", "cq", {"spec": {"preemption": {"withinClusterQueue": "LowerPriority"}}})
    for name, value in (("low", 10), ("high", 1000)):
        c.api.add(WORKLOAD_PRIORITY_CLASSES, {"metadata": {"name": name}, "value": value})
    c.settle()


def _prioritized(body: dict[str, Any], priority_class: str) -> dict[str, Any]:
    body["metadata"].setdefault("labels", {})["kueue.x-k8s.io/priority-class"] = priority_class
    return body


def test_a_smaller_size_that_fits_only_by_preempting_evicts_and_is_admitted_at_that_size() -> None:
    """Kueue's partial admission tries preemption at each smaller size: whole (4 GPUs) the Job
    cannot fit even by preempting (its peer has its priority), at 2 it fits once the low Job goes."""
    c = Cluster()
    _preempting_queues(c, gpus=4)
    c.api.add(JOBS, _prioritized(_job("low", parallelism=2, least=None), "low"))
    c.api.add(JOBS, _prioritized(_job("peer", parallelism=2, least=None), "high"))
    c.settle()
    assert admitted(c, "low")
    assert admitted(c, "peer")
    c.api.add(JOBS, _prioritized(_job("wide", parallelism=4, least=2), "high"))
    c.settle()
    # Whole, "wide" would need the peer's GPUs too (same priority: not preemptible); at 2 it fits
    # once "low" is evicted, which the in-memory cluster carries out at once.
    evicted = condition(c.workload("low"), "Evicted")
    assert evicted is not None
    assert evicted[:2] == ("True", "Preempted")
    assert c.job("low")["spec"]["suspend"] is True
    assert admitted(c, "wide")
    assignment = c.workload("wide")["status"]["admission"]["podSetAssignments"][0]
    assert assignment["count"] == 2
    assert c.job("wide")["spec"]["parallelism"] == 2
    assert admitted(c, "peer")
    assert c.used_gpus() == 4
