"""waitForPodsReady per group of a LeaderWorkerSet, as Kueue v0.18.1 does it through its pod
groups: each group's Workload is PodsReady from its own pods only; a group past its timeout is
evicted alone, its running pods stopped as Kueue stops a pod group (`TerminationTarget=True`
with `WorkloadEvictedDueToPodsReadyTimeout` and the eviction's message, then deleted, an Event
`Stopped` on each pod, none on the set), requeued after the backoff and, once the LWS controller
has made its pods again, admitted and ungated again."""

from __future__ import annotations

from typing import Any

import msgspec

from reconciler.api.resources import PODS
from reconciler.config import parse_config
from reconciler.integrations.pods.pod import ADMISSION_GATE, TOPOLOGY_GATE
from reconciler.runtime.shared.actions import Action, Delete, MergePatch
from tests.support.memory_cluster import GPU, T0, Cluster
from tests.support.pod_queues import condition, gates, queues

CONFIG = parse_config(
    {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "waitForPodsReady": {"timeout": "60s", "requeuingStrategy": {"backoffBaseSeconds": 10}},
        "integrations": {"frameworks": ["batch/job", "leaderworkerset.x-k8s.io/leaderworkerset"]},
        "resources": {"deviceClassMappings": [{"name": GPU, "deviceClassNames": ["gpu.nvidia.com"]}]},
    }
)
READY = {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
RUNNING = {"status": {"phase": "Running"}}


def _state(workload: dict[str, Any] | None, kind: str) -> tuple[str, str] | None:
    assert workload is not None
    found = condition(workload, kind)
    return None if found is None else (found["status"], found["reason"])


def _terminations(performed: list[Action]) -> dict[str, dict[str, Any]]:
    """The TerminationTarget condition each pod was marked with, by pod name."""
    marked = {}
    for action in performed:
        if isinstance(action, MergePatch) and action.purpose == "job-terminate":
            assert action.subresource == "status"
            conditions = msgspec.json.decode(action.patch)["status"]["conditions"]
            (target,) = [c for c in conditions if c["type"] == "TerminationTarget"]
            marked[action.name] = target
    return marked


def test_a_group_past_its_timeout_is_evicted_alone_its_pods_stopped_as_kueues_then_admitted_again() -> None:
    c = Cluster(CONFIG, finalizers=True)
    queues(c, gpus=4)
    lws = c.add_set("a", replicas=2)
    c.settle()
    for name in ("a-0", "a-0-1", "a-1"):
        c.api.change(PODS, "ns", name, READY)
    c.api.change(PODS, "ns", "a-1-1", RUNNING)  # running, never ready
    c.settle()
    # Each group is PodsReady from its own pods.
    assert _state(c.group_workload(lws, 0), "PodsReady") == ("True", "Started")
    assert _state(c.group_workload(lws, 1), "PodsReady") == ("False", "WaitForStart")
    second = c.group_workload(lws, 1)
    assert second is not None
    name = second["metadata"]["name"]

    performed = c.tick(T0 + 61)
    message = f"Exceeded the PodsReady timeout ns/{name}"
    assert _state(c.group_workload(lws, 1), "Evicted") == ("True", "PodsReadyTimeout")
    assert _state(c.group_workload(lws, 0), "Evicted") is None  # the ready group runs on
    # Kueue's Stop of a pod group: each running pod marked, then deleted, an Event on each.
    marked = _terminations(performed)
    assert sorted(marked) == ["a-1", "a-1-1"]
    for target in marked.values():
        assert (target["status"], target["reason"], target["message"]) == (
            "True",
            "WorkloadEvictedDueToPodsReadyTimeout",
            message,
        )
    deleted = sorted(a.name for a in performed if isinstance(a, Delete) and a.purpose == "job-delete")
    assert deleted == ["a-1", "a-1-1"]
    stopped = [
        (e["involvedObject"]["name"], e["message"])
        for e in c.api.events
        if e["reason"] == "Stopped" and e["involvedObject"]["kind"] == "Pod"
    ]
    assert sorted(stopped) == [("a-1", message), ("a-1-1", message)]
    assert "Stopped" not in c.api.reasons("LeaderWorkerSet", "a")  # Kueue's are on the pods
    assert ("pods", "ns", "a-0") in c.api.objects
    assert c.used_gpus() == 2  # the evicted group's quota returned once its pods went
    requeue = c.group_workload(lws, 1)
    assert requeue is not None
    assert requeue["status"]["requeueState"] == {"count": 1, "requeueAt": "2026-01-01T00:01:11Z"}

    # The LWS controller makes the group again: gated until the backoff is over, then admitted.
    c.add_group(lws, 1)
    c.settle()
    assert gates(c.pod("a-1")) == [ADMISSION_GATE, TOPOLOGY_GATE]
    c.tick(T0 + 72)
    assert _state(c.group_workload(lws, 1), "Admitted") == ("True", "Admitted")
    assert gates(c.pod("a-1")) == []
    assert gates(c.pod("a-1-1")) == []
    assert c.used_gpus() == 4
    for pod in ("a-1", "a-1-1"):
        c.api.change(PODS, "ns", pod, READY)
    c.settle()
    assert _state(c.group_workload(lws, 1), "PodsReady") == ("True", "Started")
