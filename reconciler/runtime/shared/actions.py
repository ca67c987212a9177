"""Writes the reconciler asks for, as plain data, how each is performed, and its outcome.

An action names its *slot*: at most one write per slot is in flight, and a
newer action for a busy slot replaces the one waiting behind it, so a burst
of status changes for one object becomes at most two writes. An action carries
its own completion handler: the writer's `WriteDone` comes back through the
inbox and the reconciler hands it to `on_done`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from reconciler.api.resources import Resource
from reconciler.kube import KubeClient, KubeError

__all__ = ["Action", "Create", "Delete", "MergePatch", "OnDone", "PostEvent", "Purpose", "Slot", "WriteDone"]

Slot = tuple[str, str, str] | None  # (purpose, namespace, name); None: never coalesced
Purpose = Literal[
    "create-workload",
    "admit",
    "workload-status",
    "waiting-for-start",
    "finish",
    "release-finalizer",
    "evict",
    "requeue",
    "pods-ready",
    "deactivate",
    "max-exec",
    "reclaimable-pods",
    "workload-priority",
    "workload-annotate",
    "workload-update",
    "workload-owners",
    "group-condition",
    "delete-workload",
    "job-start",
    "job-suspend",
    "job-restore",
    "job-clear-start",
    "job-release",
    "job-delete",
    "job-terminate",
    "pod-group-labels",
    "pod-ungate",
    "cq-status",
    "cohort-status",
    "lq-status",
    "cq-finalizer",
    "flavor-finalizer",
    "event",
    "event-series",
]


@dataclass(frozen=True, slots=True)
class Create:
    purpose: Purpose
    resource: Resource
    namespace: str | None
    name: str
    body: bytes
    on_done: OnDone | None = field(default=None, compare=False, repr=False)

    @property
    def slot(self) -> Slot:
        return (self.purpose, self.namespace or "", self.name)

    async def perform(self, client: KubeClient) -> bytes:
        return await client.create(self.resource, self.namespace, self.body)


@dataclass(frozen=True, slots=True)
class MergePatch:
    purpose: Purpose
    resource: Resource
    namespace: str | None
    name: str
    patch: bytes
    subresource: str | None = None
    # Status-only writes of one object share a slot so they stay in order.
    slot_name: str | None = None
    on_done: OnDone | None = field(default=None, compare=False, repr=False)
    # Run on the loop as the write is sent: the patch to send then (e.g. its precondition moved
    # past our own writes that landed first; see own_moves).
    prepare: Callable[[bytes], bytes] | None = field(default=None, compare=False, repr=False)

    @property
    def slot(self) -> Slot:
        return (self.slot_name or self.purpose, self.namespace or "", self.name)

    async def perform(self, client: KubeClient) -> bytes:
        patch = self.patch if self.prepare is None else self.prepare(self.patch)
        return await client.merge_patch(
            self.resource, self.namespace, self.name, patch, subresource=self.subresource
        )


@dataclass(frozen=True, slots=True)
class Delete:
    purpose: Purpose
    resource: Resource
    namespace: str | None
    name: str
    on_done: OnDone | None = field(default=None, compare=False, repr=False)

    @property
    def slot(self) -> Slot:
        return (self.purpose, self.namespace or "", self.name)

    async def perform(self, client: KubeClient) -> bytes:
        await client.delete(self.resource, self.namespace, self.name, propagation="Background")
        return b""


@dataclass(frozen=True, slots=True)
class PostEvent:
    purpose: Purpose
    resource: Resource
    namespace: str
    body: bytes
    on_done: OnDone | None = field(default=None, compare=False, repr=False)

    @property
    def slot(self) -> Slot:
        return None

    async def perform(self, client: KubeClient) -> bytes:
        return await client.create(self.resource, self.namespace, self.body)


Action = Create | MergePatch | Delete | PostEvent


@dataclass(frozen=True, slots=True)
class WriteDone:
    """The outcome of one action: the API's response body, an error, or superseded (never sent)."""

    action: Action
    body: bytes | None = None
    error: KubeError | None = None
    superseded: bool = False
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None and not self.superseded

    @property
    def key(self) -> tuple[str, str]:
        """(namespace, name) of the object written ("" for a cluster-scoped object or an Event)."""
        return (self.action.namespace or "", getattr(self.action, "name", ""))


OnDone = Callable[[WriteDone], None]
