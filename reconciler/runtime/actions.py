"""Writes the reconciler asks for, as plain data, and how each is performed.

An action names its *slot*: at most one write per slot is in flight, and a
newer action for a busy slot replaces the one waiting behind it, so a burst
of status changes for one object becomes at most two writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from reconciler.api.resources import Resource
from reconciler.kube import KubeClient

__all__ = ["Action", "Create", "MergePatch", "PostEvent", "Slot"]

Slot = tuple[str, str, str] | None  # (purpose, namespace, name); None: never coalesced
Purpose = Literal[
    "create-workload",
    "admit",
    "workload-status",
    "finish",
    "release-finalizer",
    "evict",
    "requeue",
    "pods-ready",
    "deactivate",
    "job-start",
    "job-suspend",
    "job-restore",
    "job-clear-start",
    "cq-status",
    "lq-status",
    "event",
]


@dataclass(frozen=True, slots=True)
class Create:
    purpose: Purpose
    resource: Resource
    namespace: str | None
    name: str
    body: bytes

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

    @property
    def slot(self) -> Slot:
        return (self.slot_name or self.purpose, self.namespace or "", self.name)

    async def perform(self, client: KubeClient) -> bytes:
        return await client.merge_patch(
            self.resource, self.namespace, self.name, self.patch, subresource=self.subresource
        )


@dataclass(frozen=True, slots=True)
class PostEvent:
    purpose: Purpose
    resource: Resource
    namespace: str
    body: bytes

    @property
    def slot(self) -> Slot:
        return None

    async def perform(self, client: KubeClient) -> bytes:
        return await client.create(self.resource, self.namespace, self.body)


Action = Create | MergePatch | PostEvent
