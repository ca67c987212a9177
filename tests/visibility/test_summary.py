"""The visibility API's answers: positions, pages and the extra field, as Kueue v0.18.1 serves them."""

from __future__ import annotations

import pytest

from reconciler.visibility.summary import (
    DEFAULT_LIMIT,
    OwnerRef,
    Page,
    PageError,
    PendingEntry,
    cluster_queue_summary,
    local_queue_summary,
    parse_page,
)


def _entry(name: str, lq: str, priority: int = 0, namespace: str = "ns", reason: str = "") -> PendingEntry:
    return PendingEntry(namespace, name, lq, priority, "2026-12-07T10:00:00Z", reason=reason)


PENDING = [
    _entry("high", "b", 10),
    _entry("mid-1", "a", 5),
    _entry("mid-2", "a", 5),
    _entry("other-ns", "a", 3, namespace="ns2"),
    _entry("low", "a", 1),
]


def _rows(summary: dict[str, object]) -> list[tuple[str, int, int]]:
    items = summary["items"]
    assert isinstance(items, list)
    return [(i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"]) for i in items]


def test_cluster_queue_positions_count_from_zero_per_local_queue_name() -> None:
    summary = cluster_queue_summary(PENDING, Page(), "v1beta2")
    assert summary["kind"] == "PendingWorkloadsSummary"
    assert summary["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta2"
    # Kueue counts LocalQueue positions on the ClusterQueue's list by the LocalQueue's name alone.
    assert _rows(summary) == [
        ("high", 0, 0),
        ("mid-1", 1, 0),
        ("mid-2", 2, 1),
        ("other-ns", 3, 2),
        ("low", 4, 3),
    ]


def test_a_cluster_queue_page_keeps_the_positions_of_the_whole_list() -> None:
    summary = cluster_queue_summary(PENDING, Page(limit=2, offset=1), "v1beta1")
    assert summary["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta1"
    assert _rows(summary) == [("mid-1", 1, 0), ("mid-2", 2, 1)]


def test_a_local_queue_lists_its_members_of_its_namespace_in_cluster_queue_order() -> None:
    summary = local_queue_summary(PENDING, "ns", "a", Page(), "v1beta2")
    assert _rows(summary) == [("mid-1", 1, 0), ("mid-2", 2, 1), ("low", 4, 2)]
    page = local_queue_summary(PENDING, "ns", "a", Page(limit=1, offset=1), "v1beta2")
    assert _rows(page) == [("mid-2", 2, 1)]


def test_items_carry_priority_queue_metadata_and_the_reason_only_when_known() -> None:
    owner = OwnerRef("batch/v1", "Job", "j", "uid-1")
    told = PendingEntry("ns", "w", "a", 7, "2026-12-07T10:00:00Z", (owner,), "couldn't assign flavors")
    items = cluster_queue_summary([told, _entry("untold", "a")], Page(), "v1beta2")["items"]
    assert items[0]["priority"] == 7
    assert items[0]["localQueueName"] == "a"
    assert items[0]["metadata"] == {
        "name": "w",
        "namespace": "ns",
        "creationTimestamp": "2026-12-07T10:00:00Z",
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "uid-1"}],
    }
    assert items[0]["pendingReason"] == "couldn't assign flavors"
    assert "pendingReason" not in items[1]


def test_page_parameters_default_as_kueue_and_bad_ones_are_named() -> None:
    assert parse_page({}) == Page(limit=DEFAULT_LIMIT, offset=0)
    assert parse_page({"limit": "0", "offset": "3"}) == Page(limit=DEFAULT_LIMIT, offset=3)
    assert parse_page({"limit": "5"}) == Page(limit=5, offset=0)
    with pytest.raises(PageError, match="limit: 'x' is not an integer"):
        parse_page({"limit": "x"})
    with pytest.raises(PageError, match="offset: -1 is negative"):
        parse_page({"offset": "-1"})
