"""The comparison of a job with its Workload is skipped while neither generation moved since they
last matched (MatchMemo); every change that can make them differ is still found."""

from __future__ import annotations

from typing import Any

import msgspec
from reconciler.api import Job
from reconciler.api import ObjectMeta
from reconciler.api import PodSet
from reconciler.api import Workload
from reconciler.api import WorkloadSpec
from reconciler.api.resources import JOBS
from reconciler.integrations import BATCH_JOB
from reconciler.integrations import DeleteMismatched
from reconciler.integrations import Known
from reconciler.integrations import MatchMemo
from reconciler.integrations import Nothing
from reconciler.integrations import UpdateMismatched
from reconciler.integrations import decide
from reconciler.integrations.batchjob import BatchJob

from tests.support.memory_cluster import Cluster

TOLERATION = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}


def job(*, uid: str = "j-1", generation: int = 1, parallelism: int = 1, tolerations: bool = False) -> Job:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if tolerations:
        spec["tolerations"] = [TOLERATION]
    body = {
        "metadata": {"name": "j", "namespace": "ns", "uid": uid, "generation": generation},
        "spec": {"suspend": True, "parallelism": parallelism, "template": {"spec": spec}},
    }
    decoded: Job = msgspec.json.decode(msgspec.json.encode(body), type=Job)
    return decoded


def workload(pod_sets: list[PodSet], *, uid: str = "w-1", generation: int = 1) -> Workload:
    meta = ObjectMeta(name="w", namespace="ns", uid=uid, generation=generation)
    return Workload(metadata=meta, spec=WorkloadSpec(pod_sets=pod_sets))


class CountingJob(BatchJob):
    """batch/v1 Job, counting how often its pod sets are built (once per comparison)."""

    def __init__(self) -> None:
        self.built = 0

    def pod_sets(self, obj: Job) -> list[PodSet]:
        self.built += 1
        return super().pod_sets(obj)


def test_the_comparison_is_skipped_while_neither_generation_moves() -> None:
    memo, kind = MatchMemo(), CountingJob()
    matching = workload(BATCH_JOB.pod_sets(job()))
    assert isinstance(decide(kind, job(), matching, Known(), {}, memo), Nothing)
    assert kind.built == 1
    assert len(memo) == 1
    # A status or metadata change keeps both generations: no second comparison.
    assert isinstance(decide(kind, job(), matching, Known(), {}, memo), Nothing)
    assert kind.built == 1
    # Without a memo every decision compares.
    decide(kind, job(), matching, Known(), {})
    assert kind.built == 2


def test_a_job_spec_change_with_a_new_generation_is_found() -> None:
    memo = MatchMemo()
    recorded = workload(BATCH_JOB.pod_sets(job()))
    assert isinstance(decide(BATCH_JOB, job(), recorded, Known(), {}, memo), Nothing)
    step = decide(BATCH_JOB, job(generation=2, parallelism=3), recorded, Known(), {}, memo)
    assert isinstance(step, UpdateMismatched)
    assert [ps.count for ps in step.pod_sets] == [3]


def test_a_workload_spec_change_with_a_new_generation_is_found() -> None:
    memo = MatchMemo()
    assert isinstance(
        decide(BATCH_JOB, job(), workload(BATCH_JOB.pod_sets(job())), Known(), {}, memo), Nothing
    )
    changed = workload(BATCH_JOB.pod_sets(job(parallelism=2)), generation=2)
    assert isinstance(decide(BATCH_JOB, job(), changed, Known(), {}, memo), UpdateMismatched)


def test_a_recreated_job_or_workload_is_compared_again() -> None:
    memo = MatchMemo()
    assert isinstance(
        decide(BATCH_JOB, job(), workload(BATCH_JOB.pod_sets(job())), Known(), {}, memo), Nothing
    )
    # The same name and generation, another object: the job deleted and created again ...
    recreated = job(uid="j-2", parallelism=2)
    assert isinstance(
        decide(BATCH_JOB, recreated, workload(BATCH_JOB.pod_sets(job())), Known(), {}, memo), UpdateMismatched
    )
    # ... or the Workload.
    other = workload(BATCH_JOB.pod_sets(job(parallelism=2)), uid="w-2")
    assert isinstance(decide(BATCH_JOB, job(), other, Known(), {}, memo), UpdateMismatched)


