"""The visibility API's answers, pure: pending workloads in, ``PendingWorkloadsSummary`` documents out.

As Kueue v0.18.1 serves them (``pkg/visibility/storage``), in both versions it serves (v1beta2 and
v1beta1, the same shape): a ClusterQueue's pending workloads in its queue order, each with its
position in the ClusterQueue and in its LocalQueue (both from 0), its priority, its LocalQueue's
name and the metadata Kueue copies (name, namespace, creation timestamp, owner references). A
LocalQueue's list is its members of its ClusterQueue's list, in that order. ``limit`` (1000 when
absent or 0) and ``offset`` (0) page both lists.

Kueue counts positions in a LocalQueue, on the ClusterQueue's list, by LocalQueue name alone
(two namespaces' LocalQueues of one name share a count there); this does the same.

Beyond Kueue, each item may carry ``pendingReason``: the message of the Workload's QuotaReserved
condition (why it waits), and either ``draQuotaEstimatedStart`` (when it is expected to start, RFC
3339; core.scheduling.wait_estimate) or ``draQuotaNoEstimate`` (why there is no estimate): fields
Kueue's clients ignore, the last two under the project's prefix so no Kueue field can clash.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_LIMIT",
    "GROUP",
    "VERSIONS",
    "OwnerRef",
    "Page",
    "PageError",
    "PendingEntry",
    "cluster_queue_summary",
    "local_queue_summary",
    "parse_page",
]

GROUP = "visibility.kueue.x-k8s.io"
# Kueue's prioritized versions: the first is preferred.
VERSIONS = ("v1beta2", "v1beta1")
DEFAULT_LIMIT = 1000  # Kueue's constants.DefaultPendingWorkloadsLimit


@dataclass(frozen=True, slots=True)
class OwnerRef:
    api_version: str
    kind: str
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class PendingEntry:
    """One pending workload, as the queue manager and the latest Workload object know it."""

    namespace: str
    name: str
    local_queue: str
    priority: int
    created: str | None  # the Workload's metadata.creationTimestamp
    owners: tuple[OwnerRef, ...] = ()
    reason: str = ""  # its QuotaReserved condition's message, when it has one
    estimated_start: str | None = None  # RFC 3339, when an estimate was made
    no_estimate: str = ""  # why there is none


@dataclass(frozen=True, slots=True)
class Page:
    limit: int = DEFAULT_LIMIT
    offset: int = 0


class PageError(ValueError):
    """A query parameter that is not a number this API takes (the message names it)."""


def _number(query: Mapping[str, str], name: str) -> int:
    text = query.get(name, "").strip()
    if not text:
        return 0
    try:
        value = int(text)
    except ValueError:
        raise PageError(f"{name}: {text!r} is not an integer; give {name}=N with N >= 0") from None
    if value < 0:
        raise PageError(f"{name}: {value} is negative; give {name}=N with N >= 0")
    return value


def parse_page(query: Mapping[str, str]) -> Page:
    """``limit`` and ``offset`` from a query string's parameters, with Kueue's defaults."""
    limit = _number(query, "limit")
    return Page(limit=limit or DEFAULT_LIMIT, offset=_number(query, "offset"))


def _item(entry: PendingEntry, in_cluster_queue: int, in_local_queue: int) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": entry.name,
        "namespace": entry.namespace,
        "creationTimestamp": entry.created,
    }
    if entry.owners:
        metadata["ownerReferences"] = [
            {"apiVersion": o.api_version, "kind": o.kind, "name": o.name, "uid": o.uid} for o in entry.owners
        ]
    item: dict[str, Any] = {
        "metadata": metadata,
        "priority": entry.priority,
        "localQueueName": entry.local_queue,
        "positionInClusterQueue": in_cluster_queue,
        "positionInLocalQueue": in_local_queue,
    }
    if entry.reason:
        item["pendingReason"] = entry.reason
    if entry.estimated_start is not None:
        item["draQuotaEstimatedStart"] = entry.estimated_start
    elif entry.no_estimate:
        item["draQuotaNoEstimate"] = entry.no_estimate
    return item


def _summary(version: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "kind": "PendingWorkloadsSummary",
        "apiVersion": f"{GROUP}/{version}",
        "metadata": {"creationTimestamp": None},
        "items": items,
    }


def cluster_queue_summary(pending: Sequence[PendingEntry], page: Page, version: str) -> dict[str, Any]:
    """A ClusterQueue's page of pending workloads (``pending`` in its queue order)."""
    items = []
    counts: dict[str, int] = {}
    for index, entry in enumerate(pending[: page.offset + page.limit]):
        in_local_queue = counts.get(entry.local_queue, 0)
        counts[entry.local_queue] = in_local_queue + 1
        if index >= page.offset:
            items.append(_item(entry, index, in_local_queue))
    return _summary(version, items)


def local_queue_summary(
    pending: Sequence[PendingEntry], namespace: str, local_queue: str, page: Page, version: str
) -> dict[str, Any]:
    """A LocalQueue's page: its members of its ClusterQueue's ``pending``, in that order."""
    members = [
        (index, entry)
        for index, entry in enumerate(pending)
        if entry.namespace == namespace and entry.local_queue == local_queue
    ]
    chosen = members[page.offset : page.offset + page.limit]
    items = [_item(entry, index, page.offset + n) for n, (index, entry) in enumerate(chosen)]
    return _summary(version, items)
