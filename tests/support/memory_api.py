"""An in-memory API server for the reconciler harness: objects, resource versions, merge patches,
and the watch events that follow each write, so a flow runs end to end without hand-made events.

Each action the reconciler submits is performed as the API server would (a Create gets a UID and
a resource version, a merge patch is applied as RFC 7386 says, a Delete removes the object), its
`WriteDone` carries the API's response, and the watch event of the change is delivered after it.
Posted Events are kept in `events`. As the API server, an object starts at metadata.generation 1
and a write that changes its spec (not its status or metadata) moves the generation on. With
`finalizers=True` a deleted object that carries
finalizers stays, with its deletionTimestamp, until a write leaves it none (as the API server).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from reconciler.api.resources import Resource
from reconciler.kube import NotFound, WatchEvent
from reconciler.runtime.loop.reconciler import Reconciler
from reconciler.runtime.shared.actions import Action, Create, Delete, MergePatch, PostEvent, WriteDone

__all__ = ["MemoryApi", "merge"]

Ref = tuple[str, str, str]  # (plural, namespace, name)


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge(out.get(key), value)
    return out


def _changed(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """`after` with the generation the API server gives it: one more than `before`'s when the spec
    changed (a status or metadata change keeps it; a generation set by the writer is not kept)."""
    generation = before["metadata"].get("generation", 1)
    if after.get("spec") != before.get("spec"):
        generation += 1
    after["metadata"]["generation"] = generation
    return after


class MemoryApi:
    def __init__(self, reconciler: Reconciler, clock: Callable[[], str], *, finalizers: bool = False) -> None:
        self.reconciler = reconciler
        self.clock = clock
        self.finalizers = finalizers
        self.objects: dict[Ref, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self.resources = {row.resource.plural: row for row in reconciler.watched_kinds}
        self._rv = 1000
        self._uid = 0

    # --- what tests do to the cluster ---------------------------------------------------

    def add(self, resource: Resource, body: dict[str, Any]) -> None:
        """An object created by someone else (a user, another controller)."""
        meta = body.setdefault("metadata", {})
        self._uid += 1
        meta.setdefault("uid", f"uid-{self._uid}")
        meta.setdefault("namespace", "" if not resource.namespaced else meta.get("namespace", ""))
        meta["resourceVersion"] = self._next_rv()
        meta.setdefault("creationTimestamp", self.clock())
        meta.setdefault("generation", 1)
        self.objects[self._ref(resource, meta)] = body
        self._watch("ADDED", resource, body)

    def change(self, resource: Resource, namespace: str, name: str, patch: dict[str, Any]) -> None:
        """Someone else (the kubelet, the job's own controller) changes an object."""
        ref = (resource.plural, namespace, name)
        body = _changed(self.objects[ref], merge(self.objects[ref], patch))
        body["metadata"]["resourceVersion"] = self._next_rv()
        self.objects[ref] = body
        self._modified(ref, resource, body)

    def delete(self, resource: Resource, namespace: str, name: str) -> None:
        """Someone else deletes an object."""
        self._delete((resource.plural, namespace, name), resource)

    def get(self, resource: Resource, namespace: str, name: str) -> dict[str, Any]:
        return self.objects[(resource.plural, namespace, name)]

    def sync(self) -> None:
        for resource in self.reconciler.watched:
            self.reconciler.handle(WatchEvent("SYNCED", resource, ("", ""), None))

    def reasons(self, kind: str, name: str) -> list[str]:
        """The reasons of the Events posted about an object, in order."""
        return [
            e["reason"]
            for e in self.events
            if e["involvedObject"]["kind"] == kind and e["involvedObject"]["name"] == name
        ]

    # --- the reconciler's writes ---------------------------------------------------------

    def settle(self, take: Callable[[], list[Action]], rounds: int = 20) -> list[Action]:
        """Perform what the reconciler asks for, and what that leads to, until it asks nothing."""
        performed: list[Action] = []
        for _ in range(rounds):
            actions = take()
            if not actions:
                return performed
            for action in actions:
                self.perform(action)
            performed.extend(actions)
        raise AssertionError(f"still writing after {rounds} rounds: {[a.purpose for a in take()]}")

    def perform(self, action: Action) -> None:
        if isinstance(action, PostEvent):
            self.events.append(msgspec.json.decode(action.body))
            self.reconciler.handle(WriteDone(action, body=action.body))
            return
        ref = (action.resource.plural, action.namespace or "", action.name)
        if isinstance(action, Create):
            self.reconciler.handle(WriteDone(action, body=self._create(action, ref)))
            self._watch("ADDED", action.resource, self.objects[ref])
        elif ref not in self.objects:
            self.reconciler.handle(WriteDone(action, error=NotFound(404, "NotFound", f"{ref} not found")))
        elif isinstance(action, MergePatch):
            body = _changed(self.objects[ref], merge(self.objects[ref], msgspec.json.decode(action.patch)))
            body["metadata"]["resourceVersion"] = self._next_rv()
            self.objects[ref] = body
            self.reconciler.handle(WriteDone(action, body=msgspec.json.encode(body)))
            self._modified(ref, action.resource, body)
        elif isinstance(action, Delete):
            self.reconciler.handle(WriteDone(action, body=b""))
            self._delete(ref, action.resource)

    def _modified(self, ref: Ref, resource: Resource, body: dict[str, Any]) -> None:
        meta = body["metadata"]
        if self.finalizers and meta.get("deletionTimestamp") and not meta.get("finalizers"):
            del self.objects[ref]
            self._watch("DELETED", resource, body)
        else:
            self._watch("MODIFIED", resource, body)

    def _delete(self, ref: Ref, resource: Resource) -> None:
        body = self.objects[ref]
        meta = body["metadata"]
        if self.finalizers and meta.get("finalizers"):
            if not meta.get("deletionTimestamp"):
                meta["deletionTimestamp"] = self.clock()
                meta["resourceVersion"] = self._next_rv()
                self._watch("MODIFIED", resource, body)
            return
        del self.objects[ref]
        self._watch("DELETED", resource, body)

    def _create(self, action: Create, ref: Ref) -> bytes:
        body = msgspec.json.decode(action.body)
        meta = body.setdefault("metadata", {})
        self._uid += 1
        meta.update(uid=f"uid-{self._uid}", resourceVersion=self._next_rv(), generation=1)
        meta.setdefault("creationTimestamp", self.clock())
        self.objects[ref] = body
        return msgspec.json.encode(body)

    # --- watch events --------------------------------------------------------------------

    def _watch(self, kind: str, resource: Resource, body: dict[str, Any]) -> None:
        row = self.resources.get(resource.plural)
        if row is None:
            return  # not a watched kind
        meta = body["metadata"]
        obj = msgspec.json.decode(msgspec.json.encode(body), type=row.projection)
        key = (meta.get("namespace", ""), meta["name"])
        self.reconciler.handle(WatchEvent(kind, row.resource, key, obj))  # type: ignore[arg-type]

    def _ref(self, resource: Resource, meta: dict[str, Any]) -> Ref:
        return (resource.plural, meta.get("namespace", ""), meta["name"])

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)
