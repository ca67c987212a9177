"""waitForPodsReady per group of a LeaderWorkerSet on the test-bed, with the real LeaderWorkerSet
controller (v0.8.0) and this controller run with a short PodsReady timeout (10 s, requeue
backoff from 2 s).

A group whose worker never becomes Ready (the node simulator's stall annotation) is admitted
and ungated; after the timeout its Workload is evicted (`PodsReadyTimeout`, Kueue's message),
its running pods are stopped as Kueue stops a pod group (deleted, an Event `Stopped` on each
with the eviction's message); the LWS controller makes the group again, held at the gate; after
the backoff the Workload is admitted again and the new pods are ungated and run.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from e2e.support.lws import LWS_API
from e2e.support.lws_cases import (
    GATE,
    Obj,
    group_pods,
    leader_worker_set,
    lws_manager,
    pod_template,
    served,
)
from e2e.support.served import Served, start_controller, stop_controller, workload_where
from e2e.support.workloads import KUEUE
from e2e.testbed import KubeClient, Testbed, api_path
from e2e.testbed.names import STALL_ANNOTATION
from e2e.testbed.scenario import status_condition, wait_for
from reconciler.core.model.workloads import workload_name_for_job

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(300)]

__all__ = ["lws_manager", "served"]  # the LWS module's fixtures, used here with this controller


@pytest.fixture(scope="module")
def controller(
    testbed: Testbed, lws_manager: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """`reconciler run` with the LWS framework and a 10 s PodsReady timeout."""
    ready = {"timeout": "10s", "requeuingStrategy": {"backoffBaseSeconds": 2, "backoffMaxSeconds": 4}}
    served = start_controller(
        testbed.kubeconfig,
        tmp_path_factory.mktemp("controller-lws-ready"),
        ["leaderworkerset.x-k8s.io/leaderworkerset"],
        extra={"waitForPodsReady": ready},
    )
    yield served
    stop_controller(served)


def _uids(pods: list[Obj]) -> set[str]:
    return {p["metadata"]["uid"] for p in pods}


@pytest.mark.asyncio
async def test_a_group_never_ready_is_evicted_stopped_and_admitted_again_after_the_backoff(
    kube: KubeClient, served: str
) -> None:
    namespace = served
    body = leader_worker_set("stalled", namespace)
    worker = pod_template(gpu=False)
    worker["metadata"]["annotations"][STALL_ANNOTATION] = "true"  # runs, never Ready
    body["spec"]["leaderWorkerTemplate"]["workerTemplate"] = worker
    created = await kube.create(api_path(LWS_API, "leaderworkersets", namespace), body)
    name = workload_name_for_job(
        "stalled-0", created["metadata"]["uid"], "LeaderWorkerSet", "leaderworkerset.x-k8s.io"
    )
    admitted = await workload_where(kube, namespace, name, "Admitted", "True")
    assert status_condition(admitted, "PodsReady").get("status") != "True"

    async def ungated() -> list[Obj] | None:
        pods = await group_pods(kube, namespace, "stalled")
        free = [p for p in pods if not p["spec"].get("schedulingGates")]
        return pods if len(free) == 2 else None

    first = await wait_for("the group's pods to be ungated", ungated, within=60, interval=0.3)

    evicted = await workload_where(kube, namespace, name, "Evicted", "True")
    eviction = status_condition(evicted, "Evicted")
    message = f"Exceeded the PodsReady timeout {namespace}/{name}"
    assert (eviction["reason"], eviction["message"]) == ("PodsReadyTimeout", message)

    async def stopped() -> list[tuple[str, str]] | None:
        events = (await kube.get(api_path("v1", "events", namespace)))["items"]
        found = sorted(
            (e["involvedObject"]["name"], e["message"])
            for e in events
            if e["reason"] == "Stopped" and e["involvedObject"]["kind"] == "Pod"
        )
        return found if len(found) >= 2 else None

    events = await wait_for("an Event Stopped on each pod of the group", stopped, within=60, interval=0.5)
    assert events[:2] == [("stalled-0", message), ("stalled-0-1", message)]

    # Made again by the LWS controller, admitted again after the backoff, ungated again.
    async def again() -> list[Obj] | None:
        pods = await group_pods(kube, namespace, "stalled")
        fresh = [p for p in pods if p["metadata"]["uid"] not in _uids(first)]
        free = [p for p in fresh if GATE not in [g["name"] for g in p["spec"].get("schedulingGates") or []]]
        return fresh if len(free) == 2 else None

    await wait_for("the group made again and ungated on its readmission", again, within=120, interval=0.5)
    workload = await kube.get(api_path(KUEUE, "workloads", namespace, name))
    assert workload["status"]["requeueState"]["count"] >= 1
    requeued = status_condition(workload, "Requeued")
    assert requeued.get("status") == "True" or requeued.get("reason") == "PodsReadyTimeout"
    await kube.delete(api_path(LWS_API, "leaderworkersets", namespace, "stalled"))
