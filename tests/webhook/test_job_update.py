"""The Job webhook's update rules, as Kueue v0.18.1's (jobframework.ValidateJobOnUpdate)."""

from __future__ import annotations

import msgspec

from reconciler.admission.queue_rules import (
    needs_default_queue_lookup_on_update,
    validate_job_update,
)
from reconciler.api import Job
from tests.support.builders import job_body


def job(queue: str | None = "lq", *, suspend: bool = False, parallelism: int = 1) -> Job:
    body = job_body("j", queue=queue)
    body["spec"]["suspend"] = suspend
    body["spec"]["parallelism"] = parallelism
    decoded: Job = msgspec.json.decode(msgspec.json.encode(body), type=Job)
    return decoded


def test_raising_parallelism_of_a_running_queued_job_is_allowed() -> None:
    # Kueue lets it through; its controller then replaces the Workload (see tests/integrations).
    assert validate_job_update(job(parallelism=3), job(parallelism=1)) == []
    assert validate_job_update(job(parallelism=3, suspend=True), job(suspend=True)) == []


def test_the_queue_name_cannot_be_removed_in_a_namespace_with_a_default_queue() -> None:
    new, old = job(queue=None, suspend=True), job(queue="lq", suspend=True)
    assert needs_default_queue_lookup_on_update(new, old)
    (error,) = validate_job_update(new, old, default_queue_exists=True)
    assert str(error) == (
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "": '
        "queue-name must not be empty in namespace with default queue"
    )
    assert validate_job_update(new, old, default_queue_exists=False) == []
    assert not needs_default_queue_lookup_on_update(old, old)


def test_changing_the_queue_name_of_a_running_job_is_refused() -> None:
    (error,) = validate_job_update(job(queue="other"), job(queue="lq"))
    assert str(error) == (
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "other": field is immutable'
    )
