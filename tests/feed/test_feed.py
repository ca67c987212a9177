"""One feed from API objects to the engine: the controller, `simulate` and `explain` build the same
engine from the same objects (hierarchical cohorts, a broken ClusterQueue, admitted and waiting
Workloads)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from reconciler.api import ClusterQueue, Cohort, LocalQueue, Namespace, ResourceFlavor, Workload
from reconciler.api.resources import (
    CLUSTER_QUEUES,
    COHORTS,
    LOCAL_QUEUES,
    NAMESPACES,
    RESOURCE_FLAVORS,
    WORKLOADS,
    Resource,
)
from reconciler.core.engine import Engine
from reconciler.explain.quota import fed_engine
from reconciler.explain.state import ClusterState, Target
from reconciler.feed import QueueObjects, feed_queue_objects
from reconciler.simulate import InputObject, SimulationError, prepare
from tests.support.builders import cluster_queue_body
from tests.support.engine_state import engine_state
from tests.support.reconciler_harness import Harness

GPU = "nvidia.com/gpu"
KUEUE = "kueue.x-k8s.io/v1beta2"
MAPPINGS = {"gpu.nvidia.com": GPU}
Obj = dict[str, Any]


def _quota(gpus: int) -> list[Obj]:
    return [
        {
            "coveredResources": [GPU],
            "flavors": [{"name": "t4", "resources": [{"name": GPU, "nominalQuota": gpus}]}],
        }
    ]


def _workload(name: str, namespace: str, gpus: int, admitted_to: str | None = None) -> Obj:
    container = {"name": "main", "image": "busybox", "resources": {"requests": {GPU: str(gpus)}}}
    body: Obj = {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "generation": 1,
            "resourceVersion": "10",
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {
            "queueName": "lq",
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}],
        },
    }
    if admitted_to is not None:
        assignment = {"name": "main", "count": 1, "flavors": {GPU: "t4"}, "resourceUsage": {GPU: str(gpus)}}
        at = "2026-01-01T00:00:01Z"
        body["status"] = {
            "admission": {"clusterQueue": admitted_to, "podSetAssignments": [assignment]},
            "conditions": [
                {"type": t, "status": "True", "reason": r, "message": "", "lastTransitionTime": at}
                for t, r in (("QuotaReserved", "QuotaReserved"), ("Admitted", "Admitted"))
            ],
        }
    return body


def objects(broken: bool = False) -> list[Obj]:
    """Two teams under a Cohort tree (org with quota of its own, research below it), flavors,
    queues, one admitted Workload and two waiting ones; with `broken`, a ClusterQueue whose
    quota cannot be read."""
    docs: list[Obj] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {"team": ns}}}
        for ns in ("team-a", "team-b")
    ]
    docs.append({"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "t4"}, "spec": {}})
    docs.append(
        {
            "apiVersion": KUEUE,
            "kind": "Cohort",
            "metadata": {"name": "org"},
            "spec": {"resourceGroups": _quota(2)},
        }
    )
    docs.append(
        {
            "apiVersion": KUEUE,
            "kind": "Cohort",
            "metadata": {"name": "research"},
            "spec": {"parentName": "org"},
        }
    )
    docs.append(cluster_queue_body("cq-a", [("t4", {GPU: 1})], cohort="research"))
    docs.append(cluster_queue_body("cq-b", [("t4", {GPU: 1})], cohort="org"))
    if broken:
        docs.append(cluster_queue_body("cq-broken", [("t4", {GPU: "lots"})], cohort="org"))
    for ns, cq in (("team-a", "cq-a"), ("team-b", "cq-b")):
        docs.append(
            {
                "apiVersion": KUEUE,
                "kind": "LocalQueue",
                "metadata": {"name": "lq", "namespace": ns},
                "spec": {"clusterQueue": cq},
            }
        )
    docs.append(_workload("running", "team-a", 1, admitted_to="cq-a"))
    docs.append(_workload("waiting", "team-a", 2))
    docs.append(_workload("other", "team-b", 1))
    return docs


def _decode(body: Obj, kind: type[Any]) -> Any:
    return msgspec.json.decode(msgspec.json.encode(body), type=kind)


KINDS: dict[str, tuple[Resource, type[Any]]] = {
    "Namespace": (NAMESPACES, Namespace),
    "ResourceFlavor": (RESOURCE_FLAVORS, ResourceFlavor),
    "Cohort": (COHORTS, Cohort),
    "ClusterQueue": (CLUSTER_QUEUES, ClusterQueue),
    "LocalQueue": (LOCAL_QUEUES, LocalQueue),
    "Workload": (WORKLOADS, Workload),
}


def through_runtime(docs: list[Obj]) -> Engine:
    """The controller's reconciler fed by watch events; synced, before any scheduling cycle."""
    h = Harness()
    for doc in docs:
        resource, kind = KINDS[doc["kind"]]
        h.event("ADDED", resource, _decode(doc, kind))
    h.sync_all()
    return h.reconciler.ctx.engine


