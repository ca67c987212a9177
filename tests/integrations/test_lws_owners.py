"""A LeaderWorkerSet group's Workload is owned by every pod of the group too, as Kueue v0.18.1's
pod-group rule makes it (the conformance recording lws-two-groups: `OwnerReferencesAdded`,
"Added N owner reference(s)" on each group's Workload, admitted or waiting)."""

from __future__ import annotations

from reconciler.api.resources import LEADERWORKERSETS, PODS
from tests.support.lws import group_pods, lws_body, stored_lws
from tests.support.lws_cluster import lws_cluster
from tests.support.pod_queues import queues


def _owners(workload: dict[str, object] | None) -> list[tuple[str, str]]:
    assert workload is not None
    refs = workload["metadata"]["ownerReferences"]  # type: ignore[index]
    return [(r["kind"], r["name"]) for r in refs]


def _added(message: str) -> int:
    return int(message.removeprefix("Added ").removesuffix(" owner reference(s)"))


def test_each_groups_pods_own_its_workload_admitted_or_waiting() -> None:
    c = lws_cluster()
    queues(c, gpus=2)
    lws = c.add_set("a", replicas=2)  # two groups; quota for one
    c.settle()
    for index in (0, 1):
        workload = c.group_workload(lws, index)
        assert _owners(workload) == [
            ("LeaderWorkerSet", "a"),
            ("Pod", f"a-{index}"),
            ("Pod", f"a-{index}-1"),
        ]
        assert workload is not None
        name = workload["metadata"]["name"]
        messages = [
            e["message"]
            for e in c.api.events
            if e["involvedObject"]["name"] == name and e["reason"] == "OwnerReferencesAdded"
        ]
        assert sum(_added(m) for m in messages) == 2  # each pod once, in as many writes as they came
    uids = {r["uid"] for r in c.group_workload(lws, 0)["metadata"]["ownerReferences"]}  # type: ignore[index]
    assert c.pod("a-0")["metadata"]["uid"] in uids


def test_pods_that_come_later_are_added_each_time_in_one_write() -> None:
    """The group's pods come after its Workload (the LWS controller makes them): added as they
    come; a worker recreated later (a new uid) is added in a write of its own."""
    c = lws_cluster()
    queues(c, gpus=2)
    lws = stored_lws(lws_body("a"))
    c.api.add(LEADERWORKERSETS, lws)
    c.settle()
    assert _owners(c.group_workload(lws, 0)) == [("LeaderWorkerSet", "a")]  # no pod yet
    c.add_group(lws, 0)
    c.settle()
    assert _owners(c.group_workload(lws, 0)) == [("LeaderWorkerSet", "a"), ("Pod", "a-0"), ("Pod", "a-0-1")]
    c.api.delete(PODS, "ns", "a-0-1")
    c.api.add(PODS, group_pods(lws, 0)[1])  # the same name, a new uid
    c.settle()
    owners = c.group_workload(lws, 0)["metadata"]["ownerReferences"]  # type: ignore[index]
    assert [(r["name"]) for r in owners] == ["a", "a-0", "a-0-1", "a-0-1"]  # the old one stays, as Kueue's
    assert len({r["uid"] for r in owners}) == 4
    messages = [e["message"] for e in c.api.events if e["reason"] == "OwnerReferencesAdded"]
    # As many writes as the pods' arrival allows (Kueue's too: "Added 3", or "Added 1" then "Added 2"),
    # each saying how many it added; the recreated worker's last, alone.
    added = [_added(m) for m in messages]
    assert sum(added) == 3
    assert added[-1] == 1


def test_a_pod_becomes_an_owner_only_once_it_carries_its_pod_group_name() -> None:
    """As Kueue finds a group's members by their pod-group-name label: the pods' labels are
    written first; the owners' write follows their answer."""
    c = lws_cluster()
    queues(c, gpus=2)
    lws = stored_lws(lws_body("a"))
    c.api.add(LEADERWORKERSETS, lws)
    c.settle()
    c.add_group(lws, 0)
    first = c.take()  # the reconciler's writes on the pods' arrival, none performed yet
    purposes = [getattr(a, "purpose", None) for a in first]
    assert purposes.count("pod-group-labels") == 2
    assert "workload-owners" not in purposes
    for action in first:
        c.api.perform(action)
    c.settle()
    assert _owners(c.group_workload(lws, 0)) == [("LeaderWorkerSet", "a"), ("Pod", "a-0"), ("Pod", "a-0-1")]