def test_a_match_without_tolerations_is_not_reused_once_they_count() -> None:
    memo = MatchMemo()
    # Admitted: the job's tolerations (its flavor's, injected at start) are not compared.
    recorded = workload(BATCH_JOB.pod_sets(job()))
    with_tolerations = job(tolerations=True)
    assert isinstance(decide(BATCH_JOB, with_tolerations, recorded, Known(admitted=True), {}, memo), Nothing)
    # Quota gone, no admission: the same objects now differ by their tolerations.
    assert isinstance(decide(BATCH_JOB, with_tolerations, recorded, Known(), {}, memo), UpdateMismatched)


def test_objects_without_a_generation_are_always_compared() -> None:
    memo = MatchMemo()
    recorded = workload(BATCH_JOB.pod_sets(job(generation=0)))
    assert isinstance(decide(BATCH_JOB, job(generation=0), recorded, Known(), {}, memo), Nothing)
    assert len(memo) == 0
    step = decide(BATCH_JOB, job(generation=0, parallelism=3), recorded, Known(), {}, memo)
    assert isinstance(step, UpdateMismatched)


def test_over_the_api_a_new_parallelism_reaches_the_workload_and_a_deleted_job_is_forgotten() -> None:
    c = Cluster()
    c.queues(gpus=0)  # nothing fits: the Workload pends without quota
    c.submit("a")
    memo = c.reconciler.job_kinds.by_kind["Job"].matches
    assert len(memo) == 1
    assert [ps["count"] for ps in c.workload("a")["spec"]["podSets"]] == [1]
    c.api.change(JOBS, "ns", "a", {"spec": {"parallelism": 3, "completions": 3}})
    c.settle()
    assert c.job("a")["metadata"]["generation"] == 2
    assert [ps["count"] for ps in c.workload("a")["spec"]["podSets"]] == [3]
    c.api.delete(JOBS, "ns", "a")
    c.settle()
    assert len(memo) == 0


def test_our_start_landing_one_generation_on_keeps_the_match_for_an_admitted_job() -> None:
    memo, kind = MatchMemo(), CountingJob()
    recorded = workload(BATCH_JOB.pod_sets(job()))
    admitted = Known(admitted=True)
    # Matched while pending (tolerations compared too), then admitted and started.
    assert isinstance(decide(kind, job(), recorded, Known(), {}, memo), Nothing)
    assert isinstance(decide(kind, job(), recorded, admitted, {}, memo), Nothing)
    assert kind.built == 1
    # The start's response: the flavor's tolerations in, one generation on; no second comparison.
    memo.started(job(generation=2, tolerations=True).metadata)
    assert isinstance(
        decide(kind, job(generation=2, tolerations=True), recorded, admitted, {}, memo), Nothing
    )
    assert kind.built == 1
    # It holds only where tolerations are left out: without the quota they are compared again.
    step = decide(kind, job(generation=2, tolerations=True), recorded, Known(), {}, memo)
    assert isinstance(step, UpdateMismatched)
    assert kind.built == 2


def test_a_start_landing_after_someone_elses_change_is_compared_again() -> None:
    memo = MatchMemo()
    recorded = workload(BATCH_JOB.pod_sets(job()))
    admitted = Known(admitted=True)
    assert isinstance(decide(BATCH_JOB, job(), recorded, admitted, {}, memo), Nothing)
    # Parallelism raised (generation 2) before our start landed (generation 3): a mismatch.
    memo.started(job(generation=3, parallelism=3).metadata)
    step = decide(BATCH_JOB, job(generation=3, parallelism=3), recorded, admitted, {}, memo)
    assert isinstance(step, DeleteMismatched)
    # A start of another job of that name (a new UID) is no match either.
    memo.started(job(uid="j-2", generation=2, parallelism=3).metadata)
    step = decide(BATCH_JOB, job(uid="j-2", generation=2, parallelism=3), recorded, admitted, {}, memo)
    assert isinstance(step, DeleteMismatched)


def test_over_the_api_a_started_job_is_not_compared_again_for_its_own_start() -> None:
    c = Cluster()
    c.queues(gpus=1)
    kind = CountingJob()
    c.reconciler.job_kinds.by_kind["Job"].integration = kind
    c.submit("a")
    assert c.job("a")["spec"]["suspend"] is False
    assert c.job("a")["metadata"]["generation"] == 2  # the start moved it
    # Built for the Workload, then compared once (before admission); the start is no change.
    assert kind.built == 2
