"""What follows a Workload's finish, when only the finish write's response has come back (its
watch event late): a job that carries a finalizer (a plain pod) lets go of it at once; a batch/v1
Job, which has no step left, is not reconciled again for it (its Workload's event still comes)."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.api.resources import JOBS, PODS
from reconciler.integrations.pods.pod import POD_FINALIZER
from reconciler.runtime.shared.actions import Action
from tests.support.memory_api import MemoryApi
from tests.support.memory_cluster import Cluster, condition
from tests.support.pod_queues import pod_cluster, queues
from tests.support.pods import pod_body, stored_pod


def perform_holding_events(
    api: MemoryApi, actions: list[Action], monkeypatch: pytest.MonkeyPatch
) -> list[Any]:
    """Perform the writes, answering each, but keep back the watch events of patched objects."""
    held: list[tuple[Any, ...]] = []
    with monkeypatch.context() as patched:
        patched.setattr(api, "_modified", lambda *args: held.append(args))
        for action in actions:
            api.perform(action)
    return held


def test_a_pods_finalizer_goes_on_the_finish_response_without_its_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    c = pod_cluster()
    queues(c, gpus=1)
    c.api.add(PODS, stored_pod(pod_body("p1")))
    c.settle()
    c.api.change(PODS, "ns", "p1", {"status": {"phase": "Succeeded", "message": "done"}})
    actions = c.take()
    assert "finish" in [a.purpose for a in actions]
    held = perform_holding_events(c.api, actions, monkeypatch)
    assert held  # the finished Workload's event has not come
    release = c.take()
    assert [a.purpose for a in release] == ["job-release"]
    for args in held:
        c.api._modified(*args)
    for action in release:
        c.api.perform(action)
    c.settle()
    assert POD_FINALIZER not in c.pod("p1")["metadata"].get("finalizers", [])


def test_a_finished_jobs_workload_is_not_followed_by_a_reconcile_with_nothing_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    c = Cluster()
    c.queues(gpus=1)
    c.submit("a")
    done = {"status": {"conditions": [{"type": "Complete", "status": "True", "message": "done"}]}}
    c.api.change(JOBS, "ns", "a", done)
    actions = c.take()
    assert "finish" in [a.purpose for a in actions]
    jobs = c.reconciler.job_kinds.by_kind["Job"]
    reconciled: list[tuple[str, str]] = []
    reconcile = jobs.reconcile

    def counting(key: tuple[str, str]) -> None:
        reconciled.append(key)
        reconcile(key)

    monkeypatch.setattr(jobs, "reconcile", counting)
    held = perform_holding_events(c.api, actions, monkeypatch)
    assert held
    assert reconciled == []  # the response alone: the Job has no step left
    assert c.take() == []
    for args in held:
        c.api._modified(*args)
    assert reconciled == [("ns", "a")]  # its Workload's event, as any Workload change
    assert c.settle() == []
    assert condition(c.workload("a"), "Finished") == ("True", "Succeeded", "done")
    assert c.used_gpus() == 0
