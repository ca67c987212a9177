"""The pod index finds a pod's job by its controller reference, of the kinds enabled."""

from __future__ import annotations

import msgspec

from reconciler.api import Pod
from reconciler.runtime.shared.podindex import PodIndex


def owned(name: str, kind: str, owner: str, *, controller: bool = True) -> Pod:
    ref = {"apiVersion": "example.com/v1", "kind": kind, "name": owner, "uid": "u", "controller": controller}
    body = {"metadata": {"name": name, "namespace": "ns", "ownerReferences": [ref]}}
    pod: Pod = msgspec.json.decode(msgspec.json.encode(body), type=Pod)
    return pod


def test_a_pod_of_an_enabled_kind_is_its_jobs_and_others_are_nobodys() -> None:
    index = PodIndex(kinds=frozenset({"Job", "TrainingRun"}))
    assert index.on_pod_ref(("ns", "p1"), owned("p1", "TrainingRun", "r")) == ("TrainingRun", "ns", "r")
    assert index.on_pod_ref(("ns", "p2"), owned("p2", "Job", "r")) == ("Job", "ns", "r")
    assert index.on_pod_ref(("ns", "p3"), owned("p3", "ReplicaSet", "r")) is None
    assert index.on_pod_ref(("ns", "p4"), owned("p4", "TrainingRun", "r", controller=False)) is None
    # One name, two kinds: two jobs.
    assert [p.metadata.name for p in index.pods_of(("ns", "r"), "TrainingRun")] == ["p1"]
    assert [p.metadata.name for p in index.pods_of(("ns", "r"), "Job")] == ["p2"]


def test_a_pod_is_nobodys_until_the_enabled_kinds_are_set() -> None:
    index = PodIndex()
    assert index.on_pod_ref(("ns", "p1"), owned("p1", "TrainingRun", "r")) is None
    assert index.on_pod_ref(("ns", "p2"), owned("p2", "Job", "a")) is None
    index.kinds = frozenset({"Job"})
    assert index.on_pod(("ns", "p3"), owned("p3", "Job", "a")) == ("ns", "a")