def through_simulate(docs: list[Obj]) -> Engine:
    """`reconciler simulate`'s input fed; the waiting workloads queued, as each arrives."""
    prepared = prepare([InputObject(f"#{i}", d) for i, d in enumerate(docs)], MAPPINGS)
    engine = prepared.collected.engine
    for info in prepared.waiting:
        engine.add_workload(info)
    return engine


def _state(docs: list[Obj]) -> ClusterState:
    def of(kind: str) -> list[Any]:
        return [_decode(d, KINDS[kind][1]) for d in docs if d["kind"] == kind]

    return ClusterState(
        target=Target("workload", "team-a", "waiting"),
        now="2026-01-01T00:00:30Z",
        workloads=of("Workload"),
        cluster_queues=of("ClusterQueue"),
        cohorts=of("Cohort"),
        local_queues=of("LocalQueue"),
        flavors=of("ResourceFlavor"),
        namespaces=of("Namespace"),
        mappings=MAPPINGS,
    )


def through_explain(docs: list[Obj]) -> Engine:
    """`reconciler explain`'s live state fed, before its one cycle."""
    state = _state(docs)
    target = next(w for w in state.workloads if w.metadata.name == "waiting")
    engine, _ = fed_engine(state, target, MAPPINGS)
    return engine


def test_runtime_simulate_and_explain_feed_the_same_engine() -> None:
    docs = objects()
    runtime = engine_state(through_runtime(docs))
    # The fixture is not trivial: the cohort tree, the charge and the queued requests are there.
    assert runtime["cohort_models"]["research"].parent == "org"
    assert runtime["child_cohorts"] == {"org": {"research"}}
    assert runtime["cohort_members"] == {"research": {"cq-a"}, "org": {"cq-b"}}
    assert list(runtime["charges"]) == [("team-a", "running")]
    assert list(runtime["queued"]) == [("team-a", "waiting"), ("team-b", "other")]
    assert engine_state(through_simulate(docs)) == runtime
    assert engine_state(through_explain(docs)) == runtime


def test_a_broken_cluster_queue_is_set_aside_alike_and_simulate_refuses_it() -> None:
    docs = objects(broken=True)
    runtime = engine_state(through_runtime(docs))
    assert set(runtime["broken_cluster_queues"]) == {"cq-broken"}
    assert engine_state(through_explain(docs)) == runtime
    with pytest.raises(SimulationError, match=r"ClusterQueue cq-broken: .*lots"):
        through_simulate(docs)


def test_the_feed_reports_what_it_set_aside() -> None:
    docs = objects(broken=True)
    state = _state(docs)
    unreadable = [
        {
            "coveredResources": [GPU],
            "flavors": [{"name": "t4", "resources": [{"name": GPU, "nominalQuota": "x"}]}],
        }
    ]
    bad_cohort = _decode(
        {"metadata": {"name": "bad"}, "spec": {"parentName": "org", "resourceGroups": unreadable}}, Cohort
    )
    engine = Engine()
    broken = feed_queue_objects(
        engine,
        QueueObjects(state.flavors, state.cluster_queues, [*state.cohorts, bad_cohort], state.local_queues),
    )
    assert set(broken) == {"ClusterQueue cq-broken", "Cohort bad"}
    # The unusable Cohort keeps its place in the tree, lending nothing.
    assert engine.cache.cohort_models["bad"].parent == "org"
