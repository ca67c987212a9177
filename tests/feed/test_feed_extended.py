"""Extended resources backed by DRA in the controller, `simulate` and `explain`: one fixture charged
alike by all three; the controller watches DeviceClasses for it and charges a waiting Workload again
when the class serving its extended resource appears or goes."""

from __future__ import annotations

from typing import Any

from reconciler.api import ClusterQueue, DeviceClass, LocalQueue, Namespace, ResourceFlavor, Workload
from reconciler.api.resources import (
    CLUSTER_QUEUES,
    DEVICE_CLASSES,
    LOCAL_QUEUES,
    NAMESPACES,
    RESOURCE_FLAVORS,
    WORKLOADS,
    Resource,
)
from reconciler.config import Configuration, parse_config
from reconciler.core.engine import Engine
from reconciler.explain.quota import fed_engine
from reconciler.explain.state import ClusterState, Target
from reconciler.runtime.loop.snapshot import device_class_samples
from reconciler.simulate import InputObject, prepare
from tests.support.builders import cluster_queue_body
from tests.support.engine_state import engine_state
from tests.support.reconciler_harness import Harness, decode

KUEUE = "kueue.x-k8s.io/v1beta2"
EXTENDED = "nvidia.com/gpu"
GPU = "example.com/gpu"
CLASS = "gpu.example.com"
MAPPINGS = {CLASS: GPU}
Obj = dict[str, Any]


def config(gate: bool) -> Configuration:
    return parse_config(
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "featureGates": {"KueueDRAIntegrationExtendedResource": gate},
            "resources": {"deviceClassMappings": [{"name": GPU, "deviceClassNames": [CLASS]}]},
        }
    )


def device_class() -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": CLASS, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"extendedResourceName": EXTENDED},
    }


def workload(name: str, gpus: int, count: int) -> Obj:
    container = {"name": "main", "image": "busybox", "resources": {"limits": {EXTENDED: str(gpus)}}}
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "generation": 1,
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {
            "queueName": "lq",
            "podSets": [{"name": "main", "count": count, "template": {"spec": {"containers": [container]}}}],
        },
    }


def objects() -> list[Obj]:
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}},
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "t4"}, "spec": {}},
        cluster_queue_body("cq", [("t4", {GPU: 4, EXTENDED: 4})]),  # too little: it waits
        {
            "apiVersion": KUEUE,
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": "ns"},
            "spec": {"clusterQueue": "cq"},
        },
        device_class(),
        workload("waiting", 2, 3),
    ]


KINDS: dict[str, tuple[Resource, type[Any]]] = {
    "Namespace": (NAMESPACES, Namespace),
    "ResourceFlavor": (RESOURCE_FLAVORS, ResourceFlavor),
    "ClusterQueue": (CLUSTER_QUEUES, ClusterQueue),
    "LocalQueue": (LOCAL_QUEUES, LocalQueue),
    "DeviceClass": (DEVICE_CLASSES, DeviceClass),
    "Workload": (WORKLOADS, Workload),
}


def runtime(docs: list[Obj], gate: bool = True) -> Harness:
    h = Harness(config(gate))
    for doc in docs:
        resource, kind = KINDS[doc["kind"]]
        if resource in h.reconciler.watched:
            h.event("ADDED", resource, decode(doc, kind))
    h.sync_all()
    return h


def through_simulate(docs: list[Obj], gate: bool = True) -> Engine:
    inputs = [InputObject(f"#{i}", d) for i, d in enumerate(docs)]
    prepared = prepare(inputs, MAPPINGS, extended_resources=gate)
    engine = prepared.collected.engine
    for info in prepared.waiting:
        engine.add_workload(info)
    return engine


def through_explain(docs: list[Obj], gate: bool = True) -> Engine:
    def of(kind: str) -> list[Any]:
        return [decode(d, KINDS[kind][1]) for d in docs if d["kind"] == kind]

    state = ClusterState(
        target=Target("workload", "ns", "waiting"),
        now="2026-01-01T00:00:30Z",
        workloads=of("Workload"),
        cluster_queues=of("ClusterQueue"),
        local_queues=of("LocalQueue"),
        flavors=of("ResourceFlavor"),
        namespaces=of("Namespace"),
        device_classes=of("DeviceClass"),
        mappings=MAPPINGS,
        extended_resources=gate,
    )
    engine, _ = fed_engine(state, state.workloads[0], MAPPINGS)
    return engine


def queued(engine: Engine) -> dict[str, int]:
    info = engine.queues.workloads[("ns", "waiting")]
    return info.pod_sets[0].total()


def test_the_controller_simulate_and_explain_charge_the_extended_resource_alike() -> None:
    docs = objects()
    h = runtime(docs)
    engine = h.reconciler.ctx.engine
    assert queued(engine) == {GPU: 6}  # 3 pods x 2 devices of the class, as its mapped resource
    state = engine_state(engine)
    assert engine_state(through_simulate(docs)) == state
    assert engine_state(through_explain(docs)) == state
    samples = {s.device_class: s for s in device_class_samples(h.reconciler)}
    assert (samples[CLASS].pending_devices, samples[CLASS].pending_claims) == (6, 3)


def test_with_the_gate_off_all_three_charge_it_as_it_is_and_device_classes_are_not_watched() -> None:
    docs = objects()
    h = runtime(docs, gate=False)
    assert DEVICE_CLASSES not in h.reconciler.watched
    engine = h.reconciler.ctx.engine
    assert queued(engine) == {EXTENDED: 6}
    assert engine_state(through_simulate(docs, gate=False)) == engine_state(engine)
    assert engine_state(through_explain(docs, gate=False)) == engine_state(engine)


def test_a_device_class_that_appears_or_goes_charges_the_waiting_workload_again() -> None:
    docs = [d for d in objects() if d["kind"] != "DeviceClass"]
    h = runtime(docs)
    assert DEVICE_CLASSES in h.reconciler.watched
    engine = h.reconciler.ctx.engine
    assert queued(engine) == {EXTENDED: 6}  # no class serves it yet: a plain extended resource
    dc = decode(device_class(), DeviceClass)
    h.event("ADDED", DEVICE_CLASSES, dc)
    h.take()
    assert queued(engine) == {GPU: 6}
    h.event("DELETED", DEVICE_CLASSES, dc)
    h.take()
    assert queued(engine) == {EXTENDED: 6}
