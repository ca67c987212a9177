"""The visibility server over real TLS on loopback: the front proxy's certificate, then the answers
of a leader, of a leader still rebuilding and of a follower."""

from __future__ import annotations

import asyncio
from pathlib import Path

from reconciler.visibility.server import NOT_LEADING, NOT_READY, Published
from reconciler.visibility.summary import PendingEntry
from tests.support.visibility_server import serve_and_ask

BASE = "/apis/visibility.kueue.x-k8s.io/v1beta2"


class _Queues:
    def __init__(self, ready: bool = True) -> None:
        self.ready = ready
        self.cq = [
            PendingEntry("ns", "w1", "a", 5, "2026-12-07T10:00:00Z"),
            PendingEntry("ns", "w2", "b", 1, "2026-12-07T10:00:01Z"),
        ]

    def pending(self, cluster_queue: str) -> list[PendingEntry] | None:
        return self.cq if cluster_queue == "cq" else None

    def cluster_queue_of(self, namespace: str, local_queue: str) -> str | None:
        return "cq" if (namespace, local_queue) in {("ns", "a"), ("ns", "b")} else None


def test_the_leader_answers_pages_not_found_and_bad_parameters(tmp_path: Path) -> None:
    published = Published(source=_Queues())
    answers = asyncio.run(
        serve_and_ask(
            tmp_path,
            published,
            [
                ("alice", f"{BASE}/clusterqueues/cq/pendingworkloads"),
                ("alice", f"{BASE}/namespaces/ns/localqueues/b/pendingworkloads"),
                ("alice", f"{BASE}/clusterqueues/missing/pendingworkloads"),
                ("alice", f"{BASE}/namespaces/ns/localqueues/missing/pendingworkloads"),
                ("alice", f"{BASE}/clusterqueues/cq/pendingworkloads?limit=x"),
                ("nobody", f"{BASE}/clusterqueues/cq/pendingworkloads"),
            ],
        )
    )
    (ok, cq), (ok_lq, lq), (nf, missing), (nf_lq, _), (bad, bad_body), (denied, forbidden) = answers
    assert ok == ok_lq == 200
    assert [i["metadata"]["name"] for i in cq["items"]] == ["w1", "w2"]
    assert [(i["positionInClusterQueue"], i["positionInLocalQueue"]) for i in lq["items"]] == [(1, 0)]
    assert (nf, nf_lq) == (404, 404)
    assert missing["message"] == 'clusterqueue.visibility.kueue.x-k8s.io "missing" not found'
    assert (bad, bad_body["reason"]) == (400, "BadRequest")
    assert "limit" in bad_body["message"]
    assert (denied, forbidden["reason"]) == (403, "Forbidden")
    assert 'User "nobody" cannot get resource "clusterqueues/pendingworkloads"' in forbidden["message"]


def test_a_follower_and_a_leader_still_rebuilding_say_so_with_503(tmp_path: Path) -> None:
    path = f"{BASE}/clusterqueues/cq/pendingworkloads"
    follower = asyncio.run(serve_and_ask(tmp_path, Published(source=None), [("alice", path)]))
    rebuilding = asyncio.run(
        serve_and_ask(tmp_path, Published(source=_Queues(ready=False)), [("alice", path)])
    )
    assert [(s, b["reason"], b["message"]) for s, b in follower + rebuilding] == [
        (503, "ServiceUnavailable", NOT_LEADING),
        (503, "ServiceUnavailable", NOT_READY),
    ]
