"""explain's count of a Job's ready pods: the pods seen, or the Job's own counts."""

from __future__ import annotations

from reconciler.api import Job, Pod
from reconciler.explain.pods import ready_or_succeeded
from tests.support.builders import decode, job_body


def pod(name: str, *, phase: str, ready: bool = False) -> Pod:
    conditions = [{"type": "Ready", "status": "True"}] if ready else []
    body = {
        "metadata": {"name": name, "namespace": "ns"},
        "status": {"phase": phase, "conditions": conditions},
    }
    result: Pod = decode(body, Pod)
    return result


def test_ready_counts_ready_running_and_succeeded_pods_or_the_jobs_counts() -> None:
    pods = [pod("p1", phase="Running", ready=True), pod("p2", phase="Succeeded"), pod("p3", phase="Running")]
    assert ready_or_succeeded(pods, None) == 2
    finished: Job = decode({**job_body("a"), "status": {"succeeded": 3, "ready": 1}}, Job)
    assert ready_or_succeeded(pods, finished) == 4
